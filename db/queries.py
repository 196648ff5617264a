"""Read-only queries over the experiment database, returned as pandas DataFrames. Each public query takes
the database as a :class:`Database` or as its URL (``"sqlite:///autotune.db"``), as ``best_config`` and the
drivers take one."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator

import numpy as np
import pandas as pd
from sqlalchemy import and_, false, func, or_, select, true
from sqlalchemy.orm import aliased

from autotune.db.campaigns import not_own
from autotune.db.database import Database
from autotune.db.models import (
    CampaignRow,
    CampaignTrialRow,
    CostModelRow,
    DeviceRow,
    RuleRow,
    TaskRow,
    TrialRow,
)
from autotune.db.names import one_task, resolve, resolve_name  # noqa: F401 - resolve_name: the public helper
from autotune.errors import UsageError, argument
from autotune.types import Status


def _any_db(fn):
    """``fn`` taking its database (the first argument, ``db``) as a Database or as a URL: a URL is opened for the
    call as an existing database (a missing SQLite file is a UsageError, and none is created) and closed after it,
    for a generator once it is exhausted or closed."""

    def opened(db):
        from autotune.db import open_existing_database

        return open_existing_database(db, who=f"autotune.queries.{fn.__name__}")

    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def pages(db, *args, **kwargs):
            if not isinstance(db, str):
                yield from fn(db, *args, **kwargs)
                return
            database = opened(db)
            try:
                yield from fn(database, *args, **kwargs)
            finally:
                database.close()

        return pages

    @functools.wraps(fn)
    def wrapper(db, *args, **kwargs):
        if not isinstance(db, str):
            return fn(db, *args, **kwargs)
        database = opened(db)
        try:
            return fn(database, *args, **kwargs)
        finally:
            database.close()

    return wrapper


TRIAL_COLUMNS = [
    "id", "campaign", "task", "task_key", "device", "candidate_key", "config", "status", "cost", "repeats",
    "predicted", "error", "build_s", "run_s", "simulated_s", "created", "worker",
]


def _resolved(db: Database, campaign: str | None = None, task: str | None = None,
              device: str | None = None) -> tuple[str | None, str | None, str | None]:
    """(campaign, task, device) as the database names them (:func:`autotune.db.names.resolve`, as the command
    line resolves its filters): a name that differs only in case, a key prefix or a name a table showed cut
    resolves to the stored one; an unknown name is a UsageError naming the closest stored names, never an
    empty answer."""
    return resolve(db, "campaign", campaign), resolve(db, "task", task), resolve(db, "device", device)


def _task_filter(db: Database, task: str | None):
    """Rows of the one task ``task`` (a key or a name) stands for: a name that several tasks share is
    Ambiguous (naming their keys), never their rows merged; one that no task has matches nothing."""
    if not task:
        return True
    row = one_task(db, task)
    return TaskRow.id == row.id if row is not None else false()


def _device_filter(device: str | None):
    return or_(DeviceRow.name == device, DeviceRow.key == device) if device else True


def _trial_filters(db: Database, task: str | None, device: str | None) -> list:
    """The task and device filters as conditions on the trials' own columns, so that the (task, device, cost)
    index serves them: a device alone is matched with every task (an IN over the tasks' ids, each an index
    seek) rather than by reading every trial to join its device."""
    conds = []
    if task:
        row = one_task(db, task)
        conds.append(TrialRow.task_id == row.id if row is not None else false())
    if device:
        conds.append(TrialRow.device_id.in_(select(DeviceRow.id).where(_device_filter(device))))
        if not task:
            conds.append(TrialRow.task_id.in_(select(TaskRow.id)))
    return conds


def _fastest(db: Database, k: int, task: str | None = None, device: str | None = None):
    """A select of the ids of the ``k`` fastest OK trials (by cost, then id) of every (task, device) the
    filters keep: each pair's read from the (task, device, cost) index, never the whole trials table (a
    window over every trial reads all of them: seconds on a million). PostgreSQL joins each pair to its k trials
    laterally; SQLite, which has no LATERAL, with a correlated IN."""
    t = aliased(TrialRow)
    per_pair = (select(t.id).where(t.task_id == TaskRow.id, t.device_id == DeviceRow.id, t.cost.is_not(None))
                .order_by(t.cost, t.id).limit(k))
    pairs = select().select_from(TaskRow).join(DeviceRow, true()).where(_task_filter(db, task), _device_filter(device))
    if db.dialect == "postgresql":
        lateral = per_pair.lateral()
        return pairs.add_columns(lateral.c.id).join(lateral, true())
    return pairs.add_columns(TrialRow.id).join(TrialRow, TrialRow.id.in_(per_pair.scalar_subquery()))


@_any_db
def campaigns(db: Database | str, include_reused: bool = False) -> pd.DataFrame:
    """One row per campaign: its task, device, algorithm, status ("stopped" for one stored as running whose
    workers are all gone: Database.running_status), its own measured ``trials``, the
    ``reused`` trials it looked up (measured elsewhere), and the ``best_cost``, ``simulated_s`` and
    ``errors`` (failed trials) of its own trials (:class:`~autotune.db.campaigns.CampaignFigures`). ``include_reused`` adds
    ``evaluations`` (trials + reused) and ``best_cost_including_reused``."""
    with db.session() as s:
        own = (
            select(TrialRow.campaign_id, func.count(TrialRow.id).label("trials"), func.min(TrialRow.cost).label("best_cost"),
                   func.sum(TrialRow.simulated_s).label("simulated_s"),
                   func.count(TrialRow.id).filter(TrialRow.status != Status.OK.value).label("errors"))
            .where(TrialRow.campaign_id.is_not(None)).group_by(TrialRow.campaign_id).subquery()
        )
        looked_up = (
            select(CampaignTrialRow.campaign_id, func.count(CampaignTrialRow.id).label("reused"),
                   func.min(TrialRow.cost).label("reused_best"))
            .join(TrialRow, TrialRow.id == CampaignTrialRow.trial_id).where(not_own())
            .group_by(CampaignTrialRow.campaign_id).subquery()
        )
        rows = s.execute(
            select(CampaignRow.name, TaskRow.name, TaskRow.key, DeviceRow.name, CampaignRow.algorithm, CampaignRow.status,
                   own.c.trials, looked_up.c.reused, own.c.best_cost, looked_up.c.reused_best, own.c.simulated_s,
                   own.c.errors, CampaignRow.created, CampaignRow.updated, CampaignRow.id)
            .join(TaskRow, TaskRow.id == CampaignRow.task_id).join(DeviceRow, DeviceRow.id == CampaignRow.device_id)
            .outerjoin(own, own.c.campaign_id == CampaignRow.id)
            .outerjoin(looked_up, looked_up.c.campaign_id == CampaignRow.id).order_by(CampaignRow.id)
        ).all()
    df = pd.DataFrame(rows, columns=["campaign", "task", "task_key", "device", "algorithm", "status", "trials",
                                     "reused", "best_cost", "reused_best", "simulated_s", "errors", "created", "updated",
                                     "id"])
    shown = db.running_status(list(zip(df["id"].tolist(), df["status"].tolist())))  # "running" and no worker: stopped
    df["status"] = df["id"].map(shown)
    df = df.drop(columns=["id"])
    for col in ("trials", "reused", "errors"):
        df[col] = df[col].fillna(0).astype(int)
    assert (df["trials"] >= 0).all() and (df["reused"] >= 0).all() and (df["errors"] <= df["trials"]).all()
    df["simulated_s"] = df["simulated_s"].astype(float).fillna(0.0)
    if include_reused:
        df.insert(df.columns.get_loc("reused") + 1, "evaluations", df["trials"] + df["reused"])
        both = df[["best_cost", "reused_best"]].astype(float)
        df.insert(df.columns.get_loc("best_cost") + 1, "best_cost_including_reused", both.min(axis=1))
    return df.drop(columns=["reused_best"])


def _trial_query(db: Database, campaign, task, device, status):
    conds = _trial_filters(db, task, device)
    if status:
        conds.append(TrialRow.status == Status.parse(status).value)
    if campaign:
        camp = db.campaign(campaign)
        conds.append(TrialRow.id.in_(select(CampaignTrialRow.trial_id).where(CampaignTrialRow.campaign_id == camp.id)))
    return and_(true(), *conds)


def _trial_frame(rows) -> pd.DataFrame:
    records = [
        (t.id, camp, tname, tkey, dname, t.candidate_key, t.candidate, t.status, t.cost, len(t.times or []), t.predicted,
         t.error, t.build_s, t.run_s, t.simulated_s, t.created, t.worker)
        for t, camp, tname, tkey, dname in rows
    ]
    return pd.DataFrame(records, columns=TRIAL_COLUMNS)


def _trial_select(where):
    return (
        select(TrialRow, CampaignRow.name, TaskRow.name, TaskRow.key, DeviceRow.name)
        .join(TaskRow, TaskRow.id == TrialRow.task_id).join(DeviceRow, DeviceRow.id == TrialRow.device_id)
        .outerjoin(CampaignRow, CampaignRow.id == TrialRow.campaign_id).where(where)
    )


@_any_db
def trials(db: Database | str, campaign: str | None = None, task: str | None = None, device: str | None = None,
           status: str | None = None, top: int | None = None, limit: int | None = None) -> pd.DataFrame:
    """Trials filtered by campaign name, task key or name (a name several tasks share is Ambiguous, naming
    their keys), device name or key, and status, oldest first (at most ``limit``); ``top`` keeps the k
    fastest OK trials, fastest first. ``config`` holds the candidate's JSON. Names are resolved as the
    command line resolves them (an unknown one is a UsageError naming the closest)."""
    for name, v in ((argument("top"), top), (argument("limit"), limit)):
        if v is not None and v <= 0:
            raise UsageError(f"{name} must be a positive number of trials, not {v}")
    campaign, task, device = _resolved(db, campaign, task, device)
    query = _trial_select(_trial_query(db, campaign, task, device, status))
    if top is not None:
        if not campaign:  # the k fastest of all are among each (task, device)'s k fastest
            query = query.where(TrialRow.id.in_(_fastest(db, top, task, device)))
        query = query.where(TrialRow.cost.is_not(None)).order_by(TrialRow.cost, TrialRow.id).limit(top)
    else:
        query = query.order_by(TrialRow.id).limit(limit)
    with db.session() as s:
        return _trial_frame(s.execute(query).all())


@_any_db
def count_trials(db: Database | str, campaign: str | None = None, task: str | None = None, device: str | None = None,
                 status: str | None = None) -> int:
    campaign, task, device = _resolved(db, campaign, task, device)
    with db.session() as s:
        return s.scalar(select(func.count(TrialRow.id)).where(_trial_query(db, campaign, task, device, status)))


@_any_db
def lookups(db: Database | str, campaign: str) -> int:
    """How many of the trials ``campaign`` evaluated it looked up (measured before, elsewhere) rather than measured."""
    camp = db.campaign(campaign)
    with db.session() as s:
        return s.scalar(select(func.count(CampaignTrialRow.id)).where(CampaignTrialRow.campaign_id == camp.id,
                                                                     CampaignTrialRow.reused.is_(True)))


@_any_db
def trial_pages(db: Database | str, campaign: str | None = None, task: str | None = None, device: str | None = None,
                status: str | None = None, page: int = 10_000) -> Iterator[pd.DataFrame]:
    """Every matching trial, oldest first, as DataFrames of at most ``page`` rows (memory stays bounded); one
    empty frame, with every column, when none matches (a CSV of no trials still has its header)."""
    campaign, task, device = _resolved(db, campaign, task, device)
    where = _trial_query(db, campaign, task, device, status)
    last = 0
    while True:
        with db.session() as s:
            rows = s.execute(_trial_select(and_(where, TrialRow.id > last)).order_by(TrialRow.id).limit(page)).all()
        if not rows:
            if not last:
                yield _trial_frame(rows)
            return
        yield _trial_frame(rows)
        last = rows[-1][0].id


@_any_db
def best(db: Database | str, task: str | None = None, device: str | None = None, k: int = 1) -> pd.DataFrame:
    """The k fastest OK trials per (task, device)."""
    _, task, device = _resolved(db, task=task, device=device)
    with db.session() as s:
        rows = s.execute(
            select(TaskRow.name, TaskRow.key, DeviceRow.name, TrialRow.cost, TrialRow.candidate, TrialRow.candidate_key,
                   TrialRow.task_id, TrialRow.device_id)
            .join(TaskRow, TaskRow.id == TrialRow.task_id).join(DeviceRow, DeviceRow.id == TrialRow.device_id)
            .where(TrialRow.id.in_(_fastest(db, k, task, device)))
            .order_by(TaskRow.name, DeviceRow.name, TrialRow.task_id, TrialRow.device_id, TrialRow.cost, TrialRow.id)
        ).all()
    df = pd.DataFrame(rows, columns=["task", "task_key", "device", "cost", "config", "candidate_key", "tid", "did"])
    df.insert(3, "rank", df.groupby(["tid", "did"]).cumcount() + 1 if len(df) else pd.Series(dtype=int))
    return df.drop(columns=["tid", "did"])


@_any_db
def convergence(db: Database | str, campaign: str, include_reused: bool = False) -> pd.DataFrame:
    """Best-so-far per trial of a campaign, in the order it evaluated them, with the cumulative
    simulated time: its own measurements only (:class:`~autotune.db.campaigns.CampaignFigures`), so ``trial`` counts what
    the campaign measured. ``include_reused`` also keeps its look-ups of trials measured elsewhere
    (``reused`` True), each at 0 simulated seconds (a look-up costs none); ``trial`` then counts
    evaluations."""
    campaign = resolve(db, "campaign", campaign)
    camp = db.campaign(campaign)
    with db.session() as s:
        rows = s.execute(
            select(TrialRow.cost, TrialRow.status, TrialRow.simulated_s, not_own())
            .join(CampaignTrialRow, CampaignTrialRow.trial_id == TrialRow.id)
            .where(CampaignTrialRow.campaign_id == camp.id).order_by(CampaignTrialRow.id)
        ).all()
    df = pd.DataFrame(rows, columns=["cost", "status", "simulated_s", "reused"])
    df["reused"] = df["reused"].astype(bool)
    if not include_reused:
        df = df[~df["reused"]].reset_index(drop=True)
    df.insert(0, "trial", np.arange(1, len(df) + 1))
    costs = df["cost"].astype(float).fillna(np.inf)
    df["best_so_far"] = costs.cummin().replace(np.inf, np.nan)
    df["simulated_s"] = df["simulated_s"].astype(float).fillna(0.0).where(~df["reused"], 0.0)
    df["simulated_cum_s"] = df["simulated_s"].cumsum()
    df["campaign"] = campaign
    return df


@_any_db
def cost_models(db: Database | str, task: str | None = None, device: str | None = None, campaign: str | None = None,
                latest: bool = False) -> pd.DataFrame:
    """Stored cost models: what they were trained for, on how many samples, their held-out quality and
    whether they are pinned (kept on purpose). ``latest`` keeps the latest model of each campaign, and
    of each (task, device, model name) among models stored outside a campaign."""
    campaign, task, device = _resolved(db, campaign, task, device)
    conds = [_task_filter(db, task), _device_filter(device)]
    if campaign:
        conds.append(CampaignRow.name == campaign)
    if latest:
        newest = select(func.max(CostModelRow.id)).where(CostModelRow.campaign_id.is_not(None)).group_by(
            CostModelRow.campaign_id).union_all(
            select(func.max(CostModelRow.id)).where(CostModelRow.campaign_id.is_(None)).group_by(
                CostModelRow.task_id, CostModelRow.device_id, CostModelRow.name))
        conds.append(CostModelRow.id.in_(newest))
    with db.session() as s:
        rows = s.execute(
            select(CostModelRow.id, CostModelRow.name, TaskRow.name, DeviceRow.name, CampaignRow.name,
                   CostModelRow.n_samples, CostModelRow.metrics, func.length(CostModelRow.data), CostModelRow.created,
                   CostModelRow.pinned)
            .outerjoin(TaskRow, TaskRow.id == CostModelRow.task_id)
            .outerjoin(DeviceRow, DeviceRow.id == CostModelRow.device_id)
            .outerjoin(CampaignRow, CampaignRow.id == CostModelRow.campaign_id)
            .where(and_(*conds)).order_by(CostModelRow.id)
        ).all()
    df = pd.DataFrame(rows, columns=["id", "model", "task", "device", "campaign", "n_samples", "metrics", "bytes", "created",
                                     "pinned"])
    df["spearman"] = df["metrics"].map(lambda m: (m or {}).get("spearman"))
    df["top_k_recall"] = df["metrics"].map(lambda m: (m or {}).get("top_k_recall"))
    df["pinned"] = df.pop("pinned").astype(bool)
    return df.drop(columns=["metrics"])


@_any_db
def resolve_filters(db: Database | str, campaign: str | None = None, task: str | None = None,
                    device: str | None = None) -> dict:
    """The name filters of a query (campaign name, task key or name, device name or key), each resolved
    against the database by :func:`autotune.db.names.resolve`: taken as given when stored, a
    case-only difference or a unique key prefix resolved to the stored name, anything else a
    UsageError naming the closest stored names. None stays None."""
    return {"campaign": resolve(db, "campaign", campaign), "task": resolve(db, "task", task),
            "device": resolve(db, "device", device)}


@_any_db
def rules(db: Database | str, status: str | None = None, provenance: str | None = None) -> pd.DataFrame:
    """Stored graph substitution rules with their provenance and verification status."""
    conds = [RuleRow.status == status if status else True,
             RuleRow.provenance.like(f"{provenance}%") if provenance else True]
    with db.session() as s:
        rows = s.execute(select(RuleRow.key, RuleRow.name, RuleRow.provenance, RuleRow.status, RuleRow.rule,
                                RuleRow.created).where(and_(*conds)).order_by(RuleRow.id)).all()
    return pd.DataFrame(rows, columns=["key", "name", "provenance", "status", "rule", "created"])
