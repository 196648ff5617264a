"""A --db that names a directory says so, and an SQLite file of another program is not told it misses a -wal
copy (that hint is for a file without any table: an empty file, or a copy of one in use)."""

from __future__ import annotations

import sqlite3

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.errors import UsageError


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_a_directory_is_named_as_one_by_every_way_in(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    url = f"sqlite:///{folder}"
    for args in (["campaigns"], ["db", "upgrade"],
                 ["tune", "replay", "--cache", "example:pnpoly-rtx3090", "--trials", 1, "--no-progress"]):
        r = run(*args, "--db", url)
        assert r.exit_code == 2 and r.stderr.count("\n") == 1, (args, r.output)
        assert f"names the directory '{folder}', not a database file" in r.stderr, (args, r.stderr)
        assert "no database file" not in r.stderr and "unable to open" not in r.stderr
    from autotune import queries

    with pytest.raises(UsageError, match="names the directory"):
        queries.trials(url)
    assert list(folder.iterdir()) == []


def test_another_programs_sqlite_file_is_not_told_to_copy_its_wal_file(tmp_path):
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("create table orders (id integer)")
    con.commit()
    con.close()
    r = run("campaigns", "--db", f"sqlite:///{path}")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert "not an autotune database (its tables: orders)" in r.stderr and "-wal" not in r.stderr
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    r = run("campaigns", "--db", f"sqlite:///{empty}")  # no table at all: the copy's hint stays
    assert r.exit_code == 2 and "has no autotune schema; a copy of an SQLite file in use needs its -wal" in r.stderr
