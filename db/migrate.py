"""Schema management through alembic: create a new database, refuse an outdated one with a
message saying how to upgrade, and upgrade on request (`autotune db upgrade`)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from autotune.errors import UsageError

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str = "") -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def head_revision() -> str:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine, revision: str = "head") -> None:
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


# pg_advisory_xact_lock key that serialises schema creation on PostgreSQL ("autotune" in ASCII)
SCHEMA_LOCK_KEY = 0x6175746F74756E65


def create_schema(engine, url: str) -> None:
    """Create the schema in an empty database, holding a lock for the whole migration.

    Several workers opening one fresh database at once all get here: each takes the lock
    (PostgreSQL: a transaction-scoped advisory lock; SQLite: an exclusive transaction, which
    makes the others wait on the busy timeout), then looks at the revision again, so only
    the first creates the schema and the others find it done. The migration runs in that
    same transaction, so nobody sees half a schema.
    """
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
        else:
            conn.exec_driver_sql("BEGIN EXCLUSIVE")
        current = MigrationContext.configure(conn).get_current_revision()
        if current is None:
            if set(inspect(conn).get_table_names()) & {"trials", "campaigns"}:
                conn.rollback()
                raise UsageError(f"database {url} has autotune-like tables but no schema revision; "
                                 "it was not made by autotune")
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
        conn.commit()


def check_schema(engine, url: str, create: bool = True) -> None:
    """Create the schema in an empty database; refuse one at an older revision."""
    head = head_revision()
    current = current_revision(engine)
    if current == head:
        return
    if current is None:
        if not create:
            raise UsageError(f"database {url} has no autotune schema")
        create_schema(engine, url)
        current = current_revision(engine)
        if current == head:
            return
    scripts = ScriptDirectory.from_config(alembic_config())
    if current not in {r.revision for r in scripts.walk_revisions()}:
        raise UsageError(f"database {url} is at schema revision {current}, newer than this autotune knows ({head}); upgrade autotune")
    raise UsageError(f"database {url} is at schema revision {current}, older than {head}; run: autotune db upgrade --db {url}")
