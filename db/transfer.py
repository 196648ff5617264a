"""Database reads for transfer: devices, the task a name stands for, every device's trials of a task."""

from __future__ import annotations

from sqlalchemy import or_, select

from autotune.db.database import Database
from autotune.db.models import DeviceRow, TaskRow, TrialRow
from autotune.db.names import one_task
from autotune.errors import UsageError
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
    """A Task object as is, else the task with that key or name (one name for several tasks is an error)."""
    if isinstance(task, Task):
        return task
    r = one_task(db, task)  # a name several tasks share: Ambiguous, naming their keys
    if r is None:
        with db.session() as s:
            known = s.execute(select(TaskRow.name).distinct().limit(20)).scalars().all()
        raise UsageError(f"unknown task {task!r}; tasks in the database: {', '.join(known) or 'none yet'}")
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
