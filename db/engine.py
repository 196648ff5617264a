"""The database engine for a URL: SQLite (a file, in WAL mode, with a long busy timeout) or PostgreSQL;
a malformed URL, another backend or a missing driver is a UsageError naming what is accepted.

An SQLite file this process cannot write (the file, or the folder that holds its -wal and -shm files, is
read-only) is opened read-only: queries work, and a write fails (Database says so in one line)."""

from __future__ import annotations

import functools
import os
import sqlite3
import sys
import time
from urllib.parse import quote

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from autotune.errors import DatabaseError, UsageError

ACCEPTED = "sqlite:///FILE (for example sqlite:///autotune.db) or postgresql+psycopg://USER@HOST:PORT/DBNAME"


def malformed_url(url: str) -> UsageError:
    """The error for a --db that is no URL; a file's path (no scheme) is answered with its sqlite URL."""
    if isinstance(url, str) and url.strip() and ":" not in url:
        return UsageError(f"database URL {url!r} is malformed: it names no backend; an SQLite file of that path "
                          f"is sqlite:///{url}")
    return UsageError(f"database URL {url!r} is malformed; use {ACCEPTED}")


#: seconds an SQLite statement waits for another connection's write lock before it fails (the busy timeout)
BUSY_TIMEOUT_S = 60.0


def locked_text(safe_url: str) -> str:
    """What a write that gave up on the busy timeout (PostgreSQL: the lock timeout) met, in words (a caller
    adds what happens next)."""
    if safe_url.startswith("postgresql"):
        return (f"database {safe_url} is locked: another session has held a lock this write needs for over "
                f"{BUSY_TIMEOUT_S:.0f} s (a transaction left open in psql or a database browser, a long import)")
    return (f"database {safe_url} is locked: another process has kept a write transaction open for over "
            f"{BUSY_TIMEOUT_S:.0f} s (a sqlite3 shell, a database browser, a long import)")


def locked_error(orig) -> bool:
    """Whether the driver's error ``orig`` is a lock waited on past the timeout: SQLite's busy timeout, or
    PostgreSQL's lock_timeout (SQLSTATE 55P03, lock_not_available)."""
    if isinstance(orig, sqlite3.OperationalError):
        return "database is locked" in str(orig)
    return getattr(orig, "sqlstate", None) == "55P03"


def is_locked(exc: BaseException) -> bool:
    """Whether ``exc`` (a DatabaseError) is a write that gave up waiting for a lock another connection held
    all that time."""
    return locked_error(getattr(exc.__cause__, "orig", None))


def waits_out_locks(method):
    """A Database write method that tries again, for as long as it takes, when another process holds the
    SQLite write lock (on PostgreSQL, a lock the write needs) past the busy timeout (a transaction left open in
    a sqlite3 shell, psql or a database browser, a long import), saying so on standard error once while the lock lasts (whichever of the
    process's threads waits first): what it stores (a batch of measurements, a campaign's claim) is kept
    rather than dropped with the campaign. Each try is one transaction, rolled back when it fails, so a
    retry stores everything once."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        waited = False
        while True:
            try:
                result = method(self, *args, **kwargs)
            except DatabaseError as exc:
                if not is_locked(exc):
                    raise
                if not getattr(self, "_waiting_said", False):
                    self._waiting_said = True
                    print(f"autotune: {locked_text(self.safe_url)}; waiting for it to end (Ctrl-C stops)",
                          file=sys.stderr, flush=True)
                waited = True
                continue
            if waited:
                self._waiting_said = False
            return result

    return wrapper


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


def directory_error(url: str, path: str) -> UsageError:
    """The error for an ``sqlite:///PATH`` URL whose path is a directory, not a database file."""
    return UsageError(f"database URL {url!r} names the directory {path!r}, not a database file; name a file in it, "
                      f"e.g. sqlite:///{os.path.join(path, 'autotune.db')}")


def sqlite_file(url: str) -> str | None:
    """The file an ``sqlite:///FILE`` URL names; None for another backend, an in-memory database or a
    malformed URL."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return parsed.database


def read_only_reason(path: str) -> str | None:
    """Why this process cannot write the existing SQLite file ``path`` ("the file is read-only", "its folder
    is read-only": WAL mode keeps the -wal and -shm files beside it); None when it can, or it does not exist."""
    if not os.path.isfile(path):
        return None
    if not os.access(path, os.W_OK):
        return "the file is read-only"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.access(folder, os.W_OK | os.X_OK) and not all(
            os.access(path + suffix, os.W_OK) for suffix in ("-wal", "-shm")):
        return "its folder is read-only"
    return None


def sqlite_tables(path: str) -> list[str] | None:
    """The tables and views of the SQLite file ``path`` (SQLite's own left out), read without changing the file
    or leaving a file beside it: [] for a missing or empty file, None for one that cannot be read as a database
    (the engine's own connection says why). A file in WAL mode that no connection has open (no -wal file) is
    read by a plain connection, which removes the -wal and -shm files it makes when it closes (a read-only one
    would leave them), or, where this process cannot write it, as immutable; any other file, read-only."""
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except FileNotFoundError:
        return []
    except OSError:
        return None
    if not header:
        return []
    if not header.startswith(b"SQLite format 3\x00") or len(header) < 100:
        return None
    query = "?mode=ro"
    if header[18:20] == b"\x02\x02" and not os.path.exists(path + "-wal"):  # WAL mode, no connection open
        query = "" if read_only_reason(path) is None else "?mode=ro&immutable=1"
    try:
        con = sqlite3.connect("file:" + quote(os.path.abspath(path)) + query, uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error:
        return None
    try:
        rows = con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                           "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'").fetchall()
    except sqlite3.Error:
        return None
    finally:
        con.close()
    return sorted(name for (name,) in rows)


def _read_only_url(parsed, path: str):
    """``parsed`` rewritten to open ``path`` read-only. Reading a WAL file needs its -shm file, which SQLite
    creates beside it; in a read-only folder without a -wal file (no writer has it open) it is read as
    immutable, the one way SQLite reads it there."""
    query = {"mode": "ro", "uri": "true"}
    folder = os.path.dirname(os.path.abspath(path))
    if not os.access(folder, os.W_OK | os.X_OK) and not os.path.exists(path + "-wal"):
        query["immutable"] = "1"
    return parsed.set(database="file:" + quote(os.path.abspath(path)), query=query)


def make_engine(url: str) -> Engine:
    """The SQLAlchemy engine of ``url`` (nothing is connected yet)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise malformed_url(url) from None
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise UsageError(f"database URL {url!r} names the unsupported backend {backend!r}; use {ACCEPTED}")
    try:
        if backend == "sqlite":
            if parsed.database in (None, ""):
                raise UsageError(f"database URL {url!r} names no file; use {ACCEPTED}")
            if os.path.isdir(parsed.database):
                raise directory_error(url, parsed.database)
            read_only = read_only_reason(parsed.database)
            if read_only:
                parsed = _read_only_url(parsed, parsed.database)
            engine = create_engine(parsed, connect_args={"timeout": BUSY_TIMEOUT_S})

            @event.listens_for(engine, "connect")
            def _pragmas(dbapi_conn, _record):  # noqa: ANN001
                cur = dbapi_conn.cursor()
                cur.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
                if not read_only:
                    _wal(cur)
                    cur.execute("PRAGMA synchronous=NORMAL")  # durable against a killed process; fsync at checkpoints
                cur.execute("PRAGMA foreign_keys=ON")
                cur.close()

            @event.listens_for(engine, "handle_error")
            def _close_interrupted_cursor(context):  # noqa: ANN001
                # Ctrl-C inside a statement: SQLAlchemy closes the connection, and SQLite keeps it open, holding
                # the write lock, until the statement's cursor is gone; the traceback keeps the cursor (until the
                # garbage collector runs), so the next write of this process (the interrupted campaign storing
                # what it measured) would wait on its own lock for good
                if isinstance(context.original_exception, Exception):
                    return
                # ExceptionContext.cursor is documented, and some SQLAlchemy releases leave it unset
                cursor = getattr(context, "cursor", None) or getattr(context.execution_context, "cursor", None)
                if cursor is not None:
                    try:
                        cursor.close()
                    except sqlite3.Error:
                        pass

            return engine
        # a lock another session holds (a transaction left open in psql) is waited on for BUSY_TIMEOUT_S, as on
        # SQLite, then reported: waits_out_locks says so and tries again, where PostgreSQL alone waits silently
        return create_engine(parsed, pool_pre_ping=True, connect_args={
            "connect_timeout": 10, "options": f"-c lock_timeout={int(BUSY_TIMEOUT_S * 1000)}"})
    except (NoSuchModuleError, ImportError) as exc:
        hint = " (pip install 'autotune[postgres]')" if backend == "postgresql" else ""
        raise UsageError(f"database URL {url!r} needs a driver that is not installed: {exc}{hint}") from None
