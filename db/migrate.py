"""Schema management through alembic: create a new database, refuse an outdated one with a
message saying how to upgrade, and upgrade on request (`autotune db upgrade`).

Alembic is imported only to create, upgrade or refuse a schema: a database already at :data:`HEAD` is
opened without it (its import, with mako's and pygments', is a tenth of a query command's start)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text

from autotune.errors import UsageError, argument

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

MIGRATIONS = Path(__file__).resolve().parent / "migrations"

#: the newest migration's revision, alembic's head (tests/db/test_schema_created.py checks the two agree)
HEAD = "0005"


def alembic_config(url: str = "") -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


@cache
def scripts() -> ScriptDirectory:
    """The migration scripts, read once per process."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    return scripts().get_current_head()


def current_revision(engine) -> str | None:
    """The database's schema revision (alembic's version table), None where it has none."""
    with engine.connect() as conn:
        return _revision(conn)


def _revision(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    versions = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    if len(versions) > 1:  # autotune's migrations form one line: never several heads
        raise UsageError(f"the database has several schema revisions at once ({', '.join(sorted(versions))}); "
                         "it was not made by autotune")
    return versions[0] if versions else None


# pg_advisory_xact_lock key that serialises schema changes on PostgreSQL ("autotune" in ASCII)
SCHEMA_LOCK_KEY = 0x6175746F74756E65


@contextmanager
def schema_lock(engine) -> Iterator[Connection]:
    """A connection holding the schema lock in one transaction, committed when the block ends and rolled
    back when it raises: PostgreSQL, a transaction-scoped advisory lock (another holder waits); SQLite, an
    exclusive transaction (another holder waits on the busy timeout). Every DDL statement of a migration run
    on it belongs to that transaction: SQLite would otherwise commit each CREATE/ALTER on its own (pysqlite
    begins a transaction only before a data statement), so an upgrade stopped half-way (Ctrl-C, a kill, a
    failure) would leave tables of a revision the database does not record, and every later upgrade would
    fail on them ("table rules already exists")."""
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
        else:
            conn.exec_driver_sql("BEGIN EXCLUSIVE")
        yield conn
        conn.commit()


def _safe(engine, url: str) -> str:
    return url or engine.url.render_as_string(hide_password=True)


def _refuse_foreign(conn, url: str) -> None:
    if set(inspect(conn).get_table_names()) & {"trials", "campaigns"}:
        raise UsageError(f"database {url} has autotune-like tables but no schema revision; "
                         "it was not made by autotune")


def _shown(tables: list[str]) -> str:
    return ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")


def refuse_foreign_sqlite_file(url: str, path: str) -> None:
    """Refuse the SQLite file ``path`` when it holds tables and no autotune schema (no alembic_version table):
    another program's database, which autotune must not add its tables to. Checked before autotune's engine
    connects, since that connection alone rewrites the file's header (the switch to WAL mode); the file is read
    without a change (:func:`sqlite_tables`). A missing or empty file, one without any table, and an autotune
    database of any revision pass. A PostgreSQL database is never refused so: autotune's tables live beside
    others there."""
    from autotune.db.engine import sqlite_tables

    tables = sqlite_tables(path)
    if tables and "alembic_version" not in tables:
        raise UsageError(f"database {url} is not an autotune database (its tables: {_shown(tables)}): the file "
                         "holds other tables and no autotune schema, and autotune leaves it as it is; use another "
                         f"file for {argument('db', '--db')} (a new file gets autotune's schema)")


def _refuse_newer(current: str | None, url: str) -> None:
    if current is not None and current not in {r.revision for r in scripts().walk_revisions()}:
        raise UsageError(f"database {url} is at schema revision {current}, newer than this autotune knows "
                         f"({head_revision()}); upgrade autotune")


def upgrade(engine, revision: str = "head", url: str = "") -> tuple[str | None, str | None]:
    """Migrate the database to ``revision`` in one transaction under the schema lock; returns the
    revisions (before, after). Two processes upgrading one database at once: the second waits for the
    first, then finds the revision it asked for and does nothing. A database at a revision this autotune
    does not know (made by a newer one) is refused with a UsageError, and so is one with autotune-like
    tables but no revision; both are left untouched."""
    from alembic import command

    url = _safe(engine, url)
    with schema_lock(engine) as conn:
        before = _revision(conn)
        _refuse_newer(before, url)
        if before is None:
            _refuse_foreign(conn, url)
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
        after = _revision(conn)
    return before, after


def upgrade_database(url: str) -> tuple[str, str | None, str | None]:
    """``autotune db upgrade``: the database at ``url`` migrated to this autotune's schema; returns (the URL
    without its password, revision before, revision after). Bad input is a UsageError naming it: a malformed
    URL, a missing SQLite file (nothing is created: a typo in --db leaves no empty database behind), a
    server that cannot be reached, a database newer than this autotune, an SQLite file of another program's
    (left unchanged), or one held by another process beyond the wait (SQLite: the 60 s busy timeout)."""
    import os

    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    from autotune.db.engine import make_engine, sqlite_file

    engine = make_engine(url)  # a malformed URL or an unknown backend: UsageError
    safe = make_url(url).render_as_string(hide_password=True)
    file = sqlite_file(url)
    if file is not None and os.path.isdir(file):
        engine.dispose()
        from autotune.db.engine import directory_error

        raise directory_error(url, file)
    if file is not None and not os.path.isfile(file):
        engine.dispose()
        raise UsageError(f"no database file {file!r} (db upgrade upgrades an existing database; "
                         "campaigns create one)")
    try:
        if file is not None:
            refuse_foreign_sqlite_file(safe, file)
        current = current_revision(engine)
        if current == head_revision():  # nothing to do: no write lock taken (none waited for, none needed)
            return safe, current, current
        before, after = upgrade(engine, url=safe)
    except SQLAlchemyError as exc:
        orig = getattr(exc, "orig", None)
        reason = (str(orig).strip().splitlines() or [""])[0] if orig is not None else str(exc).splitlines()[0]
        raise UsageError(f"cannot upgrade database {safe}: {reason or type(orig).__name__}; nothing was "
                         "changed") from None
    finally:
        engine.dispose()
    return safe, before, after


def create_schema(engine, url: str) -> None:
    """Create the schema in an empty database, holding the schema lock while it does.

    The tables are the models' (``Base.metadata``), created at once and stamped with the head
    revision: what the migrations build step by step, in a third of the time (a test checks
    that the two schemas are the same on SQLite and PostgreSQL). The migrations run only on
    a database made by an older autotune (:func:`upgrade`).

    Several workers opening one fresh database at once all get here: each takes the lock
    (PostgreSQL: a transaction-scoped advisory lock; SQLite: an exclusive transaction, which
    makes the others wait on the busy timeout), then looks at the revision again, so only
    the first creates the schema and the others find it done. The tables and the stamp are
    one transaction, so nobody sees half a schema.
    """
    from alembic.runtime.migration import MigrationContext

    from autotune.db.models import Base

    with schema_lock(engine) as conn:
        if _revision(conn) is None:
            _refuse_foreign(conn, url)
            Base.metadata.create_all(conn)
            MigrationContext.configure(conn).stamp(scripts(), "head")


def check_schema(engine, url: str, create: bool = True) -> None:
    """Create the schema in an empty database; refuse one at an older revision."""
    current = current_revision(engine)
    if current == HEAD:  # the common case, answered without alembic
        return
    head = head_revision()
    if current == head:
        return
    if current is None:
        if not create:
            tables = sorted(inspect(engine).get_table_names())
            if tables:  # another program's database: none of its tables is autotune's
                raise UsageError(f"database {url} has no autotune schema: it is not an autotune database (its "
                                 f"tables: {_shown(tables)})")
            # no table at all: an empty file, or a copy of a file in use made without its -wal file
            copy = ("; a copy of an SQLite file in use needs its -wal file too, which holds the latest commits "
                    "(or copy with: sqlite3 FILE \".backup COPY\")") if engine.dialect.name == "sqlite" else ""
            raise UsageError(f"database {url} has no autotune schema{copy}")
        create_schema(engine, url)
        current = current_revision(engine)
        if current == head:
            return
    _refuse_newer(current, url)
    raise UsageError(f"database {url} is at schema revision {current}, older than {head}; run: autotune db upgrade --db {url}")
