"""Shared fixtures: database URLs for SQLite (always) and PostgreSQL (when a server is reachable), and
a guard that fails a test that writes into the working directory or the repository root."""

from __future__ import annotations

import functools
import importlib.util
import os
import signal
import sys
import uuid
from pathlib import Path

import pytest
import typer.testing as typer_testing

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"

# A shell starts a background job (`pytest &` in a script) with Ctrl-C ignored, and the processes the tests start
# inherit that: the tests that press Ctrl-C on a subprocess would see it ignored. A handled SIGINT is reset to the
# default when a child starts, so every subprocess of the suite starts with Python's KeyboardInterrupt.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# typer's CliRunner builds the whole command tree from the app's signatures at each invoke (about 60 ms for
# autotune's app), and the suite invokes the CLI in-process over a thousand times: each app's tree is built
# once and reused. A built tree is stateless (click makes a new context for every call), so reuse changes no
# result. Where typer.testing names its builder otherwise, nothing is patched and the tests only run slower.
if hasattr(typer_testing, "_get_command"):
    typer_testing._get_command = functools.cache(typer_testing._get_command)

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


@pytest.fixture
def load_script():
    """``load_script(name)``: a fresh module of ``scripts/<name>.py`` at each call. The benchmark scripts keep
    their run's settings in module globals that their ``main`` sets (bench_search.py's batch size and model
    options), so a test that runs a ``main`` gets a copy no other test has touched."""
    def load(name: str):
        spec = importlib.util.spec_from_file_location(f"_script_{name}", SCRIPTS / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # dataclasses look their module up there
        spec.loader.exec_module(mod)
        return mod
    return load


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request):
    """Every database test runs on SQLite and, where a server is reachable, on PostgreSQL."""
    return request.getfixturevalue(f"{request.param}_url")


# -- nothing written into the working directory -------------------------------------------------------
# A command run without --db writes ./autotune.db, an example without an output path writes next to
# itself: a test must write under tmp_path (or chdir there). The guard lists the working directory and
# the repository root at session start and, after every test, fails the test that added or changed a
# file there, naming the files. Only the top level is watched (a folder counts as added or removed, its
# contents are not read); the caches of the test tools themselves are left out.
_TOOL_CACHES = {".hypothesis", ".pytest_cache", ".ruff_cache", ".import_linter_cache", ".mypy_cache", "__pycache__"}


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Name -> (mtime ns, size) of each file at the top of ``folder`` ((0, 0) for a folder)."""
    out = {}
    with os.scandir(folder) as entries:
        for e in entries:
            if e.name in _TOOL_CACHES:
                continue
            try:
                st = e.stat(follow_symlinks=False)
                out[e.name] = (st.st_mtime_ns, st.st_size) if e.is_file(follow_symlinks=False) else (0, 0)
            except OSError:  # removed meanwhile
                continue
    return out


@pytest.fixture(scope="session")
def _watched_folders() -> dict[Path, dict[str, tuple[int, int]]]:
    folders = {Path.cwd().resolve(), Path(__file__).resolve().parents[1]}
    return {f: _listing(f) for f in folders}


@pytest.fixture(autouse=True)
def _no_files_written_into_the_working_directory(_watched_folders, request):
    yield
    problems = []
    for folder, before in _watched_folders.items():
        after = _listing(folder)
        new = sorted(set(after) - set(before))
        changed = sorted(n for n in set(after) & set(before) if after[n] != before[n])
        if new or changed:
            problems.append(f"{folder}: " + "; ".join(
                part for part in (f"new {', '.join(new)}" if new else "",
                                  f"changed {', '.join(changed)}" if changed else "") if part))
            _watched_folders[folder] = after  # reported once, by the test that did it
    if problems:
        pytest.fail(f"{request.node.nodeid} wrote into the working directory or the repository root "
                    f"({' | '.join(problems)}); write under tmp_path, or pass --db / an output path there",
                    pytrace=False)


@pytest.fixture
def recorded(tmp_path):
    """A SQLite database where a TITAN RTX and an RTX 3090 measured the toy kernel (autotune.testing.caches):
    (database, its URL, the kernel's task, the folder of the caches)."""
    from autotune.db import open_database
    from autotune.testing.caches import import_two_gpus

    url = f"sqlite:///{tmp_path / 'recorded.db'}"
    db = open_database(url)
    task = import_two_gpus(db, tmp_path)
    yield db, url, task, tmp_path
    db.close()


def pytest_collection_modifyitems(items):
    """The slow tests (long recordings and searches) hang only past 30 minutes, not past the default 5."""
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(1800))
