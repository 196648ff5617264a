"""The database engine for a URL: SQLite (a file, in WAL mode, with a long busy timeout) or PostgreSQL;
a malformed URL, another backend or a missing driver is a UsageError naming what is accepted."""

from __future__ import annotations

import sqlite3
import time

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from autotune.errors import UsageError

ACCEPTED = "sqlite:///FILE (for example sqlite:///autotune.db) or postgresql+psycopg://USER@HOST:PORT/DBNAME"


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


def make_engine(url: str) -> Engine:
    """The SQLAlchemy engine of ``url`` (nothing is connected yet)."""
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
