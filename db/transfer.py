"""Database reads for transfer: devices, the task a name stands for, every device's trials of a task."""

from __future__ import annotations

from sqlalchemy import func, or_, select

from autotune.db.database import Database
from autotune.db.models import DeviceRow, TaskRow, TrialRow
from autotune.db.names import one_task, resolve
from autotune.types import Candidate, Device, Measurement, Task


def devices(db: Database) -> list[Device]:
    """Every device in the database (one per key), in insertion order."""
    with db.session() as s:
        rows = s.execute(select(DeviceRow).order_by(DeviceRow.id)).scalars().all()
    return [Device(r.name, r.kind, dict(r.properties or {})) for r in rows]


def find_device(db: Database, name: str) -> Device | None:
    """The device with this name or key (the most recently added of that name), or None."""
    with db.session() as s:
        row = s.execute(select(DeviceRow).where(or_(DeviceRow.name == name, DeviceRow.key == name))
                        .order_by(DeviceRow.id.desc())).scalars().first()
    return Device(row.name, row.kind, dict(row.properties or {})) if row else None


def resolve_task(db: Database, task: Task | str) -> Task:
    """A Task object as is, else the task with that key or name, as every command takes one: exactly, differing
    only in case, or a unique key prefix (one name for several tasks is an error naming their keys; an
    unknown one names the closest stored names)."""
    if isinstance(task, Task):
        return task
    r = one_task(db, resolve(db, "task", task))
    return Task(r.kind, r.name, dict(r.params or {}))


def task_trials(db: Database, task: Task) -> dict[str, tuple[Device, list[Measurement]]]:
    """Every device's measurements of the task (candidate, status, cost), keyed by device key."""
    with db.session() as s:
        tid = s.scalar(select(TaskRow.id).where(TaskRow.key == task.key))
        if tid is None:
            return {}
        devs = {d.id: d for d in s.execute(select(DeviceRow)).scalars().all()}
    t = TrialRow.__table__
    with db.engine.connect() as conn:
        rows = conn.execute(select(t.c.device_id, t.c.candidate_key, t.c.candidate, t.c.status, t.c.cost)
                            .where(t.c.task_id == tid).order_by(t.c.id)).all()
    out: dict[str, tuple[Device, list[Measurement]]] = {}
    for did, key, cand, status, cost in rows:
        d = devs[did]
        entry = out.get(d.key)
        if entry is None:
            entry = out[d.key] = (Device(d.name, d.kind, dict(d.properties or {})), [])
        entry[1].append(Measurement(Candidate(cand, key), status, cost=cost))
    return out


def task_configurations(db: Database, task: Task) -> list[dict]:
    """Every distinct configuration measured of the task on any device (failures included), in the order first
    stored: for a recorded space whose constraints the task does not carry, the points known to be in it."""
    t = TrialRow.__table__
    with db.session() as s:
        tid = s.scalar(select(TaskRow.id).where(TaskRow.key == task.key))
    if tid is None:
        return []
    first = (select(t.c.candidate_key, func.min(t.c.id).label("id")).where(t.c.task_id == tid)
             .group_by(t.c.candidate_key).subquery())
    with db.engine.connect() as conn:
        rows = conn.execute(select(t.c.candidate).join(first, first.c.id == t.c.id).order_by(t.c.id)).all()
    return [c for (c,) in rows]


def namesakes_measured(db: Database, device: str, task: Task) -> list[str]:
    """Keys of the other tasks of ``task``'s kind and name (other parameters: another shape, other knob values)
    that the device (a stored name or key) measured."""
    with db.session() as s:
        return list(s.scalars(
            select(TaskRow.key).join(TrialRow, TrialRow.task_id == TaskRow.id)
            .join(DeviceRow, DeviceRow.id == TrialRow.device_id)
            .where(TaskRow.name == task.name, TaskRow.kind == task.kind, TaskRow.key != task.key,
                   or_(DeviceRow.name == device, DeviceRow.key == device)).distinct()).all())
