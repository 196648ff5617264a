"""Moving tuning logs between databases: JSONL export/import (lossless) and Kernel Tuner caches.

One JSONL line per trial carries its task, device and campaign in full, so a file
imported into an empty database and exported again gives identical lines.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import orjson
from sqlalchemy import select

from autotune.db.database import Database
from autotune.db.models import CampaignRow, DeviceRow, TaskRow, TrialRow, utcnow
from autotune.db.queries import _trial_filters
from autotune.errors import UsageError
from autotune.progress import Progress
from autotune.types import Device, Status, Task

FORMAT = "autotune-trials/1"


def _line(t: TrialRow, task: TaskRow, dev: DeviceRow, camp: CampaignRow | None) -> dict:
    return {
        "format": FORMAT,
        "task": {"key": task.key, "kind": task.kind, "name": task.name, "params": task.params},
        "device": {"key": dev.key, "name": dev.name, "kind": dev.kind, "properties": dev.properties},
        "campaign": None if camp is None else {
            "name": camp.name, "algorithm": camp.algorithm, "options": camp.options, "created": camp.created.isoformat()},
        "candidate_key": t.candidate_key, "candidate": t.candidate, "status": t.status, "cost": t.cost,
        "times": t.times, "predicted": t.predicted, "error": t.error, "build_s": t.build_s, "run_s": t.run_s,
        "simulated_s": t.simulated_s, "meta": t.meta, "created": t.created.isoformat(), "worker": t.worker,
    }


def export_lines(db: Database, campaign: str | None = None, task: str | None = None, device: str | None = None,
                 status: str | None = None, page: int = 5000) -> Iterator[str]:
    """The matching trials as JSON lines, oldest first, read ``page`` trials at a time (keyset pages), so
    memory stays bounded however large the log; each task, device and campaign is read once."""
    conds = _trial_filters(db, task, device)
    if status:
        conds.append(TrialRow.status == Status.parse(status).value)
    if campaign:
        conds.append(TrialRow.campaign_id == db.campaign(campaign).id)
    known: dict[type, dict[int, object]] = {TaskRow: {}, DeviceRow: {}, CampaignRow: {None: None}}
    last = 0
    while True:
        with db.session() as s:
            rows = s.scalars(select(TrialRow).where(*conds, TrialRow.id > last).order_by(TrialRow.id).limit(page)).all()
            for model, ids in ((TaskRow, {t.task_id for t in rows}), (DeviceRow, {t.device_id for t in rows}),
                               (CampaignRow, {t.campaign_id for t in rows})):
                missing = ids - known[model].keys()
                if missing:
                    known[model].update((r.id, r) for r in s.scalars(select(model).where(model.id.in_(missing))))
        for t in rows:
            yield json.dumps(_line(t, known[TaskRow][t.task_id], known[DeviceRow][t.device_id],
                                   known[CampaignRow][t.campaign_id]), sort_keys=True)
        if len(rows) < page:
            return
        last = rows[-1].id


def export_file(db: Database, path: str | Path, **filters) -> int:
    """Write the matching trials to ``path`` as JSON lines; returns how many. A regular file is written
    beside and renamed over ``path`` once complete, so an error or an interrupt part-way leaves the file
    that was there as it was; anything else (a pipe, /dev/stdout) is written in place."""
    path = Path(path)
    if path.exists() and not path.is_file():
        with open(path, "w") as f:
            return _write_lines(f, export_lines(db, **filters))
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        with open(part, "w") as f:
            n = _write_lines(f, export_lines(db, **filters))
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    return n


def _write_lines(f, lines) -> int:
    n = 0
    for line in lines:
        f.write(line + "\n")
        n += 1
    return n


class _BadLine(ValueError):
    """A line that is not a valid autotune trial; the message says which field and why."""


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise _BadLine(what)


def _finite(v, name: str, optional: bool = False) -> float | None:
    if type(v) is float and 0.0 <= v < math.inf:  # the common case, checked first
        return v
    if v is None and optional:
        return None
    _need(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0,
          f"{name} must be a finite non-negative number, not {v!r}"[:200])
    return float(v)


def _text(v, name: str) -> str:
    _need(isinstance(v, str), f"{name} must be a string")
    return v


def _mapping(v, name: str, optional: bool = False) -> dict:
    if v is None and optional:
        return {}
    _need(isinstance(v, dict), f"{name} must be an object")
    return v


class _LineParser:
    """Parses and validates JSONL trial lines; tasks, devices and campaigns repeated on many lines
    are checked once (a line whose task object equals an earlier one reuses its result)."""

    def __init__(self):
        self._tasks: dict[str, tuple[dict, Task]] = {}
        self._devices: dict[str, tuple[dict, Device]] = {}
        self._campaigns: dict[str, tuple[dict, dict]] = {}

    def task(self, t) -> Task:
        t = _mapping(t, "task")
        seen = self._tasks.get(_text(t.get("key"), "task.key"))
        if seen is not None and seen[0] == t:
            return seen[1]
        task = Task(_text(t.get("kind"), "task.kind"), _text(t.get("name"), "task.name"),
                    _mapping(t.get("params"), "task.params"))
        _need(task.key == t.get("key"), "the task key does not match its content (the file was edited)")
        self._tasks[task.key] = (t, task)
        return task

    def device(self, dv) -> Device:
        dv = _mapping(dv, "device")
        seen = self._devices.get(_text(dv.get("key"), "device.key"))
        if seen is not None and seen[0] == dv:
            return seen[1]
        device = Device(_text(dv.get("name"), "device.name"), _text(dv.get("kind"), "device.kind"),
                        _mapping(dv.get("properties"), "device.properties", optional=True))
        _need(device.key == dv.get("key"), "the device key does not match its content (the file was edited)")
        self._devices[device.key] = (dv, device)
        return device

    def campaign(self, c) -> dict | None:
        if c is None:
            return None
        c = _mapping(c, "campaign")
        seen = self._campaigns.get(_text(c.get("name"), "campaign.name"))
        if seen is not None and seen[0] == c:
            return seen[1]
        out = {"name": _text(c.get("name"), "campaign.name"), "algorithm": _text(c.get("algorithm"), "campaign.algorithm"),
               "options": _mapping(c.get("options"), "campaign.options", optional=True),
               "created": _when(c.get("created"), "campaign.created")}
        _need(out["name"].strip() != "", "campaign.name is empty")
        self._campaigns[out["name"]] = (c, out)
        return out

    def line(self, text: str) -> tuple[Task, Device, dict | None, dict]:
        """(task, device, campaign or None, trial row without ids) of one line; _BadLine if invalid."""
        try:
            d = orjson.loads(text)  # strict JSON: NaN, Infinity and runaway nesting are errors
        except (ValueError, RecursionError) as exc:
            raise _BadLine(f"not JSON ({str(exc)[:100]})") from None
        _need(isinstance(d, dict), "a line must be a JSON object")
        _need(d.get("format") == FORMAT, f"format is {str(d.get('format'))[:40]!r}, expected {FORMAT!r}")
        missing = [k for k in _LINE_KEYS if k not in d]
        _need(not missing, f"missing field(s) {', '.join(missing)}")
        task, device, campaign = self.task(d["task"]), self.device(d["device"]), self.campaign(d["campaign"])
        status = d["status"]
        _need(isinstance(status, str) and status in _STATUSES, f"status must be one of {', '.join(sorted(_STATUSES))}")
        cost = _finite(d["cost"], "cost", optional=True)
        _need((cost is not None) == (status == Status.OK.value), "cost must be given exactly when status is OK")
        row = {
            "candidate_key": _text(d["candidate_key"], "candidate_key"), "candidate": _mapping(d["candidate"], "candidate"),
            "status": status, "cost": cost, "times": _times(d["times"]),
            "predicted": _number(d["predicted"], "predicted"), "error": _text(d["error"] or "", "error"),
            "build_s": _finite(d["build_s"], "build_s"), "run_s": _finite(d["run_s"], "run_s"),
            "simulated_s": _finite(d["simulated_s"], "simulated_s"), "meta": _mapping(d["meta"], "meta", optional=True),
            "created": _when(d["created"], "created"), "worker": _text(d["worker"] or "", "worker"),
        }
        return task, device, campaign, row


def _times(v) -> list[float]:
    _need(isinstance(v, list), "times must be a list")
    if not v:
        return v
    kinds = set(map(type, v))
    # non-negative numbers whose sum is finite are all finite
    _need(kinds <= {int, float} and min(v) >= 0 and math.isfinite(sum(v)), "times must be finite non-negative numbers")
    return v if kinds == {float} else [float(x) for x in v]


def _number(v, name: str) -> float | None:
    if v is None:
        return None
    _need(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), f"{name} must be a finite number")
    return float(v)


def _when(v, name: str) -> datetime:
    _need(isinstance(v, str), f"{name} must be an ISO date-time string")
    try:
        return datetime.fromisoformat(v)
    except ValueError:
        raise _BadLine(f"{name} {v[:40]!r} is not an ISO date-time") from None


_LINE_KEYS = ("task", "device", "campaign", "candidate_key", "candidate", "status", "cost", "times", "predicted",
              "error", "build_s", "run_s", "simulated_s", "meta", "created", "worker")
_STATUSES = {s.value for s in Status}


def count_lines(path: str | Path) -> int:
    """Lines of a file (a last line without a newline counts), read in binary chunks: a quick first pass
    that gives a progress bar its total."""
    n, last = 0, b"\n"
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    return n + (last != b"\n")


def jsonl_path(path: str | Path) -> Path:
    """``path`` as a Path when it is a file; UsageError otherwise."""
    path = Path(path)
    try:
        found = path.is_file()
    except OSError:  # e.g. a name too long for the file system
        found = False
    if not found:
        raise UsageError(f"file {str(path)[:200]!r} does not exist; give a JSONL file written by autotune export")
    return path


def import_file(db: Database, path: str | Path, batch: int = 5000,
                progress: Progress | None = None) -> tuple[int, int]:
    """Import a JSONL export in one transaction: every line is validated, and the trials are stored
    all together or not at all (a bad line, or a database error, leaves the database as it was).
    Trials already present (same task, device and candidate) are kept as they are.
    Returns (lines read, trials added). ``progress``: a phase counting the file's lines (counted
    first when the bar is drawn)."""
    path = jsonl_path(path)
    bar = progress or Progress("import", enabled=False)
    parser = _LineParser()
    read = added = 0
    tid: dict[int, int] = {}
    did: dict[int, int] = {}
    cid: dict[str, tuple[int, int, int]] = {}
    pending: dict[tuple[int, int, int | None], list] = {}
    total = count_lines(path) if bar.shown else None
    with bar.phase(f"importing {path.name}", total=total), db.session() as s, \
            open(path, encoding="utf-8", errors="strict") as f:

        def flush() -> None:
            nonlocal added
            for (t, dv, c), items in pending.items():
                added += db.insert_rows(s, items)
                if c is not None:
                    ids = db.trial_ids(s, t, dv, [r["candidate_key"] for r in items])
                    db.link(s, c, [ids[r["candidate_key"]] for r in items], [False] * len(items))
            pending.clear()

        lineno = 0
        try:
            for lineno, text in enumerate(f, 1):
                if not text.strip():
                    continue
                task, device, camp, row = parser.line(text)
                t, dv = tid.get(id(task)), did.get(id(device))  # parsed objects are shared by equal lines
                if t is None:
                    t = tid[id(task)] = db.row_id_in(s, task)
                if dv is None:
                    dv = did[id(device)] = db.row_id_in(s, device)
                c = None
                if camp is not None:
                    if camp["name"] not in cid:
                        cid[camp["name"]] = (_campaign_in(db, s, camp, t, dv), t, dv)
                    c, ct, cd = cid[camp["name"]]
                    _need((ct, cd) == (t, dv), f"campaign {camp['name']!r} appears with two tasks or devices")
                row.update(task_id=t, device_id=dv, campaign_id=c)
                pending.setdefault((t, dv, c), []).append(row)
                read += 1
                if read % batch == 0:
                    flush()
                    bar.update(completed=lineno)
            flush()
            bar.update(completed=lineno)
        except _BadLine as exc:
            raise UsageError(f"{path}:{lineno} is not a valid autotune trial line: {exc}; nothing was imported") from None
        except UnicodeDecodeError:
            raise UsageError(f"{path} is not UTF-8 text; give a JSONL file written by autotune export; "
                             "nothing was imported") from None
    db._ids.clear()  # ids cached earlier may name rows that a rolled-back import created
    return read, added


def _campaign_in(db: Database, s, c: dict, task_id: int, device_id: int) -> int:
    """The campaign's id, created (status "imported", its original creation time) when new."""
    row = s.scalar(select(CampaignRow).where(CampaignRow.name == c["name"]))
    if row is None:
        row = CampaignRow(name=c["name"], task_id=task_id, device_id=device_id, algorithm=c["algorithm"],
                          options=c["options"], status="imported", created=c["created"], updated=utcnow())
        s.add(row)
        s.flush()
    elif (row.task_id, row.device_id) != (task_id, device_id):
        raise UsageError(f"campaign {c['name']!r} already exists in this database for another task or device; "
                         "nothing was imported")
    return row.id


def import_kt(db: Database, spec, batch: int = 5000,
              progress: Progress | None = None) -> tuple[Task, Device, int, int]:
    """Store every configuration of a Kernel Tuner cache (a path, ``example:NAME`` or a loaded KTCache) as a
    trial of its task and device, ``batch`` per transaction; ``progress``: a phase counting the cache's
    records as they are stored."""
    from autotune.runners.replay import record_measurement, replay_device
    from autotune.search_spaces.replay import KTCache
    from autotune.types import Candidate

    bar = progress or Progress("import-kt", enabled=False)
    cache = spec if isinstance(spec, KTCache) else KTCache.load(spec)
    task, device = cache.task(), replay_device(cache)
    worker = f"import-kt:{Path(cache.path).name}"
    records = list(cache.records.items())
    added = 0
    with bar.phase(f"importing {Path(cache.path).name}", total=len(records)):
        for i in range(0, len(records), batch):
            ms = [record_measurement(cache, Candidate(cache.config(values)), rec) for values, rec in records[i:i + batch]]
            added += db.add_trials(task, device, ms, worker=worker)
            bar.advance(len(ms))
    return task, device, len(records), added

