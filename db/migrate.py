"""Schema management through alembic: create a new database, refuse an outdated one with a
message saying how to upgrade, and upgrade on request (`autotune db upgrade`)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

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


def check_schema(engine, url: str, create: bool = True) -> None:
    """Create the schema in an empty database; refuse one at an older revision."""
    current = current_revision(engine)
    head = head_revision()
    if current == head:
        return
    if current is None:
        tables = set(inspect(engine).get_table_names())
        if tables & {"trials", "campaigns"}:
            raise UsageError(f"database {url} has autotune-like tables but no schema revision; it was not made by autotune")
        if create:
            upgrade(engine)
            return
        raise UsageError(f"database {url} has no autotune schema")
    scripts = ScriptDirectory.from_config(alembic_config())
    if current not in {r.revision for r in scripts.walk_revisions()}:
        raise UsageError(f"database {url} is at schema revision {current}, newer than this autotune knows ({head}); upgrade autotune")
    raise UsageError(f"database {url} is at schema revision {current}, older than {head}; run: autotune db upgrade --db {url}")
