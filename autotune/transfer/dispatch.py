"""best_config(task, device, db=...): the configuration to use for a task on a device.

1. the device measured the task: its best measured configuration (``source="measured"``);
2. else the configuration expected best from the most similar devices that measured it
   (``source="transfer"``, with the devices, their similarity and why);
3. else the task's default, where the caller knows it (``source="default"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from autotune.cost_models.features import positive_costs
from autotune.db import transfer as store
from autotune.db.names import UnknownName, resolve
from autotune.errors import UsageError, argument
from autotune.transfer.similarity import rank_similar
from autotune.types import Device, Measurement, Task


@dataclass
class BestConfig:
    task: Task
    device: Device
    config: dict | None
    source: str  # measured, transfer, default
    cost: float | None = None  # measured on the device itself (source measured)
    from_devices: list[dict] = field(default_factory=list)  # similar devices the config came from

    def to_json(self) -> dict:
        return {"task": self.task.name, "task_key": self.task.key, "device": self.device.name,
                "config": self.config, "source": self.source, "cost": self.cost, "from": self.from_devices}


def as_device(db, device: Device | str) -> Device:
    """A Device object as is; a name or key from the database (as every command takes one: exactly, differing
    only in case, or a unique key prefix), else a GPU named in the known table, else a device of no known kind."""
    if isinstance(device, Device):
        return device
    if not isinstance(device, str) or not device.strip():
        raise UsageError(f"{argument('device')} must name a device (a name or key in the database, or a GPU of the "
                         f"known table), not {device!r}")
    found = store.find_device(db, device)
    if found is None:
        try:
            stored = resolve(db, "device", device)
        except UnknownName:  # a name the database does not have at all (an ambiguous one is an error)
            stored = None
        found = store.find_device(db, stored) if stored is not None else None
    if found is not None:
        return found
    from autotune.gpus import gpu_properties

    props = gpu_properties(device)
    return Device(device, "cuda" if props else "unknown", props)


def newest_by_name(db, names: dict[str, str]) -> dict[str, str]:
    """{name: key of the device stored last} over ``names`` (device key: name): a device name stored as several
    devices (a GPU measured again after a driver update changed its probed properties) stands for the newest."""
    added = {d.key: i for i, d in enumerate(store.devices(db))}  # the order the devices were stored in
    newest: dict[str, str] = {}
    for key, name in names.items():
        if name not in newest or added.get(key, -1) > added.get(newest[name], -1):
            newest[name] = key
    return newest


def measured_device(db, device: Device | str, trials: dict) -> Device:
    """``as_device(db, device)``, where a name (not a key) of several stored devices stands for the one stored last
    that measured the task successfully (``trials``: autotune.db.transfer.task_trials of the task)."""
    found = as_device(db, device)
    if not isinstance(device, str) or found.key.startswith(device.strip().casefold()) \
            or _best(trials.get(found.key, (found, []))[1]) is not None:
        return found
    newest = newest_by_name(db, {k: d.name for k, (d, ms) in trials.items()
                                 if d.name == found.name and _best(ms) is not None})
    return trials[newest[found.name]][0] if newest else found


def _best(ms: list[Measurement]) -> Measurement | None:
    ok = [m for m in ms if m.ok]
    return min(ok, key=lambda m: m.cost) if ok else None


def cost_ratios(ms: list[Measurement]) -> list[tuple[Measurement, float]]:
    """(measurement, cost / the best cost) of each successful one of ``ms``, the costs read through
    ``positive_costs``: a cost of 0 is the best (ratio 1) and the others' ratios to it are finite."""
    ok = [m for m in ms if m.ok]
    costs = positive_costs([m.cost for m in ok])
    best = float(costs.min()) if ok else 0.0
    return [(m, float(c) / best) for m, c in zip(ok, costs)]


def consensus(per_device: list[tuple[list[Measurement], float]]) -> tuple[dict, dict] | None:
    """The configuration with the best weighted mean of -log(cost/best) over the devices that
    measured it, among those measured by every device (else by the most devices); costs of 0 (the
    best) are read through ``positive_costs``."""
    scores: dict[str, list[tuple[float, float]]] = {}
    payload: dict[str, dict] = {}
    for ms, w in per_device:
        for m, ratio in cost_ratios(ms):
            scores.setdefault(m.candidate.key, []).append((w, -math.log(ratio)))
            payload[m.candidate.key] = m.candidate.payload
    if not scores:
        return None
    most = max(len(v) for v in scores.values())
    key = max((k for k, v in scores.items() if len(v) == most),
              key=lambda k: (np.average([s for _, s in scores[k]], weights=[max(w, 1e-9) for w, _ in scores[k]]), k))
    return payload[key], {"devices_measured": most}


def best_config(task: Task | str, device: Device | str, db=None, sources: int = 3, margin: float = 0.05,
                default: dict | None = None) -> BestConfig:
    """The best configuration for ``task`` on ``device``; ``db`` a Database or URL (default sqlite:///autotune.db).

    Without measurements of its own, the device borrows from the most similar tuned devices:
    the most similar one and any within ``margin`` of its similarity (at most ``sources``). A device of
    another kind (a CPU for a GPU) has similarity 0 and is never borrowed from."""
    if isinstance(sources, bool) or not isinstance(sources, int) or sources < 1:
        raise UsageError(f"sources must be a whole number of at least 1, not {sources!r}")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin < math.inf:
        raise UsageError(f"margin must be a finite number of at least 0, not {margin!r}")
    own = db is None or isinstance(db, str)
    if own:
        from autotune.db import open_existing_database

        db = open_existing_database(db or "sqlite:///autotune.db")  # a query: a missing file is not created
    try:
        task = store.resolve_task(db, task)
        trials = store.task_trials(db, task)
        device = measured_device(db, device, trials)
        mine = trials.get(device.key, (device, []))[1]
        best = _best(mine)
        if best is not None:
            return BestConfig(task, device, dict(best.candidate.payload), "measured", best.cost)
        # one device per name, the one stored last that measured the task (as export-configs ships it)
        tuned = {k: trials[k] for k in newest_by_name(db, {k: d.name for k, (d, ms) in trials.items()
                                                             if k != device.key and _best(ms) is not None}).values()}
        if tuned:
            ranked = rank_similar(device, [d for d, _ in tuned.values()], {k: v[1] for k, v in tuned.items()}, mine)
            # a device of another kind (similarity 0) says nothing about this one; a name of no known kind
            # (not stored, not in the GPU table) is compared with every device alike
            usable = [s for s in ranked if s.score > 0 or device.kind == "unknown"]
            top = [s for s in usable if s.score >= usable[0].score - margin][:sources] if usable else []
            picked = consensus([(tuned[s.device.key][1], s.score) for s in top]) if top else None
            if picked is not None:
                return BestConfig(task, device, dict(picked[0]), "transfer",
                                  from_devices=[s.to_json() for s in top])
        if default is not None:
            return BestConfig(task, device, dict(default), "default")
        if tuned:
            kinds = ", ".join(sorted({d.kind for d, _ in tuned.values()}))
            raise UsageError(f"no device like {device.name!r} ({device.kind}) has a successful measurement of task "
                             f"{task.name!r} (only devices of kind {kinds}) and no default configuration was given")
        raise UsageError(f"no device has a successful measurement of task {task.name!r} ({task.key}) and no "
                         "default configuration was given")
    finally:
        if own:
            db.close()
