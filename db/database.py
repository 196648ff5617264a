"""The Database facade: one session context manager, get-or-create of devices, tasks
and campaigns, batched look-up and insertion of trials.

SQLite (the default, WAL mode) and PostgreSQL run through the same code. Inserts
use ON CONFLICT DO NOTHING on (task, device, candidate), so two workers racing on
one campaign never write a trial twice.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import NamedTuple

import orjson
from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Float,
    Integer,
    MetaData,
    Table,
    Text,
    TypeDecorator,
    create_engine,
    event,
    func,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from autotune.db.campaign_admin import CampaignAdmin
from autotune.db.models import (
    CHUNK,
    AlgorithmStateRow,
    CampaignPendingRow,
    CampaignRow,
    CampaignTrialRow,
    DeviceRow,
    RuleRow,
    TaskRow,
    TrialRow,
    measurement_row,
    row_to_measurement,
    utcnow,
)
from autotune.db.stored_models import StoredModels
from autotune.db.workers import CampaignWorkers, worker_id
from autotune.errors import DatabaseError, UsageError
from autotune.types import Candidate, Device, Measurement, Task

ACCEPTED = "sqlite:///FILE (for example sqlite:///autotune.db) or postgresql+psycopg://USER@HOST:PORT/DBNAME"


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


def _wal(cur, wait_s: float = 60.0) -> None:
    """Switch an SQLite file to WAL. The switch needs the file to itself and SQLite does not wait for
    it on the busy timeout, so a connection opened while another creates the schema retries."""
    deadline, pause = time.monotonic() + wait_s, 0.01
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(0.5, pause * 2)


def _make_engine(url: str) -> Engine:
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UsageError(f"database URL {url!r} is malformed; use {ACCEPTED}") from None
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise UsageError(f"database URL {url!r} names the unsupported backend {backend!r}; use {ACCEPTED}")
    try:
        if backend == "sqlite":
            if parsed.database in (None, ""):
                raise UsageError(f"database URL {url!r} names no file; use {ACCEPTED}")
            engine = create_engine(parsed, connect_args={"timeout": 60})

            @event.listens_for(engine, "connect")
            def _pragmas(dbapi_conn, _record):  # noqa: ANN001
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA busy_timeout=60000")
                _wal(cur)
                cur.execute("PRAGMA synchronous=NORMAL")  # durable against a killed process; fsync at checkpoints
                cur.execute("PRAGMA foreign_keys=ON")
                cur.close()

            return engine
        return create_engine(parsed, pool_pre_ping=True, connect_args={"connect_timeout": 10})
    except (NoSuchModuleError, ImportError) as exc:
        hint = " (pip install 'autotune[postgres]')" if backend == "postgresql" else ""
        raise UsageError(f"database URL {url!r} needs a driver that is not installed: {exc}{hint}") from None


class Database(CampaignWorkers, StoredModels, CampaignAdmin):
    """The experiment database. Use :func:`autotune.db.open_database` to open one (it checks the schema)."""

    def __init__(self, url: str):
        self.url = url
        self.engine = _make_engine(url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._ids: dict[tuple[str, str], int] = {}
        self.dialect = self.engine.dialect.name

    def close(self) -> None:
        self.engine.dispose()

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        """Commit on success, roll back on error, and turn database errors into DatabaseError."""
        s = self._sessions()
        try:
            yield s
            s.commit()
        except SQLAlchemyError as exc:
            s.rollback()
            raise DatabaseError(f"database error on {self.safe_url}: {exc.__class__.__name__}: {exc.orig if hasattr(exc, 'orig') else exc}") from exc
        except BaseException:
            s.rollback()
            raise
        finally:
            s.close()

    @property
    def safe_url(self) -> str:
        return make_url(self.url).render_as_string(hide_password=True)

    def _insert(self, model):
        return (pg_insert if self.dialect == "postgresql" else sqlite_insert)(model)

    # -- devices, tasks -----------------------------------------------------------------
    def _ensure(self, kind: str, obj: Device | Task) -> int:
        if (kind, obj.key) not in self._ids:
            with self.session() as s:
                self._ids[(kind, obj.key)] = self.row_id_in(s, obj)
        return self._ids[(kind, obj.key)]

    def row_id_in(self, s: Session, obj: Device | Task) -> int:
        """Id of the device's or task's row, inserted in session ``s`` if missing."""
        if isinstance(obj, Device):
            model, values = DeviceRow, {"name": obj.name, "kind": obj.kind, "properties": obj.properties}
        else:
            model, values = TaskRow, {"kind": obj.kind, "name": obj.name, "params": obj.params}
        s.execute(self._insert(model).values(key=obj.key, **values).on_conflict_do_nothing(index_elements=["key"]))
        return s.scalar(select(model.id).where(model.key == obj.key))

    def device_id(self, device: Device) -> int:
        return self._ensure("device", device)

    def task_id(self, task: Task) -> int:
        return self._ensure("task", task)

    # -- campaigns ----------------------------------------------------------------------
    def open_campaign(self, name: str, task: Task, device: Device, algorithm: str, options: dict) -> tuple[CampaignRow, bool]:
        """Create the campaign, or return the existing one of that name (resume). Returns (row, resumed)."""
        tid, did = self.task_id(task), self.device_id(device)
        with self.session() as s:
            res = s.execute(
                self._insert(CampaignRow)
                .values(name=name, task_id=tid, device_id=did, algorithm=algorithm, options=options,
                        status="running", created=utcnow(), updated=utcnow())
                .on_conflict_do_nothing(index_elements=["name"]).returning(CampaignRow.id)
            )
            created = res.first() is not None
            row = s.scalar(select(CampaignRow).where(CampaignRow.name == name))
        if row.task_id != tid or row.device_id != did:
            raise UsageError(
                f"campaign {name!r} already exists for another task or device; resume it with the same "
                "task and device, or choose another --campaign name"
            )
        if not created and row.algorithm != algorithm:  # its stored search state belongs to that algorithm
            raise UsageError(
                f"campaign {name!r} was run with algorithm {row.algorithm!r}, not {algorithm!r}; resume it with "
                "the same algorithm, start it afresh (--fresh), or choose another --campaign name"
            )
        return row, not created

    def campaign_is_for(self, name: str, task: Task, device: Device) -> bool | None:
        """Whether the campaign ``name`` is of ``task`` on ``device``; None when there is no such campaign."""
        with self.session() as s:
            keys = s.execute(
                select(TaskRow.key, DeviceRow.key).select_from(CampaignRow)
                .join(TaskRow, TaskRow.id == CampaignRow.task_id).join(DeviceRow, DeviceRow.id == CampaignRow.device_id)
                .where(CampaignRow.name == name)).first()
        return None if keys is None else tuple(keys) == (task.key, device.key)

    def campaign(self, name: str) -> CampaignRow:
        with self.session() as s:
            row = s.scalar(select(CampaignRow).where(CampaignRow.name == name))
            if row is None:
                names = s.scalars(select(CampaignRow.name).order_by(CampaignRow.id.desc()).limit(10)).all()
        if row is None:
            known = ", ".join(names) if names else "none yet"
            raise UsageError(f"unknown campaign {name!r}; campaigns in {self.safe_url}: {known}")
        return row

    def load_state(self, campaign_id: int) -> dict | None:
        with self.session() as s:
            row = s.get(AlgorithmStateRow, campaign_id)
            return dict(row.state) if row else None

    def campaign_history(self, campaign_id: int) -> list[tuple[Measurement, bool]]:
        """Every evaluation of the campaign in order, with whether it was reused from the database."""
        with self.session() as s:
            rows = s.execute(
                select(TrialRow, CampaignTrialRow.reused)
                .join(CampaignTrialRow, CampaignTrialRow.trial_id == TrialRow.id)
                .where(CampaignTrialRow.campaign_id == campaign_id)
                .order_by(CampaignTrialRow.id)
            ).all()
        return [(row_to_measurement(t), bool(reused)) for t, reused in rows]

    def others_since(self, campaign_id: int, after: int | None, worker: str) -> tuple[list[Measurement], int]:
        """Measurements other workers added to the campaign after link ``after`` (None: none, only the
        position now), and the last link's id: what a worker has not been told yet."""
        links = CampaignTrialRow.__table__
        with self.session() as s:
            last = s.scalar(select(func.max(links.c.id)).where(links.c.campaign_id == campaign_id)) or 0
            if after is None or last <= after:
                return [], max(last, after or 0)
            rows = s.execute(
                select(TrialRow).join(CampaignTrialRow, CampaignTrialRow.trial_id == TrialRow.id)
                .where(CampaignTrialRow.campaign_id == campaign_id, CampaignTrialRow.id > after,
                       CampaignTrialRow.id <= last, CampaignTrialRow.reused.is_(False), TrialRow.worker != worker)
                .order_by(CampaignTrialRow.id)).scalars().all()
            return [row_to_measurement(t) for t in rows], last

    # -- trials -------------------------------------------------------------------------
    def lookup(self, task_id: int, device_id: int, keys: Iterable[str]) -> dict[str, Measurement]:
        """Known measurements of these candidate keys on this task and device."""
        with self.engine.connect() as conn:
            rows = self._rows_for_keys(conn, [TrialRow.__table__], task_id, device_id, keys)
            return {r.candidate_key: row_to_measurement(r) for r in rows}

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

    def record_batch(
        self, task_id: int, device_id: int, campaign_id: int | None, measured: list[Measurement],
        reused: list[Measurement] = (), state: dict | None = None, worker: str | None = None,
        claim_next: tuple[int, int | None] | None = None, in_flight: int = 0, created: datetime | None = None,
    ) -> Stored:
        """Store one batch in one transaction: new trials, the campaign's links to every evaluation
        in order, and the algorithm state. The stored candidates leave the worker's reservations, and
        its claim on the trial budget is set to ``in_flight`` (its measurements still running) plus
        what it is granted next: with ``claim_next=(n, budget)`` up to ``n`` more, never more than
        ``budget`` (None: no trial budget) less the stored trials and the other live workers' claims.
        The grant first takes over candidates that dead workers reserved and did not store.

        ``created``: when the campaign this run opened was created. A campaign deleted meanwhile (and,
        on SQLite, its id perhaps given to a new one) no longer matches: the measurements are stored
        without a campaign, as a deleted campaign's are, and CampaignGone is raised."""
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
            inserted = self.insert_rows(s, [measurement_row(m, task_id, device_id, own, worker) for m in measured])
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
            ids = self.trial_ids(s, task_id, device_id, [k for k, _ in order])
            kept = [(ids[k], r) for k, r in order if k in ids]
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

    def insert_rows(self, s: Session, rows: list[dict]) -> int:
        """Insert trial rows, skipping any (task, device, candidate) already stored; returns how many were new.

        The JSON columns are serialised here. On SQLite the rows go straight to the driver's
        executemany (imports of millions of rows are bound by this); on PostgreSQL through a plain
        view of the table (_WIRE_TRIALS), one executemany with no per-value processing."""
        if not rows:
            return 0
        enc, opt = orjson.dumps, orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
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

    # -- graph rules --------------------------------------------------------------------
    def save_rules(self, rules: list[dict]) -> int:
        """Store rules (each with key, name, provenance, status); a stored rule gets the newer status.
        Returns how many were new."""
        table = RuleRow.__table__
        with self.session() as s:
            known = set(s.scalars(select(table.c.key).where(table.c.key.in_([r["key"] for r in rules]))).all())
            for r in rules:
                values = {"name": r["name"], "provenance": r["provenance"], "status": r["status"], "rule": r}
                s.execute(self._insert(table).values(key=r["key"], created=utcnow(), **values)
                          .on_conflict_do_update(index_elements=["key"], set_=values))
        return len({r["key"] for r in rules} - known)
