"""Shared fixtures: database URLs for SQLite (always) and PostgreSQL (when a server is reachable)."""

from __future__ import annotations

import os
import uuid

import pytest

PG_BASE = os.environ.get("AUTOTUNE_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def _pg_admin():
    try:
        import psycopg
        from sqlalchemy.engine import make_url
    except ImportError:
        return None, "psycopg is not installed (pip install 'autotune[postgres]')"
    u = make_url(PG_BASE)
    try:
        conn = psycopg.connect(host=u.host, port=u.port or 5432, user=u.username, dbname=u.database,
                               password=u.password, autocommit=True, connect_timeout=3)
    except Exception as exc:  # noqa: BLE001 - any failure means: no server to test against
        return None, f"no PostgreSQL server at {u.render_as_string(hide_password=True)} ({exc.__class__.__name__})"
    return conn, ""


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'autotune.db'}"


@pytest.fixture
def postgres_url():
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    conn, why = _pg_admin()
    if conn is None:
        pytest.skip(why)
    name = f"autotune_test_{uuid.uuid4().hex[:12]}"
    conn.execute(f'CREATE DATABASE "{name}"')
    from sqlalchemy.engine import make_url

    yield make_url(PG_BASE).set(database=name).render_as_string(hide_password=False)
    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    conn.close()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request):
    """Every database test runs on SQLite and, where a server is reachable, on PostgreSQL."""
    return request.getfixturevalue(f"{request.param}_url")
