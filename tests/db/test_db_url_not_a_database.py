"""A --db that names a directory says so, and an SQLite file of another program is not told it misses a -wal
copy (that hint is for a file without any table: an empty file, or a copy of one in use). Another program's
SQLite file is refused by every way in, tuning included, and left byte for byte as it was; an empty file gets
autotune's schema, and a PostgreSQL database shared with other tables is used as it is."""

from __future__ import annotations

import os
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


def another_programs_file(path, journal: str = "delete"):
    """An SQLite file of another program (two tables and a row, in the journal mode ``journal``), closed."""
    con = sqlite3.connect(path)
    con.execute(f"pragma journal_mode={journal}")
    con.execute("create table orders (id integer primary key, customer integer)")
    con.execute("create table customers (id integer primary key, name text)")
    con.execute("insert into orders values (1, 1)")
    con.commit()
    con.close()


def refusal(url: str, flag: str = "--db") -> str:
    return (f"database {url} is not an autotune database (its tables: customers, orders): the file holds other "
            f"tables and no autotune schema, and autotune leaves it as it is; use another file for {flag} (a new "
            "file gets autotune's schema)")


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_another_programs_sqlite_file_is_refused_by_every_way_in_and_left_byte_for_byte(tmp_path, journal):
    """Tuning would add autotune's tables to it, and merely connecting switches it to WAL mode (its header
    rewritten): every command refuses it in one line before connecting, and no file is left beside it."""
    path = tmp_path / "other.db"
    another_programs_file(path, journal)
    before = path.read_bytes()
    url = f"sqlite:///{path}"
    for args in (["tune", "replay", "--cache", "example:pnpoly-rtx3090", "--trials", 5, "--no-progress"],
                 ["campaigns"], ["trials"], ["best"], ["db", "upgrade"]):
        r = run(*args, "--db", url)
        assert r.exit_code == 2 and r.stderr == f"error: {refusal(url)}\n", (args, r.output)
        assert path.read_bytes() == before and os.listdir(tmp_path) == ["other.db"], args


def test_minimize_refuses_another_programs_sqlite_file_before_measuring(tmp_path):
    import autotune
    from autotune.db import open_database

    path = tmp_path / "other.db"
    another_programs_file(path)
    before = path.read_bytes()
    url = f"sqlite:///{path}"
    measured = []
    with pytest.raises(UsageError) as refused:
        autotune.minimize(lambda c: measured.append(c) or 1.0, {"a": [1, 2, 3]}, trials=2, db=url, progress=False)
    assert str(refused.value) == refusal(url, flag="db") and measured == []
    for create in (True, False):
        with pytest.raises(UsageError, match="holds other tables and no autotune schema"):
            open_database(url, create=create)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["other.db"]


@pytest.mark.parametrize("empty", ["zero bytes", "no table", "no table, WAL mode"])
def test_an_empty_sqlite_file_gets_autotunes_schema(tmp_path, empty):
    import autotune
    from autotune import queries

    path = tmp_path / "empty.db"
    if empty == "zero bytes":
        path.write_bytes(b"")
    else:
        con = sqlite3.connect(path)
        if "WAL" in empty:
            con.execute("pragma journal_mode=wal")
        con.execute("create table scratch (a)")
        con.execute("drop table scratch")
        con.commit()
        con.close()
        assert path.stat().st_size > 0
    url = f"sqlite:///{path}"
    result = autotune.minimize(lambda c: float(c["a"]), {"a": [1, 2, 3]}, trials=2, db=url, progress=False)
    assert result.trials == 2 and len(queries.trials(url)) == 2


def test_a_postgresql_database_with_other_tables_gets_autotunes_beside_them(postgres_url):
    """A PostgreSQL database is a server's, shared by programs: autotune's tables live beside the others."""
    from sqlalchemy import create_engine, text

    import autotune
    from autotune import queries

    engine = create_engine(postgres_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("create table orders (id integer primary key)"))
            conn.execute(text("insert into orders values (1)"))
        result = autotune.minimize(lambda c: float(c["a"]), {"a": [1, 2, 3]}, trials=2, db=postgres_url,
                                   progress=False)
        assert result.trials == 2 and len(queries.trials(postgres_url)) == 2
        with engine.connect() as conn:
            assert conn.execute(text("select id from orders")).scalars().all() == [1]
    finally:
        engine.dispose()
