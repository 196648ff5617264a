"""A database made at an older schema revision upgrades with `autotune db upgrade`, keeping every row, on
SQLite and PostgreSQL; an upgrade stopped half-way changes nothing; two processes upgrading at once both
succeed; a database newer than this autotune, a missing file or an unreachable server is one line."""

from __future__ import annotations

import subprocess
import sys

import pytest
from alembic import command
from alembic.operations import Operations
from sqlalchemy import create_engine, inspect, text
from typer.testing import CliRunner

import autotune
from autotune.cli.main import app
from autotune.db import open_database
from autotune.db.migrate import alembic_config, current_revision, head_revision, upgrade
from autotune.errors import UsageError

OLDER = ["0001", "0002", "0003", "0004"]
EXAMPLE = "example:pnpoly-rtx3090"


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def downgrade(url: str, revision: str) -> None:
    """The database as an autotune of ``revision`` left it: the migrations after it undone."""
    engine = create_engine(url)
    try:
        cfg = alembic_config()
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, revision)
    finally:
        engine.dispose()


def old_database(url: str, revision: str) -> None:
    """A database with a real campaign (trials, its links, the algorithm's state, cost models), a rule, a
    claim and a reservation of a worker long gone, then taken back to ``revision`` (the tables it did not have yet go)."""
    autotune.tune_replay(EXAMPLE, algorithm="mcmc", trials=40, campaign="old", db=url, progress=False)
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO rules (key, name, provenance, status, rule, created) VALUES "
                          "('k1', 'r1', 'builtin', 'proved', '{}', CURRENT_TIMESTAMP)"))
        conn.execute(text("INSERT INTO campaign_claims (campaign_id, worker, n, heartbeat) "
                          "SELECT id, 'gone:1:t', 0, '2020-01-01 00:00:00' FROM campaigns"))
        conn.execute(text("INSERT INTO campaign_pending (campaign_id, candidate_key, candidate, worker, claimed) "
                          "SELECT id, 'ck', '{}', 'gone:1:t', '2020-01-01 00:00:00' FROM campaigns"))
    engine.dispose()
    downgrade(url, revision)


def snapshot(url: str, columns: dict | None = None) -> dict:
    """Every row of every table (alembic's own apart), as text, of ``columns`` (default: all)."""
    engine = create_engine(url)
    try:
        insp = inspect(engine)
        tables = columns or {t: [c["name"] for c in insp.get_columns(t)] for t in insp.get_table_names()
                             if t != "alembic_version"}
        with engine.connect() as conn:
            rows = {t: sorted(tuple(str(v) for v in r) for r in conn.execute(
                text(f"SELECT {', '.join(cols)} FROM {t}"))) for t, cols in tables.items()}
        return {"columns": tables, "rows": rows}
    finally:
        engine.dispose()


@pytest.mark.parametrize("revision", OLDER)
def test_every_older_revision_upgrades_keeping_every_row_and_the_campaign_resumes(db_url, revision):
    old_database(db_url, revision)
    before = snapshot(db_url)
    assert before["rows"]["trials"] and before["rows"]["cost_models"] and before["rows"]["campaign_trials"]
    with pytest.raises(UsageError, match="older than .*autotune db upgrade"):
        open_database(db_url)
    r = cli("db", "upgrade", "--db", db_url)
    assert r.exit_code == 0, r.output
    assert f"schema {revision} -> {head_revision()}" in r.stdout
    after = snapshot(db_url, before["columns"])
    assert after["rows"] == before["rows"]  # every row of every table the old schema had, every value
    result = autotune.tune_replay(EXAMPLE, algorithm="mcmc", trials=48, campaign="old", db=db_url, progress=False)
    assert result.trials == 48  # resumed: the 40 old trials count


class Killed(BaseException):
    """What stops an upgrade half-way: as Ctrl-C, not an Exception (so no handler for errors catches it)."""


def stop_in_migration_0004(monkeypatch) -> None:
    """From now on, an upgrade is stopped in migration 0004, after 0002 and 0003 ran."""
    original = Operations.create_table

    def create_table(self, name, *args, **kwargs):
        if name == "campaign_pending":
            raise Killed
        return original(self, name, *args, **kwargs)
    monkeypatch.setattr(Operations, "create_table", create_table)


def test_an_upgrade_stopped_half_way_changes_nothing_and_a_later_upgrade_works(db_url, monkeypatch):
    old_database(db_url, "0001")
    before = snapshot(db_url)
    stop_in_migration_0004(monkeypatch)
    engine = create_engine(db_url)
    try:
        with pytest.raises(Killed):
            upgrade(engine)
        assert current_revision(engine) == "0001"
        assert snapshot(db_url) == before  # no table of 0002 or 0003 left behind
    finally:
        engine.dispose()
    monkeypatch.undo()
    r = cli("db", "upgrade", "--db", db_url)
    assert r.exit_code == 0, r.output
    assert snapshot(db_url, before["columns"])["rows"] == before["rows"]


# each process imports autotune, says so, and upgrades when the test writes a line to all of them at once
UPGRADE_ON_GO = """
import sys
from autotune.db.migrate import upgrade_database
print("ready", flush=True)
sys.stdin.readline()
print(upgrade_database(sys.argv[1])[1:])
"""


@pytest.mark.parametrize("revision", ["0001", pytest.param("0004", marks=pytest.mark.slow)])
def test_two_processes_upgrading_one_old_database_at_once_both_succeed(db_url, revision):
    old_database(db_url, revision)
    before = snapshot(db_url)
    procs = [subprocess.Popen([sys.executable, "-c", UPGRADE_ON_GO, db_url], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for p in procs:  # all three have imported autotune: the upgrades start within a millisecond of each other
        assert p.stdout.readline().strip() == "ready", p.communicate(timeout=180)[1][-800:]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [(p.wait(timeout=180), *p.communicate()) for p in procs]
    assert [rc for rc, _, _ in outs] == [0, 0, 0], [err[-800:] for rc, _, err in outs if rc]
    # one upgraded, the others waited for it and found nothing to do
    assert sorted(out.strip() for _, out, _ in outs) == sorted(
        [f"('{revision}', '{head_revision()}')"] + [f"('{head_revision()}', '{head_revision()}')"] * 2)
    assert snapshot(db_url, before["columns"])["rows"] == before["rows"]


def test_db_upgrade_refuses_a_newer_database_in_one_line_and_leaves_it_as_it_was(db_url):
    open_database(db_url).close()
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    before = snapshot(db_url)
    r = cli("db", "upgrade", "--db", db_url)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit)
    assert r.stderr.strip().splitlines() == [
        f"error: database {db_url} is at schema revision 9999, newer than this autotune knows ({head_revision()}); "
        "upgrade autotune"]
    assert snapshot(db_url) == before
    with pytest.raises(UsageError, match="newer than this autotune"):
        open_database(db_url)


def test_db_upgrade_of_a_missing_file_creates_nothing_and_says_so(tmp_path):
    missing = tmp_path / "typo.db"
    r = cli("db", "upgrade", "--db", f"sqlite:///{missing}")
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith(f"error: no database file '{missing}'")
    assert not missing.exists()
    r = cli("db", "upgrade", "--db", f"sqlite:///{tmp_path / 'no' / 'folder.db'}")
    assert r.exit_code == 2 and "no database file" in r.stderr


def test_db_upgrade_of_an_unreachable_server_is_one_line():
    pytest.importorskip("psycopg")
    r = cli("db", "upgrade", "--db", "postgresql+psycopg://nobody@127.0.0.1:1/none")
    assert r.exit_code == 2, r.output
    assert isinstance(r.exception, SystemExit)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: cannot upgrade database postgresql+psycopg://nobody@127.0.0.1:1/none: connection failed")


def test_db_upgrade_of_a_file_that_is_not_a_database_is_one_line(tmp_path):
    other = tmp_path / "notes.db"
    other.write_text("not a database\n")
    r = cli("db", "upgrade", "--db", f"sqlite:///{other}")
    assert r.exit_code == 2, r.output
    assert r.stderr.strip() == f"error: cannot upgrade database sqlite:///{other}: file is not a database; nothing was changed"
    assert other.read_text() == "not a database\n"
