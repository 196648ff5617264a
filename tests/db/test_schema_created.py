"""A new database gets the models' tables at once, stamped with the head revision: the same schema, on SQLite and
PostgreSQL, as every migration run one after the other from an empty database (which older databases still go
through, tests/db/test_schema_upgrade.py)."""

from __future__ import annotations

from sqlalchemy import create_engine, inspect, text

from autotune.db.migrate import HEAD, create_schema, current_revision, head_revision, upgrade
from autotune.db.models import Base


def schema(engine) -> dict:
    """Each table's columns (name, type, nullable, default), primary key, foreign keys, indexes and unique
    constraints, with their names. Column order is left out: a migration adds a column at a table's end."""
    insp = inspect(engine)
    out = {}
    for t in insp.get_table_names():
        out[t] = {
            "columns": sorted((c["name"], str(c["type"]), c["nullable"], str(c.get("default")))
                              for c in insp.get_columns(t)),
            "primary key": insp.get_pk_constraint(t)["constrained_columns"],
            "foreign keys": sorted((f.get("name") or "", tuple(f["constrained_columns"]), f["referred_table"],
                                    tuple(f["referred_columns"])) for f in insp.get_foreign_keys(t)),
            "indexes": sorted((i["name"], tuple(i["column_names"]), bool(i["unique"])) for i in insp.get_indexes(t)),
            "unique": sorted((u.get("name") or "", tuple(u["column_names"])) for u in insp.get_unique_constraints(t)),
        }
    return out


def test_a_new_database_has_the_schema_the_migrations_build(db_url):
    engine = create_engine(db_url)
    try:
        assert upgrade(engine) == (None, head_revision())  # every migration, from an empty database
        migrated = schema(engine)
        assert set(migrated) == set(Base.metadata.tables) | {"alembic_version"}
        assert ("ix_trials_task_device_cost", ("task_id", "device_id", "cost"), False) in migrated["trials"]["indexes"]
        assert ("uq_campaign_pending_key", ("campaign_id", "candidate_key")) in migrated["campaign_pending"]["unique"]
        with engine.begin() as conn:  # empty again
            Base.metadata.drop_all(conn)
            conn.execute(text("DROP TABLE alembic_version"))
        assert inspect(engine).get_table_names() == []
        create_schema(engine, db_url)
        assert current_revision(engine) == head_revision()
        assert schema(engine) == migrated
    finally:
        engine.dispose()


def test_a_database_at_head_opens_without_importing_alembic_and_head_is_alembics(tmp_path):
    """A database at migrate.HEAD is opened without importing alembic: HEAD is the newest migration."""
    import subprocess
    import sys

    assert HEAD == head_revision()
    url = f"sqlite:///{tmp_path / 'a.db'}"
    code = ("import sys; from autotune.db import open_database; open_database(sys.argv[1]).close(); "
            "print('alembic' in sys.modules)")
    runs = [subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, timeout=120)
            for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr[-800:] for r in runs]
    assert [r.stdout.strip() for r in runs] == ["True", "False"]  # to create the database, then not
