"""Moving tuning logs between databases: JSONL export/import (lossless) and Kernel Tuner caches.

One JSONL line per trial carries its task, device and campaign in full, so a file
imported into an empty database and exported again gives identical lines.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from sqlalchemy import and_, select

from autotune.db.database import Database
from autotune.db.models import CampaignRow, DeviceRow, TaskRow, TrialRow
from autotune.db.queries import _device_filter, _task_filter
from autotune.errors import UsageError
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
                 status: str | None = None) -> Iterator[str]:
    conds = [_task_filter(task), _device_filter(device)]
    if status:
        conds.append(TrialRow.status == Status.parse(status).value)
    if campaign:
        conds.append(TrialRow.campaign_id == db.campaign(campaign).id)
    with db.session() as s:
        rows = s.execute(
            select(TrialRow, TaskRow, DeviceRow, CampaignRow)
            .join(TaskRow, TaskRow.id == TrialRow.task_id).join(DeviceRow, DeviceRow.id == TrialRow.device_id)
            .outerjoin(CampaignRow, CampaignRow.id == TrialRow.campaign_id)
            .where(and_(*conds)).order_by(TrialRow.id)
        ).all()
    for t, task_row, dev_row, camp in rows:
        yield json.dumps(_line(t, task_row, dev_row, camp), sort_keys=True)


def export_file(db: Database, path: str | Path, **filters) -> int:
    n = 0
    with open(path, "w") as f:
        for line in export_lines(db, **filters):
            f.write(line + "\n")
            n += 1
    return n


def import_file(db: Database, path: str | Path, batch: int = 2000) -> tuple[int, int]:
    """Import a JSONL export. Trials already present (same task, device, candidate) are kept as they are.
    Returns (lines read, trials added)."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"file {str(path)!r} does not exist; give a JSONL file written by autotune export")
    read = added = 0
    pending: dict[tuple[int, int, int | None], list] = {}

    def flush() -> None:
        nonlocal added
        for (tid, did, cid), items in pending.items():
            with db.session() as s:
                added += db.insert_rows(s, items)
                if cid is not None:
                    ids = db.trial_ids(s, tid, did, [r["candidate_key"] for r in items])
                    db.link(s, cid, [ids[r["candidate_key"]] for r in items], [False] * len(items))
        pending.clear()

    with open(path) as f:
        for lineno, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                d = json.loads(text)
                if d.get("format") != FORMAT:
                    raise ValueError(f"format is {d.get('format')!r}, expected {FORMAT!r}")
                task = Task(d["task"]["kind"], d["task"]["name"], d["task"]["params"])
                device = Device(d["device"]["name"], d["device"]["kind"], d["device"]["properties"])
                row = {
                    "candidate_key": d["candidate_key"], "candidate": d["candidate"], "status": Status(d["status"]).value,
                    "cost": d["cost"], "times": d["times"], "predicted": d["predicted"], "error": d["error"],
                    "build_s": d["build_s"], "run_s": d["run_s"], "simulated_s": d["simulated_s"], "meta": d["meta"],
                    "created": datetime.fromisoformat(d["created"]), "worker": d["worker"],
                }
            except (ValueError, KeyError, TypeError) as exc:
                raise UsageError(f"{path}:{lineno} is not an autotune trial line ({exc}); nothing after it was imported") from None
            if task.key != d["task"]["key"] or device.key != d["device"]["key"]:
                raise UsageError(f"{path}:{lineno}: the task or device key does not match its content; the file was edited")
            tid, did = db.task_id(task), db.device_id(device)
            cid = _campaign_id(db, d["campaign"], task, device) if d["campaign"] else None
            row.update(task_id=tid, device_id=did, campaign_id=cid)
            pending.setdefault((tid, did, cid), []).append(row)
            read += 1
            if read % batch == 0:
                flush()
    flush()
    return read, added


def _campaign_id(db: Database, c: dict, task: Task, device: Device) -> int:
    row, existed = db.open_campaign(c["name"], task, device, c["algorithm"], c["options"])
    if not existed:  # a campaign new to this database keeps its original creation time
        with db.session() as s:
            r = s.get(CampaignRow, row.id)
            r.status, r.created = "imported", datetime.fromisoformat(c["created"])
    return row.id


def import_kt(db: Database, spec: str | Path, batch: int = 5000) -> tuple[Task, Device, int, int]:
    """Store every configuration of a Kernel Tuner cache as a trial of its task and device."""
    from autotune.runners.replay import record_measurement, replay_device
    from autotune.search_spaces.replay import KTCache
    from autotune.types import Candidate

    cache = KTCache.load(spec)
    task, device = cache.task(), replay_device(cache)
    worker = f"import-kt:{Path(cache.path).name}"
    ms = [record_measurement(cache, Candidate(cache.config(values)), rec) for values, rec in cache.records.items()]
    added = sum(db.add_trials(task, device, ms[i:i + batch], worker=worker) for i in range(0, len(ms), batch))
    return task, device, len(ms), added

