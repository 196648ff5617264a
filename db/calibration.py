"""Measured op and collective times from the experiment database override the simulator's estimates.

Conventions for the trials the simulator reads (any runner may record them):
- op times: task kind ``parallel-op``, name ``Cluster.op_key(op type, per-partition dims)``
  (e.g. ``linear:a0=8,a1=1024,o=4096,i=1024``), params ``{"direction": "fwd" | "bwd"}``;
- collectives: task kind ``collective``, name ``allreduce``, params ``{"group": n, "bytes": b}``;
cost in seconds, on a device whose name contains the cluster's device name (``A100``
matches ``NVIDIA A100-SXM4-80GB``) unless another name is given. The fastest OK trial
per key is used; collective points are interpolated log-log in bytes.
"""

from __future__ import annotations

from sqlalchemy import and_, func, select

from autotune.db.models import DeviceRow, TaskRow, TrialRow
from autotune.types import Candidate, Device, Measurement, Status, Task


def op_task(key: str, backward: bool = False) -> Task:
    return Task("parallel-op", key, {"direction": "bwd" if backward else "fwd"})


def collective_task(group: int, nbytes: int, kind: str = "allreduce") -> Task:
    return Task("collective", kind, {"group": int(group), "bytes": int(nbytes)})


def record(db, device: Device, op_times: dict[str, float] = (), collectives: list = ()) -> int:
    """Store measured op times ({op_key or op_key#bwd: s}) and collectives ([(kind, n, bytes, s)])."""
    n = 0
    for key, t in dict(op_times).items():
        base, bwd = (key[:-4], True) if key.endswith("#bwd") else (key, False)
        n += db.add_trials(op_task(base, bwd), device, [Measurement(_cand(key), Status.OK, times=[t])])
    for kind, group, nbytes, t in collectives:
        n += db.add_trials(collective_task(group, nbytes, kind), device, [Measurement(_cand(kind), Status.OK, times=[t])])
    return n


def _cand(key: str) -> Candidate:
    return Candidate({"measured": key})


def measured(db, device_name: str) -> tuple[dict[str, float], list[tuple[str, int, float, float]]]:
    """(op_times, collectives) measured on devices whose name contains ``device_name``, sorted by key."""
    q = (select(TaskRow.kind, TaskRow.name, TaskRow.params, func.min(TrialRow.cost))
         .join(TrialRow, TrialRow.task_id == TaskRow.id).join(DeviceRow, DeviceRow.id == TrialRow.device_id)
         .where(and_(TaskRow.kind.in_(("parallel-op", "collective")), TrialRow.status == Status.OK.value,
                     TrialRow.cost.is_not(None), func.lower(DeviceRow.name).contains(device_name.lower())))
         .group_by(TaskRow.id))
    ops: dict[str, float] = {}
    coll: list[tuple[str, int, float, float]] = []
    with db.session() as s:
        for kind, name, params, cost in s.execute(q).all():
            params = params or {}
            if kind == "parallel-op":
                ops[name + ("#bwd" if params.get("direction") == "bwd" else "")] = float(cost)
            else:
                coll.append((name, int(params["group"]), float(params["bytes"]), float(cost)))
    return dict(sorted(ops.items())), sorted(coll)  # in one order whatever the query's (a cluster's key digests them)
