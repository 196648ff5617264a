"""Moving tuning logs between databases: JSONL export (lossless), with import and Kernel Tuner caches in
autotune.db.log_import (its functions are reachable from here too) and the lines' format in autotune.db.log_lines.

An export is JSON lines: one per trial, carrying its task, device and campaign in full; one per task,
device and campaign; a campaign's history (the evaluations it made, in order, look-ups included), a page
of them a line; one per stored cost model; a first and a last line, which tells a file cut short from a
whole one. A file imported into an empty database and exported again gives identical lines.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import false, or_, select

from autotune.db.database import Database
from autotune.db.models import (
    AlgorithmStateRow,
    CampaignRow,
    CampaignTrialRow,
    CostModelRow,
    DeviceRow,
    TaskRow,
    TrialRow,
)
from autotune.db.names import one_task
from autotune.db.queries import _device_filter, _trial_filters
from autotune.types import Status

from autotune.db.log_import import STDIN, count_lines, import_file, import_kt, jsonl_path  # noqa: F401
from autotune.db.log_lines import FORMAT


def _task_json(task: TaskRow) -> dict:
    return {"key": task.key, "kind": task.kind, "name": task.name, "params": task.params}


def _device_json(dev: DeviceRow) -> dict:
    return {"key": dev.key, "name": dev.name, "kind": dev.kind, "properties": dev.properties}


def _campaign_json(camp: CampaignRow) -> dict:
    return {"name": camp.name, "algorithm": camp.algorithm, "options": camp.options, "created": camp.created.isoformat(),
            "status": camp.status, "updated": camp.updated.isoformat()}


def _line(t: TrialRow, task: TaskRow, dev: DeviceRow, camp: CampaignRow | None) -> dict:
    return {
        "format": FORMAT, "task": _task_json(task), "device": _device_json(dev),
        "campaign": None if camp is None else _campaign_json(camp),
        "candidate_key": t.candidate_key, "candidate": t.candidate, "status": t.status, "cost": t.cost,
        "times": t.times, "predicted": t.predicted, "error": t.error, "build_s": t.build_s, "run_s": t.run_s,
        "simulated_s": t.simulated_s, "meta": t.meta, "created": t.created.isoformat(), "worker": t.worker,
    }


def _dumps(d: dict) -> str:
    # the keys in the order they were stored: a configuration's knobs stay in its space's order
    return json.dumps(d)


def export_lines(db: Database, campaign: str | None = None, task: str | None = None, device: str | None = None,
                 status: str | None = None, page: int = 5000) -> Iterator[str]:
    """The lines of an export of the matching trials (:func:`export_items`)."""
    for text, _ in export_items(db, campaign, task, device, status, page):
        yield text


def export_items(db: Database, campaign: str | None = None, task: str | None = None, device: str | None = None,
                 status: str | None = None, page: int = 5000) -> Iterator[tuple[str, bool]]:
    """(line, whether it is a trial's) of an export: a first line; one line per task and per device, oldest
    first (every one of the database for an export of it all); one line per campaign (its task, device,
    name, algorithm, options, status, times and algorithm state, from which a resumed run goes on), oldest
    first; the matching trials, oldest first, each with the campaign that measured it; each campaign's
    history (its evaluations in order, each a candidate key and whether it was a look-up), ``page``
    evaluations a line; the stored cost models of those campaigns (and of the task and device filters), one
    a line; and a last line counting the lines between, so that a file cut short is told from a whole one.

    ``campaign``: the trials it evaluated, those it looked up included, and its history alone (a trial it
    looked up names the campaign that measured it, which is written too, without its history). Otherwise
    every campaign of the task and device filters. ``status``: only trials of that status, and only the
    evaluations of those in the histories. Everything is read ``page`` rows at a time (keyset pages), so
    memory stays bounded however large the log; each task, device and campaign is read once."""
    conds = _trial_filters(db, task, device)
    camp_conds = _campaign_filters(db, task, device)
    if status:
        conds.append(TrialRow.status == Status.parse(status).value)
    links = CampaignTrialRow.__table__
    if campaign:
        cid = db.campaign(campaign).id
        conds.append(TrialRow.id.in_(select(links.c.trial_id).where(links.c.campaign_id == cid)))
        histories = select(CampaignRow.id).where(CampaignRow.id == cid, *camp_conds)
        # the campaigns that measured the trials it looked up are written too (without their histories)
        owners = select(TrialRow.campaign_id).where(*conds, TrialRow.campaign_id.is_not(None)).distinct()
        declared = select(CampaignRow.id).where(or_(CampaignRow.id.in_(histories), CampaignRow.id.in_(owners)))
    else:
        histories = declared = select(CampaignRow.id).where(*camp_conds)
    known: dict[type, dict[int, object]] = {TaskRow: {}, DeviceRow: {}, CampaignRow: {None: None}}

    def load(s, model, ids) -> None:
        missing = set(ids) - known[model].keys()
        if missing:
            known[model].update((r.id, r) for r in s.scalars(select(model).where(model.id.in_(missing))))

    def campaign_line(c: CampaignRow, keys: list, state: dict | None = None) -> str:
        line = {"format": FORMAT, "campaign": _campaign_json(c), "task": _task_json(known[TaskRow][c.task_id]),
                "device": _device_json(known[DeviceRow][c.device_id]), "links": keys}
        if state is not None:  # as JSON text: it may hold integers wider than 64 bits (a generator's state)
            line["state"] = json.dumps(state)
        return _dumps(line)

    model_conds = _model_filters(db, cid if campaign else None, task, device)
    written = 0
    yield _dumps({"format": FORMAT, "export": "begin"}), False
    with db.session() as s:
        camps = s.scalars(select(CampaignRow).where(CampaignRow.id.in_(declared)).order_by(CampaignRow.id)).all()
        with_history = set(s.scalars(histories).all())
        # the tasks and devices, oldest first, so that they are stored in the order they were (the device a
        # name stands for is the one stored last): every one for a whole log, else those the lines name
        if campaign or task or device or status:
            named = {(c.task_id, c.device_id) for c in camps}
            named.update(s.execute(select(TrialRow.task_id, TrialRow.device_id).where(*conds).distinct()).all())
            cms = CostModelRow.__table__
            named.update(s.execute(select(cms.c.task_id, cms.c.device_id).where(*model_conds).distinct()).all())
            task_ids, device_ids = {t for t, _ in named} - {None}, {dv for _, dv in named} - {None}
        else:
            task_ids, device_ids = s.scalars(select(TaskRow.id)).all(), s.scalars(select(DeviceRow.id)).all()
        load(s, TaskRow, task_ids)
        load(s, DeviceRow, device_ids)
    for t in sorted(task_ids):
        yield _dumps({"format": FORMAT, "task": _task_json(known[TaskRow][t])}), False
    for dv in sorted(device_ids):
        yield _dumps({"format": FORMAT, "device": _device_json(known[DeviceRow][dv])}), False
    written += len(task_ids) + len(device_ids)
    known[CampaignRow].update((c.id, c) for c in camps)
    for c in camps:
        with db.session() as s:
            state = s.scalar(select(AlgorithmStateRow.state).where(AlgorithmStateRow.campaign_id == c.id))
        yield campaign_line(c, [], state), False
        written += 1
    last = 0
    while True:
        with db.session() as s:
            rows = s.scalars(select(TrialRow).where(*conds, TrialRow.id > last).order_by(TrialRow.id).limit(page)).all()
            for model, ids in ((TaskRow, {t.task_id for t in rows}), (DeviceRow, {t.device_id for t in rows}),
                               (CampaignRow, {t.campaign_id for t in rows})):
                load(s, model, ids)
        for t in rows:
            yield _dumps(_line(t, known[TaskRow][t.task_id], known[DeviceRow][t.device_id],
                               known[CampaignRow][t.campaign_id])), True
        written += len(rows)
        if rows:
            last = rows[-1].id
        if len(rows) < page:
            break
    # the histories name the trials written above alone (none a campaign stored since they were read)
    trial_conds = [TrialRow.id <= last, TrialRow.status == Status.parse(status).value] if status else [TrialRow.id <= last]
    for c in camps:
        if c.id not in with_history:
            continue
        after = 0
        while True:
            with db.session() as s:
                rows = s.execute(select(links.c.id, TrialRow.candidate_key, links.c.reused)
                                 .join(TrialRow, TrialRow.id == links.c.trial_id)
                                 .where(links.c.campaign_id == c.id, links.c.id > after, *trial_conds)
                                 .order_by(links.c.id).limit(page)).all()
            if rows:
                yield campaign_line(c, [[key, bool(reused)] for _, key, reused in rows]), False
                written += 1
                after = rows[-1][0]
            if len(rows) < page:
                break
    for line in _model_lines(db, known, model_conds):
        yield line, False
        written += 1
    yield _dumps({"format": FORMAT, "export": "end", "lines": written}), False


def _model_filters(db: Database, campaign_id: int | None, task: str | None, device: str | None) -> list:
    """The stored cost models an export writes: the campaign's, else those of the task and device filters."""
    models = CostModelRow.__table__
    if campaign_id is not None:
        return [models.c.campaign_id == campaign_id]
    return _campaign_filters(db, task, device, models.c.task_id, models.c.device_id)


def _model_lines(db: Database, known: dict, conds: list, page: int = 16) -> Iterator[str]:
    """One line per stored cost model of ``conds``, oldest first, its bytes in base64 (an empty string for one
    that keeps its row alone), ``page`` models read at a time."""
    models = CostModelRow.__table__
    last = 0
    while True:
        with db.session() as s:
            rows = s.execute(select(models).where(*conds, models.c.id > last).order_by(models.c.id).limit(page)).all()
            for model, ids in ((TaskRow, {r.task_id for r in rows} - {None}),
                               (DeviceRow, {r.device_id for r in rows} - {None}),
                               (CampaignRow, {r.campaign_id for r in rows})):
                missing = ids - known[model].keys()
                if missing:
                    known[model].update((r.id, r) for r in s.scalars(select(model).where(model.id.in_(missing))))
        for r in rows:
            camp, t, dv = known[CampaignRow][r.campaign_id], known[TaskRow].get(r.task_id), known[DeviceRow].get(r.device_id)
            yield _dumps({"format": FORMAT, "model": {
                "name": r.name, "campaign": None if camp is None else camp.name, "n_samples": r.n_samples,
                "metrics": r.metrics, "format": r.format, "created": r.created.isoformat(), "pinned": bool(r.pinned),
                "data": base64.b64encode(r.data or b"").decode()},
                "task": None if t is None else _task_json(t), "device": None if dv is None else _device_json(dv)})
        if len(rows) < page:
            return
        last = rows[-1].id


def _campaign_filters(db: Database, task: str | None, device: str | None, task_id=CampaignRow.task_id,
                      device_id=CampaignRow.device_id) -> list:
    """The task and device filters as conditions on the columns ``task_id`` and ``device_id`` (a campaign's)."""
    conds = []
    if task:
        row = one_task(db, task)
        conds.append(task_id == row.id if row is not None else false())
    if device:
        conds.append(device_id.in_(select(DeviceRow.id).where(_device_filter(device))))
    return conds


def export_file(db: Database, path: str | Path, **filters) -> int:
    """Write an export of the matching trials to ``path`` (:func:`export_items`); returns how many trials. A
    regular file is written beside and renamed over ``path`` once complete, so an error or an interrupt
    part-way leaves the file that was there as it was; anything else (a pipe, /dev/stdout) is written in place."""
    path = Path(path)
    if path.exists() and not path.is_file():
        with open(path, "w") as f:
            return write_export(f, db, **filters)
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        with open(part, "w") as f:
            n = write_export(f, db, **filters)
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    return n


def write_export(f, db: Database, **filters) -> int:
    """Write an export of the matching trials to the open text file ``f``; returns how many trials."""
    n = 0
    for line, is_trial in export_items(db, **filters):
        f.write(line + "\n")
        n += is_trial
    return n
