"""Shipping tuned configurations: the best per device plus a fallback, as JSON or a C header.

The fallback is the configuration that is good across all the exported devices: among the
configurations every such device measured successfully, the one minimising the worst ratio
of its cost to each device's best (ties: the geometric mean of the ratios). Costs of 0 are read
through autotune.cost_models.features.positive_costs: a configuration at a device's best of 0 ranks
first there, and the ratios are not reported when it costs more than 0 on such a device. Without
such a common configuration, the consensus of the devices (autotune.transfer.dispatch.consensus).

The C header has one ``#if defined(AUTOTUNE_DEVICE_<NAME>)`` block per device (NAME: the
device name in capitals, other characters as underscores) and an ``#else`` block with the
fallback; each block defines ``<PREFIX>_<KNOB>`` for every knob and ``<PREFIX>_DEVICE``. Names that would
share one macro (two knobs, a knob and ``<PREFIX>_DEVICE``, two devices) are refused before any text is made.
"""

from __future__ import annotations

import math

import numpy as np

from autotune.db import transfer as store
from autotune.errors import UsageError, argument
from autotune.search_spaces.kernels.macros import check_macros, macro_name
from autotune.transfer.dispatch import _best, consensus, cost_ratios, measured_device, newest_by_name
from autotune.types import Task

__all__ = ["c_header", "export_configs", "fallback_config"]


def fallback_config(per_device: dict[str, list]) -> dict | None:
    """{"config", "worst_ratio", "geomean_ratio"} for the config best across all devices' measurements."""
    bests = {k: _best(ms) for k, ms in per_device.items()}
    bests = {k: b for k, b in bests.items() if b is not None}
    if not bests:
        return None
    costs: dict[str, dict[str, float]] = {}
    payload: dict[str, dict] = {}
    above_zero: set[str] = set()  # configurations above 0 on a device whose best is 0: no true ratio there
    for k, ms in per_device.items():
        if k not in bests:
            continue
        for m, ratio in cost_ratios(ms):
            costs.setdefault(m.candidate.key, {})[k] = ratio
            payload[m.candidate.key] = m.candidate.payload
            if bests[k].cost == 0 < m.cost:
                above_zero.add(m.candidate.key)
    common = [c for c, r in costs.items() if len(r) == len(bests)]
    if common:
        def rank(c):
            r = list(costs[c].values())
            return (max(r), float(np.exp(np.mean(np.log(r)))), c)

        c = min(common, key=rank)
        worst, geo, _ = rank(c)
        if c in above_zero:
            return {"config": payload[c], "worst_ratio": None, "geomean_ratio": None,
                    "basis": f"measured on all {len(bests)} devices; no ratio to each device's best, as it costs "
                             "more than 0 where a device's best is 0"}
        return {"config": payload[c], "worst_ratio": round(worst, 4), "geomean_ratio": round(geo, 4),
                "basis": f"measured on all {len(bests)} devices"}
    picked = consensus([(per_device[k], 1.0) for k in bests])
    return {"config": picked[0], "worst_ratio": None, "geomean_ratio": None,
            "basis": f"no configuration measured on all devices; consensus of {picked[1]['devices_measured']}"}


def export_configs(db, task: Task | str, devices: list[str] | None = None) -> dict:
    """{"task", "task_key", "cost_unit", "devices": [{"device", "key", "config", "cost"}], "fallback": {...}}:
    ``cost_unit`` is "s" for a measured time, "" for a minimized function's value.

    A device name stored as several devices (a GPU whose probed properties changed, a driver update) is
    answered by the one added last that measured the task successfully: the rows of the others carry
    ``superseded_by`` (that one's key) and are left out of the fallback and of the C header."""
    task = store.resolve_task(db, task)
    trials = store.task_trials(db, task)
    if devices:
        wanted = {}
        for name in devices:
            d = measured_device(db, name, trials)
            if d.key not in trials:
                have = ", ".join(sorted({dev.name for dev, _ in trials.values()})) or "none"
                raise UsageError(f"device {name!r} has no measurements of task {task.name!r}; devices with some: {have}")
            if _best(trials[d.key][1]) is None:
                raise UsageError(f"device {name!r} has no successful measurement of task {task.name!r} (every one of its "
                                 f"{len(trials[d.key][1])} failed): it has no configuration to export")
            wanted[d.key] = trials[d.key]
        trials = wanted
    rows, per_device = [], {}
    for key, (dev, ms) in trials.items():
        best = _best(ms)
        if best is None:
            continue
        per_device[key] = ms
        rows.append({"device": dev.name, "key": key, "config": best.candidate.payload, "cost": best.cost})
    if not rows:
        raise UsageError(f"no device has a successful measurement of task {task.name!r} ({task.key})")
    newest = newest_by_name(db, {row["key"]: row["device"] for row in rows})
    for row in rows:
        if newest[row["device"]] != row["key"]:
            row["superseded_by"] = newest[row["device"]]
            per_device.pop(row["key"])
    return {"task": task.name, "task_key": task.key, "cost_unit": "" if task.kind == "function" else "s",
            "devices": rows, "fallback": fallback_config(per_device)}


def c_string(text) -> str:
    """``text`` as a C string literal: printable ASCII as is (backslash, quote and '?' escaped, so no
    trigraph forms), every other byte of its UTF-8 as an octal escape. Nothing in it can end the literal."""
    out = []
    for b in str(text).encode("utf-8"):
        c = chr(b)
        if c in '\\"?':
            out.append("\\" + c)
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def c_comment_text(text) -> str:
    """``text`` made safe inside a /* */ comment on one line: no comment end, no newline, printable ASCII."""
    flat = "".join(c if " " <= c <= "~" else "?" for c in str(text))
    return flat.replace("*/", "*_/").replace("/*", "/_*")


def _c_value(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else "0"
    return c_string(v)


def c_header(doc: dict, prefix: str | None = None) -> str:
    prefix = macro_name(prefix or doc["task"])
    guard = f"AUTOTUNE_{prefix}_CONFIG_H"
    lines = [f"/* Tuned configurations of {c_comment_text(doc['task'])} (task {c_comment_text(doc['task_key'])}), "
             "written by autotune export-configs.",
             " * Define AUTOTUNE_DEVICE_<NAME> for the target device before including this header;",
             " * without one, the fallback (good across all the devices below) applies. */",
             f"#ifndef {guard}", f"#define {guard}", ""]
    rows = [r for r in doc["devices"] if not r.get("superseded_by")]  # an older row of a name: the newer answers
    selectors = [(f"AUTOTUNE_DEVICE_{macro_name(r['device'])}", f"device {r['device']!r}") for r in rows]
    check_macros(selectors, "a C header", f"export them apart ({argument('devices')})")
    fb = doc.get("fallback")
    knobs = dict.fromkeys(k for r in [*rows, *([fb] if fb else [])] for k in r["config"])
    check_macros([(guard, "the include guard"), (f"{prefix}_DEVICE", "the device name"), *selectors,
                  *((f"{prefix}_{macro_name(k)}", f"knob {k!r}") for k in knobs)], "a C header",
                 "export the task as JSON")
    for i, ((dev, _), row) in enumerate(zip(selectors, rows)):
        unit = "" if doc.get("cost_unit") == "" else " s"
        lines.append(f"#{'if' if i == 0 else 'elif'} defined({dev})  /* best measured cost {float(row['cost']):.6g}{unit} */")
        lines += _block(prefix, row["config"], row["device"])
    if fb is not None:
        worst = "" if fb["worst_ratio"] is None else f"; worst ratio to each device's best {fb['worst_ratio']}"
        lines.append(f"#else  /* fallback: {c_comment_text(fb['basis'])}{worst} */")
        lines += _block(prefix, fb["config"], "fallback")
    lines += ["#endif", "", f"#endif  /* {guard} */", ""]
    return "\n".join(lines)


def _block(prefix: str, config: dict, device: str) -> list[str]:
    out = [f"#define {prefix}_DEVICE {c_string(device)}"]
    out += [f"#define {prefix}_{macro_name(k)} {_c_value(v)}" for k, v in config.items()]
    return out
