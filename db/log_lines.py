"""One line of a tuning log (the JSONL files ``autotune export`` writes), parsed and checked: every field's type
and range, and the keys of tasks and devices against their content, so an edited or damaged line is refused
with the field and the reason (:class:`BadLine`) before anything is stored."""

from __future__ import annotations

import base64
import json
import math
from datetime import datetime

import orjson

from autotune.types import Device, Status, Task


#: the format of the lines ``export`` writes; files of "autotune-trials/1" (trial lines alone, each linked to its
#: campaign as it is read) are read too
FORMAT = "autotune-trials/2"
FORMATS = ("autotune-trials/1", FORMAT)


class BadLine(ValueError):
    """A line that is not a valid autotune trial; the message says which field and why."""


def need(ok: bool, what: str) -> None:
    if not ok:
        raise BadLine(what)


def _finite(v, name: str, optional: bool = False) -> float | None:
    if type(v) is float and 0.0 <= v < math.inf:  # the common case, checked first
        return v
    if v is None and optional:
        return None
    need(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0,
          f"{name} must be a finite non-negative number, not {v!r}"[:200])
    return float(v)


def _text(v, name: str) -> str:
    need(isinstance(v, str), f"{name} must be a string")
    return v


def _mapping(v, name: str, optional: bool = False) -> dict:
    if v is None and optional:
        return {}
    need(isinstance(v, dict), f"{name} must be an object")
    return v


class LineParser:
    """Parses and validates JSONL trial lines; tasks, devices and campaigns repeated on many lines
    are checked once (a line whose task object equals an earlier one reuses its result)."""

    def __init__(self):
        self._tasks: dict[str, tuple[dict, Task]] = {}
        self._devices: dict[str, tuple[dict, Device]] = {}
        self._campaigns: dict[str, tuple[dict, dict]] = {}

    def _keyed(self, seen: dict, v, what: str, make):
        """The task or device (``what``) of a line's object ``v``, made by ``make`` and checked against the key the
        object gives; an object equal to one read before reuses what was made of it."""
        v = _mapping(v, what)
        known = seen.get(_text(v.get("key"), f"{what}.key"))
        if known is not None and known[0] == v:
            return known[1]
        made = make(v)
        need(made.key == v.get("key"), f"the {what} key does not match its content (the file was edited)")
        seen[made.key] = (v, made)
        return made

    def task(self, t) -> Task:
        return self._keyed(self._tasks, t, "task", lambda t: Task(
            _text(t.get("kind"), "task.kind"), _text(t.get("name"), "task.name"), _mapping(t.get("params"), "task.params")))

    def device(self, dv) -> Device:
        return self._keyed(self._devices, dv, "device", lambda dv: Device(
            _text(dv.get("name"), "device.name"), _text(dv.get("kind"), "device.kind"),
            _mapping(dv.get("properties"), "device.properties", optional=True)))

    def campaign(self, c) -> dict | None:
        if c is None:
            return None
        c = _mapping(c, "campaign")
        seen = self._campaigns.get(_text(c.get("name"), "campaign.name"))
        if seen is not None and seen[0] == c:
            return seen[1]
        # status and updated: in files of "autotune-trials/2"; an older file's campaign is "imported", now
        status, updated = c.get("status", "imported"), c.get("updated")
        need(isinstance(status, str) and 0 < len(status) <= 32, "campaign.status must be a string of 1 to 32 characters")
        out = {"name": _text(c.get("name"), "campaign.name"), "algorithm": _text(c.get("algorithm"), "campaign.algorithm"),
               "options": _mapping(c.get("options"), "campaign.options", optional=True),
               "created": _when(c.get("created"), "campaign.created"), "status": status,
               "updated": None if updated is None else _when(updated, "campaign.updated")}
        need(out["name"].strip() != "", "campaign.name is empty")
        self._campaigns[out["name"]] = (c, out)
        return out

    def parse(self, text: str) -> tuple:
        """One line, by its kind; BadLine if invalid: ("trial", task, device, campaign or None, trial row
        without ids), ("history", task, device, campaign, [(candidate key, reused), ...], algorithm state or
        None), ("task", task), ("device", device), ("model", model row), ("begin",) or ("end", lines)."""
        try:
            d = orjson.loads(text)  # strict JSON: NaN, Infinity and runaway nesting are errors
        except (ValueError, RecursionError) as exc:
            raise BadLine(f"not JSON ({str(exc)[:100]})") from None
        need(isinstance(d, dict), "a line must be a JSON object")
        need(d.get("format") in FORMATS,
              f"format is {str(d.get('format'))[:40]!r}, expected {' or '.join(map(repr, FORMATS))}")
        if "export" in d:
            need(d["export"] in ("begin", "end"), "export must be \"begin\" or \"end\"")
            if d["export"] == "begin":
                return ("begin",)
            n = d.get("lines")
            need(type(n) is int and n >= 0, "lines must be a whole number >= 0")
            return "end", n
        if set(d) == {"format", "task"}:
            return "task", self.task(d["task"])
        if set(d) == {"format", "device"}:
            return "device", self.device(d["device"])
        if "model" in d:
            return "model", self.model(d)
        if "links" in d:
            missing = [k for k in ("task", "device", "campaign") if k not in d]
            need(not missing, f"missing field(s) {', '.join(missing)}")
            need(d["campaign"] is not None, "a campaign's history line needs its campaign")
            return "history", self.task(d["task"]), self.device(d["device"]), self.campaign(d["campaign"]), \
                _links(d["links"]), _state(d.get("state"))
        return ("trial", *self.line(d))

    def model(self, d: dict) -> dict:
        """A stored cost model's row (its campaign by name, its task and device parsed), of a model's line."""
        m = _mapping(d["model"], "model")
        missing = [k for k in ("name", "campaign", "n_samples", "metrics", "format", "created", "pinned", "data")
                   if k not in m]
        need(not missing, f"missing model field(s) {', '.join(missing)}")
        need(m["campaign"] is None or isinstance(m["campaign"], str), "model.campaign must be a name or null")
        need(type(m["n_samples"]) is int and m["n_samples"] >= 0, "model.n_samples must be a whole number >= 0")
        need(type(m["pinned"]) is bool, "model.pinned must be true or false")
        try:
            data = base64.b64decode(_text(m["data"], "model.data"), validate=True)
        except ValueError:
            raise BadLine("model.data is not base64") from None
        return {"name": _text(m["name"], "model.name"), "campaign": m["campaign"], "n_samples": m["n_samples"],
                "metrics": _mapping(m["metrics"], "model.metrics"), "format": _text(m["format"], "model.format"),
                "created": _when(m["created"], "model.created"), "pinned": m["pinned"], "data": data,
                "task": None if d.get("task") is None else self.task(d["task"]),
                "device": None if d.get("device") is None else self.device(d["device"])}

    def line(self, d: dict) -> tuple[Task, Device, dict | None, dict]:
        """(task, device, campaign or None, trial row without ids) of a trial's line; BadLine if invalid."""
        missing = [k for k in _LINE_KEYS if k not in d]
        need(not missing, f"missing field(s) {', '.join(missing)}")
        task, device, campaign = self.task(d["task"]), self.device(d["device"]), self.campaign(d["campaign"])
        status = d["status"]
        need(isinstance(status, str) and status in _STATUSES, f"status must be one of {', '.join(sorted(_STATUSES))}")
        cost = _finite(d["cost"], "cost", optional=True)
        need((cost is not None) == (status == Status.OK.value), "cost must be given exactly when status is OK")
        row = {
            "candidate_key": _text(d["candidate_key"], "candidate_key"), "candidate": _mapping(d["candidate"], "candidate"),
            "status": status, "cost": cost, "times": _times(d["times"]),
            "predicted": _number(d["predicted"], "predicted"), "error": _text(d["error"] or "", "error"),
            "build_s": _finite(d["build_s"], "build_s"), "run_s": _finite(d["run_s"], "run_s"),
            "simulated_s": _finite(d["simulated_s"], "simulated_s"), "meta": _mapping(d["meta"], "meta", optional=True),
            "created": _when(d["created"], "created"), "worker": _text(d["worker"] or "", "worker"),
        }
        return task, device, campaign, row


def _state(v) -> dict | None:
    """A campaign's algorithm state, written as JSON text; None when the line has none."""
    if v is None:
        return None
    try:  # as the database keeps it: a state may hold Infinity, which JSON columns store so
        state = json.loads(_text(v, "state"))
    except (ValueError, RecursionError):
        raise BadLine("state is not JSON text of an object") from None
    need(isinstance(state, dict), "state is not JSON text of an object")
    return state


def _links(v) -> list[tuple[str, bool]]:
    need(isinstance(v, list), "links must be a list")
    for x in v:
        need(isinstance(x, list) and len(x) == 2 and isinstance(x[0], str) and type(x[1]) is bool,
              "each link must be [candidate key, whether it was a look-up]")
    return v


def _times(v) -> list[float]:
    need(isinstance(v, list), "times must be a list")
    if not v:
        return v
    kinds = set(map(type, v))
    # non-negative numbers whose sum is finite are all finite
    need(kinds <= {int, float} and min(v) >= 0 and math.isfinite(sum(v)), "times must be finite non-negative numbers")
    return v if kinds == {float} else [float(x) for x in v]


def _number(v, name: str) -> float | None:
    if v is None:
        return None
    need(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), f"{name} must be a finite number")
    return float(v)


def _when(v, name: str) -> datetime:
    need(isinstance(v, str), f"{name} must be an ISO date-time string")
    try:
        return datetime.fromisoformat(v)
    except ValueError:
        raise BadLine(f"{name} {v[:40]!r} is not an ISO date-time") from None


_LINE_KEYS = ("task", "device", "campaign", "candidate_key", "candidate", "status", "cost", "times", "predicted",
              "error", "build_s", "run_s", "simulated_s", "meta", "created", "worker")
_STATUSES = {s.value for s in Status}
