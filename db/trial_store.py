"""Database methods that store and look up trials (mixed into Database): a batch of measurements with
the campaign's links to every evaluation, its algorithm state and its worker's claim, in one
transaction; look-ups by candidate key; bulk inserts that skip trials already stored.

Inserts use ON CONFLICT DO NOTHING on (task, device, candidate), so two workers racing on one
campaign never write a trial twice. A campaign that retries stored failures (``replace_failed``) writes its
new measurement over the failed trial, whose status and error move to the trial's ``meta["earlier"]``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple

import orjson
from sqlalchemy import JSON, Column, DateTime, Float, Integer, MetaData, Table, Text, TypeDecorator, func, select, update
from sqlalchemy.orm import Session

from autotune.db.engine import waits_out_locks
from autotune.db.models import (
    CHUNK,
    AlgorithmStateRow,
    CampaignPendingRow,
    CampaignRow,
    CampaignTrialRow,
    TrialRow,
    measurement_row,
    row_to_measurement,
    utcnow,
)
from autotune.db.workers import worker_id
from autotune.errors import UsageError
from autotune.types import Candidate, Device, Measurement, Status, Task

#: the JSON options of every trial column written here (numpy numbers as numbers, keys of any kind as text)
_JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


class _JSONText(TypeDecorator):
    """A JSON column whose values are already serialised: sent as they are (cast to JSON on PostgreSQL)."""

    impl = JSON
    cache_ok = True

    def bind_processor(self, dialect):
        return None


_TRIAL_INSERT_COLUMNS = ("task_id", "device_id", "campaign_id", "candidate_key", "candidate", "status", "cost", "times",
                         "predicted", "error", "build_s", "run_s", "simulated_s", "meta", "created", "worker")
_SQLITE_INSERT_TRIAL = (f"INSERT INTO trials ({', '.join(_TRIAL_INSERT_COLUMNS)}) "
                        f"VALUES ({', '.join('?' * len(_TRIAL_INSERT_COLUMNS))}) "
                        "ON CONFLICT (task_id, device_id, candidate_key) DO NOTHING")

# The trials table with JSON columns that insert_rows serialises itself.
_WIRE_TRIALS = Table(
    "trials", MetaData(), Column("id", Integer, primary_key=True), Column("task_id", Integer), Column("device_id", Integer),
    Column("campaign_id", Integer), Column("candidate_key", Text), Column("candidate", _JSONText), Column("status", Text),
    Column("cost", Float), Column("times", _JSONText), Column("predicted", Float), Column("error", Text),
    Column("build_s", Float), Column("run_s", Float), Column("simulated_s", Float), Column("meta", _JSONText),
    Column("created", DateTime), Column("worker", Text),
)


class CampaignGone(UsageError):
    """The campaign a run stores into was deleted while it ran (``autotune campaigns delete --force``, or a
    ``--fresh`` run that went ahead)."""


class Stored(NamedTuple):
    """What Database.record_batch did: trials that were new, trials the campaign has now (every
    worker's), measurements granted to the worker next, and candidates it took over from dead workers
    (to measure first; they are part of the grant)."""

    inserted: int
    total: int
    granted: int
    adopted: list[Candidate]


class TrialStore:
    """Trial storage methods of the Database facade (which provides session, engine, dialect, _insert,
    task_id, device_id and the workers' _claim_in)."""

    def lookup(self, task_id: int, device_id: int, keys: Iterable[str]) -> dict[str, Measurement]:
        """Known measurements of these candidate keys on this task and device."""
        with self.engine.connect() as conn:
            rows = self._rows_for_keys(conn, [TrialRow.__table__], task_id, device_id, keys)
            return {r.candidate_key: row_to_measurement(r) for r in rows}

    def failed_before(self, task_id: int, device_id: int, keys: Iterable[str], statuses: Iterable[str],
                      before: datetime) -> set[str]:
        """Which of ``keys`` are stored with one of ``statuses``, stored before ``before``: the failures a run that
        started then may measure again (``retry_failed``)."""
        table, statuses = TrialRow.__table__, {getattr(st, "value", st) for st in statuses}
        with self.engine.connect() as conn:
            rows = self._rows_for_keys(conn, [table.c.candidate_key, table.c.status, table.c.created], task_id,
                                       device_id, keys)
        return {k for k, status, created in rows if status in statuses and created < before}

    def count_stored(self, task_id: int, device_id: int) -> int:
        """The trials stored for this task and device (one per candidate key), by any campaign or import."""
        with self.engine.connect() as conn:
            return conn.scalar(select(func.count()).select_from(TrialRow.__table__).where(
                TrialRow.task_id == task_id, TrialRow.device_id == device_id)) or 0

    @staticmethod
    def _rows_for_keys(conn, columns: list, task_id: int, device_id: int, keys: Iterable[str]) -> list:
        """Rows (of ``columns``) of the trials with these candidate keys on one task and device, in chunks."""
        table = TrialRow.__table__
        uniq = list(dict.fromkeys(keys))
        out = []
        for i in range(0, len(uniq), CHUNK):
            out.extend(conn.execute(select(*columns).where(
                table.c.task_id == task_id, table.c.device_id == device_id,
                table.c.candidate_key.in_(uniq[i:i + CHUNK]))).all())
        return out

    @waits_out_locks
    def record_batch(
        self, task_id: int, device_id: int, campaign_id: int | None, measured: list[Measurement],
        reused: list[Measurement] = (), state: dict | None = None, worker: str | None = None,
        claim_next: tuple[int, int | None] | None = None, in_flight: int = 0, created: datetime | None = None,
        replace_failed: bool = False,
    ) -> Stored:
        """Store one batch in one transaction: new trials, the campaign's links to every evaluation
        in order, and the algorithm state. The stored candidates leave the worker's reservations, and
        its claim on the trial budget is set to ``in_flight`` (its measurements still running) plus
        what it is granted next: with ``claim_next=(n, budget)`` up to ``n`` more, never more than
        ``budget`` (None: no trial budget) less the stored trials and the other live workers' claims.
        The grant first takes over candidates that dead workers reserved and did not store.

        ``created``: when the campaign this run opened was created. A campaign deleted meanwhile (and,
        on SQLite, its id perhaps given to a new one) no longer matches: the measurements are stored
        without a campaign, as a deleted campaign's are, and CampaignGone is raised.

        ``replace_failed``: a measurement of a candidate stored as failed replaces that trial, which this
        campaign then owns (see ``overwrite_failed``); otherwise, and always for a trial stored as OK, the stored trial stays."""
        worker = worker or worker_id()
        gone = False
        with self.session() as s:
            if campaign_id is not None:
                # on PostgreSQL one batch of a campaign at a time: workers storing the same candidates would
                # otherwise wait on each other's unique-key locks in opposite orders (SQLite serialises writers)
                row = select(CampaignRow.created).where(CampaignRow.id == campaign_id)
                now_created = s.scalar(row.with_for_update() if self.dialect == "postgresql" else row)
                gone = created is not None and now_created != created
            own = None if gone else campaign_id  # a deleted campaign's measurements stay, without a campaign
            rows = [measurement_row(m, task_id, device_id, own, worker) for m in measured]
            if replace_failed and own is not None:
                self.overwrite_failed(s, rows)
            inserted = self.insert_rows(s, rows)
            if own is None:
                stored = Stored(inserted, 0, 0, [])
            else:
                total, granted, adopted = self._record_in_campaign(s, own, task_id, device_id, measured, reused,
                                                                   state, worker, claim_next, in_flight)
                stored = Stored(inserted, total, granted, adopted)
        if gone:
            raise CampaignGone(f"the campaign was deleted while this run measured it; its last {len(measured)} "
                               "measurements are stored without a campaign (reused by the next campaign of the "
                               "task and device)")
        return stored

    def _record_in_campaign(self, s: Session, campaign_id: int, task_id: int, device_id: int,
                            measured: list[Measurement], reused: list[Measurement], state: dict | None, worker: str,
                            claim_next: tuple[int, int | None] | None, in_flight: int) -> tuple[int, int, list]:
        """record_batch's part in the campaign, in its transaction once the trials are inserted: the links,
        the reservations ended, the state, the claim. Returns (trials stored, granted, adopted)."""
        order = [(m.candidate.key, False) for m in measured] + [(m.candidate.key, True) for m in reused]
        if order:
            table = TrialRow.__table__
            owner = {k: (i, c) for k, i, c in self._rows_for_keys(
                s, [table.c.candidate_key, table.c.id, table.c.campaign_id], task_id, device_id, [k for k, _ in order])}
            # a measurement whose trial another campaign stored first (its row kept) is a look-up of that trial
            kept = [(owner[k][0], r or owner[k][1] != campaign_id) for k, r in order if k in owner]
            self.link(s, campaign_id, [t for t, _ in kept], [r for _, r in kept])
        if measured:
            pending = CampaignPendingRow.__table__
            keys = [m.candidate.key for m in measured]
            for i in range(0, len(keys), CHUNK):
                s.execute(pending.delete().where(pending.c.campaign_id == campaign_id,
                                                 pending.c.candidate_key.in_(keys[i:i + CHUNK])))
        now = utcnow()
        if state is not None:
            states = AlgorithmStateRow.__table__
            s.execute(self._insert(states).values(campaign_id=campaign_id, state=state, updated=now)
                      .on_conflict_do_update(index_elements=["campaign_id"], set_={"state": state, "updated": now}))
        s.execute(update(CampaignRow.__table__).where(CampaignRow.__table__.c.id == campaign_id).values(updated=now))
        total = s.scalar(select(func.count(TrialRow.id)).where(TrialRow.campaign_id == campaign_id))
        want, budget = claim_next or (0, 0)
        granted, adopted = self._claim_in(s, campaign_id, worker, want, budget, total, in_flight, now)
        return total, granted, adopted

    def overwrite_failed(self, s: Session, rows: list[dict]) -> int:
        """Write each trial row of ``rows`` (``measurement_row``'s columns) over the stored trial of its task,
        device and candidate where that one failed; a trial stored as OK, or none, is left to ``insert_rows``.
        The failure's status, error, time, worker and campaign go to the row's ``meta["earlier"]`` (every
        earlier attempt, oldest first, after those the row already holds), and a campaign that measured the
        failure keeps it in its history as a look-up (its evaluation now holds a result another measured).
        Returns how many trials were written over."""
        table, links = TrialRow.__table__, CampaignTrialRow.__table__
        groups: dict[tuple[int, int], list[dict]] = {}
        for row in rows:
            groups.setdefault((row["task_id"], row["device_id"]), []).append(row)
        replaced = 0
        for (task_id, device_id), group in groups.items():
            stored = self._rows_for_keys(s, [table.c.id, table.c.candidate_key, table.c.status, table.c.error,
                                             table.c.created, table.c.worker, table.c.campaign_id, table.c.meta],
                                         task_id, device_id, [r["candidate_key"] for r in group])
            failed = {r.candidate_key: r for r in stored if r.status != Status.OK.value}
            if not failed:
                continue
            owners = {r.campaign_id for r in failed.values() if r.campaign_id is not None}
            names = dict(s.execute(select(CampaignRow.id, CampaignRow.name).where(CampaignRow.id.in_(owners))).all()) \
                if owners else {}
            for row in group:
                old = failed.pop(row["candidate_key"], None)
                if old is None:
                    continue
                meta = dict(row.get("meta") or {})
                mine = list(meta.get("earlier") or [])  # an imported retry brings its own earlier attempts
                earlier = list((old.meta or {}).get("earlier") or []) + [{
                    "status": old.status, "error": old.error or "", "created": old.created.isoformat(),
                    "worker": old.worker or "", "campaign": names.get(old.campaign_id)}]
                meta["earlier"] = mine + [e for e in earlier if e not in mine]
                values = {**row, "meta": meta}
                for key in ("candidate", "times", "meta"):  # numpy values as insert_rows writes them
                    values[key] = orjson.loads(orjson.dumps(values[key], option=_JSON_OPTIONS))
                # never over a trial another writer stored as OK meanwhile (on PostgreSQL writers run side by side)
                done = s.execute(update(table).where(table.c.id == old.id, table.c.status != Status.OK.value)
                                 .values(**values)).rowcount
                replaced += done
                if done and old.campaign_id is not None and old.campaign_id != row.get("campaign_id"):
                    s.execute(update(links).where(links.c.campaign_id == old.campaign_id, links.c.trial_id == old.id)
                              .values(reused=True))
        return replaced

    def insert_rows(self, s: Session, rows: list[dict]) -> int:
        """Insert trial rows, skipping any (task, device, candidate) already stored; returns how many were new.

        The JSON columns are serialised here. On SQLite the rows go straight to the driver's
        executemany (imports of millions of rows are bound by this); on PostgreSQL through a plain
        view of the table (_WIRE_TRIALS), one executemany with no per-value processing."""
        if not rows:
            return 0
        enc, opt = orjson.dumps, _JSON_OPTIONS
        if self.dialect == "sqlite":  # executemany's row count is the number inserted
            params = [(r["task_id"], r["device_id"], r["campaign_id"], r["candidate_key"],
                       enc(r["candidate"], option=opt).decode(), r["status"], r["cost"],
                       enc(r["times"], option=opt).decode(), r["predicted"], r["error"], r["build_s"], r["run_s"],
                       r["simulated_s"], enc(r["meta"] or {}, option=opt).decode(),
                       r["created"].isoformat(" ", "microseconds"), r["worker"]) for r in rows]
            return s.connection().exec_driver_sql(_SQLITE_INSERT_TRIAL, params).rowcount

        def dumps(v) -> str:
            return enc(v, option=opt).decode()

        wire = [{**r, "candidate": dumps(r["candidate"]), "times": dumps(r["times"]), "meta": dumps(r["meta"] or {})}
                for r in rows]
        stmt = self._insert(_WIRE_TRIALS).on_conflict_do_nothing(index_elements=["task_id", "device_id", "candidate_key"])
        return len(s.execute(stmt.returning(_WIRE_TRIALS.c.id), wire).all())  # psycopg reports no count for batches

    def link(self, s: Session, campaign_id: int, trial_ids: list[int], reused: list[bool]) -> None:
        """Append evaluations to a campaign's ordered history (each trial at most once)."""
        links = [{"campaign_id": campaign_id, "trial_id": t, "reused": r} for t, r in zip(trial_ids, reused)]
        if links:
            table = CampaignTrialRow.__table__
            s.execute(self._insert(table).on_conflict_do_nothing(index_elements=["campaign_id", "trial_id"]), links)

    def trial_ids(self, s: Session, task_id: int, device_id: int, keys: list[str]) -> dict[str, int]:
        table = TrialRow.__table__
        return dict(self._rows_for_keys(s, [table.c.candidate_key, table.c.id], task_id, device_id, keys))

    def add_trials(self, task: Task, device: Device, measured: list[Measurement], campaign_id: int | None = None,
                   worker: str | None = None) -> int:
        """Store measurements outside any campaign loop (imports, op costs). Returns how many were new."""
        return self.record_batch(self.task_id(task), self.device_id(device), campaign_id, measured, worker=worker)[0]

    def count_trials(self) -> int:
        with self.session() as s:
            return s.scalar(select(func.count(TrialRow.id)))
