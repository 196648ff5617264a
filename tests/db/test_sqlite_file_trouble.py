"""An SQLite database file in trouble while autotune uses it: another process holding the write lock past
the busy timeout, the file deleted or replaced under a running campaign, a read-only file or folder, and
`db upgrade` on a database already current. Nothing measured is dropped without a word, and each problem
is one line."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autotune.campaign import Campaign
from autotune.cli.main import app
from autotune.db import engine, open_database, queries
from autotune.errors import DatabaseError, UsageError
from autotune.testing.caches import turing_time, write_cache
from autotune.testing.fakes import FakeRunnerTroubledOnSecondBatch, small_knob_space

HOLD_LOCK = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN IMMEDIATE")
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
c.execute("COMMIT")
"""


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_a_batch_is_stored_once_another_process_lets_go_of_a_write_lock_held_past_the_busy_timeout(
        tmp_path, monkeypatch, capsys):
    """A sqlite3 shell or a long import holds the write lock longer than the busy timeout while a measured
    batch waits to be stored: the campaign says so once and stores it when the lock is released, rather than
    failing and dropping what it measured."""
    monkeypatch.setattr(engine, "BUSY_TIMEOUT_S", 0.3)
    url = f"sqlite:///{tmp_path / 'locked.db'}"
    db = open_database(url)
    holders = []

    def hold_the_lock():
        holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(tmp_path / "locked.db"), "2"],
                                  stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "holding"
        holders.append(holder)

    space = small_knob_space()
    try:
        result = Campaign("c", space, "random", FakeRunnerTroubledOnSecondBatch(space, hold_the_lock), db, trials=12,
                          batch=4, progress=False).run()
        assert holders and holders[0].wait(timeout=30) == 0
        assert result.status == "finished" and result.trials == 12
        assert queries.count_trials(db, campaign="c") == 12
    finally:
        db.close()
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if "is locked" in line]
    assert len(notes) == 1 and "waiting for it to end" in notes[0] and "heartbeat failed" not in err, err


def test_a_write_refused_on_a_lock_held_past_the_busy_timeout_is_one_line_naming_the_cause(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "locked.db"
    db = open_database(f"sqlite:///{path}")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path), "3"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(DatabaseError, match=r"is locked: another process has kept a write transaction open"):
            db.task_id(small_knob_space().task)
    finally:
        holder.wait(timeout=30)
        db.close()


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_campaign_whose_database_file_is_deleted_or_replaced_stops_saying_so(tmp_path, how):
    """Deleted (or another file moved over it), the file's open connections would go on writing into the old
    file, and the campaign would finish reporting trials that vanished with it: it stops at the next batch."""
    path = tmp_path / "gone.db"
    db = open_database(f"sqlite:///{path}")
    other = tmp_path / "other.db"
    open_database(f"sqlite:///{other}").close()

    def trouble():
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        if how == "replaced":
            os.replace(other, path)

    space = small_knob_space()
    try:
        with pytest.raises(DatabaseError, match=f"database file {path} was {how} while this process used it"):
            Campaign("c", space, "random", FakeRunnerTroubledOnSecondBatch(space, trouble), db, trials=12, batch=4,
                     progress=False).run()
    finally:
        db.close()
    if how == "replaced":  # nothing of the campaign was written into the file that took its place
        db = open_database(f"sqlite:///{path}")
        try:
            assert db.count_trials() == 0 and queries.campaigns(db).empty
        finally:
            db.close()


@contextlib.contextmanager
def read_only(path: Path):
    """``path`` (a file or a folder) read-only for this process: its write bits cleared, or, for root, whom
    those do not stop, marked immutable (chattr +i); the test is skipped where neither holds."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(mode & ~0o222)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("running as root where chattr +i does not work: no way to make a file read-only to this process")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.fixture
def measured(tmp_path):
    """An SQLite database (in a folder of its own) holding a replayed campaign 'c' of 8 trials: its path."""
    from autotune.drivers.replay import tune_replay

    folder = tmp_path / "data"
    folder.mkdir()
    cache = write_cache(tmp_path / "t.json.gz", "NVIDIA TITAN RTX", turing_time)
    tune_replay(cache, algorithm="random", cost_model=None, trials=8, db=f"sqlite:///{folder / 'r.db'}", campaign="c")
    return folder / "r.db", cache


@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_read_only_database_answers_queries_and_tuning_refuses_in_one_line(measured, what):
    path, cache = measured
    url = f"sqlite:///{path}"
    before = path.read_bytes()
    with read_only(path if what == "file" else path.parent):
        for args in (["trials"], ["best"], ["campaigns"], ["trials", "--campaign", "c"]):
            r = cli(*args, "--db", url)
            assert r.exit_code == 0, (args, r.output)
        assert "c " in cli("campaigns", "--db", url).stdout
        r = cli("tune", "replay", "--cache", cache, "--trials", "4", "--cost-model", "none", "--db", url)
        assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
        reason = "the file is read-only" if what == "file" else "its folder is read-only"
        assert r.stderr.startswith(f"error: cannot write database {url}: {reason}"), r.stderr
        r = cli("campaigns", "rename", "c", "d", "--db", url)  # a query command that writes: one line too
        assert r.exit_code == 2 and r.stderr.startswith(f"error: database {url} is read-only here ({reason})"), r.stderr
        assert cli("db", "upgrade", "--db", url).exit_code == 0
    assert path.read_bytes() == before
    with pytest.raises(UsageError, match="cannot write database"):
        with read_only(path):
            open_database(url)


def test_db_upgrade_of_a_current_database_says_there_is_nothing_to_do_without_waiting_for_a_writer(
        tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "current.db"
    open_database(f"sqlite:///{path}").close()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path), "3"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        r = cli("db", "upgrade", "--db", f"sqlite:///{path}")
    finally:
        holder.wait(timeout=30)
    assert r.exit_code == 0, r.output
    from autotune.db.migrate import head_revision

    assert r.stdout == f"sqlite:///{path}: schema {head_revision()} is this autotune's; nothing to upgrade\n"


def test_a_copy_without_its_wal_file_is_refused_saying_what_the_copy_misses(tmp_path):
    """A database copied while in use, without its -wal file, holds only what was checkpointed: here nothing,
    not even the schema. The query says so and how to copy it whole."""
    path = tmp_path / "live.db"
    db = open_database(f"sqlite:///{path}")  # open: its commits stay in the -wal file
    try:
        db.task_id(small_knob_space().task)
        (tmp_path / "copy").mkdir()
        shutil.copy(path, tmp_path / "copy" / "live.db")
    finally:
        db.close()
    r = cli("campaigns", "--db", f"sqlite:///{tmp_path / 'copy' / 'live.db'}")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert "has no autotune schema; a copy of an SQLite file in use needs its -wal file too" in r.stderr


@pytest.fixture
def small_disk(tmp_path):
    """A folder on a 1 MiB tmpfs of its own (root, where mounting is allowed; skipped elsewhere)."""
    folder = tmp_path / "small"
    folder.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
                                           capture_output=True).returncode:
        pytest.skip("mounting a small tmpfs needs root in a system that allows it")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def test_a_full_disk_is_one_line_and_what_was_stored_before_stays(small_disk):
    from autotune.testing.fakes import FAKE_DEVICE
    from autotune.types import Candidate, Measurement, Status

    task = small_knob_space().task
    db = open_database(f"sqlite:///{small_disk / 'full.db'}")
    stored = 0
    try:
        with pytest.raises(DatabaseError) as refused:
            for i in range(0, 1000, 2):
                stored += db.add_trials(task, FAKE_DEVICE, [
                    Measurement(Candidate({"i": j}), Status.OK, times=[1e-3], meta={"log": "x" * 50_000})
                    for j in (i, i + 1)])
        message = str(refused.value)
        assert "\n" not in message and "the disk is full; the last transaction was not stored" in message, message
        assert 0 < stored == db.count_trials()
    finally:
        db.close()


FILL_PAST_LIMIT = """
import resource, sys
from autotune.db import open_database
from autotune.errors import DatabaseError
from autotune.testing.fakes import FAKE_DEVICE, small_knob_space
from autotune.types import Candidate, Measurement, Status

db = open_database(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))  # Python ignores SIGXFSZ
stored = 0
try:
    for i in range(0, 1000, 2):
        stored += db.add_trials(small_knob_space().task, FAKE_DEVICE, [
            Measurement(Candidate({"i": j}), Status.OK, times=[1e-3], meta={"log": "x" * 50_000}) for j in (i, i + 1)])
except DatabaseError as exc:
    print(stored, db.count_trials())
    print(exc)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a file size limit (RLIMIT_FSIZE) as Linux keeps it")
def test_a_write_past_the_file_size_limit_is_one_line_naming_it_and_what_was_stored_before_stays(tmp_path):
    """A write past ``ulimit -f`` (or a disk quota) is SQLite's "disk I/O error", which alone reads as a broken
    file: the line names the limit and says what became of the data."""
    url = f"sqlite:///{tmp_path / 'limited.db'}"
    r = subprocess.run([sys.executable, "-c", FILL_PAST_LIMIT, url, "400000"], capture_output=True, text=True,
                       timeout=60)
    counts, message = r.stdout.splitlines()
    stored, counted = map(int, counts.split())
    assert 0 < stored == counted, r.stdout
    assert message == (f"database {url}: the file could not be written (this process's file size limit, ulimit -f, "
                       "of 400000 bytes reached; or a disk quota reached, or the disk failing); the last transaction "
                       "was not stored (what was stored before stays)"), r


class _CtrlCWhileBound:
    """A value whose binding into a statement raises KeyboardInterrupt: Ctrl-C arriving inside the DBAPI call."""


def test_ctrl_c_inside_a_statement_leaves_no_write_lock_for_the_next_write_of_the_process(tmp_path):
    """Ctrl-C inside an SQLite statement (the first row written, so the write lock taken): SQLAlchemy closes the
    connection, and SQLite keeps it open, holding the lock, while the interrupted statement's cursor lives, which
    the interrupt's traceback keeps until the garbage collector runs. The interrupted campaign's next write, the
    one that stores what it measured, waited on its own process's lock for good (its lock waits retry)."""
    import sqlite3
    import threading

    from sqlalchemy import text

    def ctrl_c(_):
        raise KeyboardInterrupt

    sqlite3.register_adapter(_CtrlCWhileBound, ctrl_c)
    db = open_database(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        with db.session() as s:
            s.execute(text("CREATE TABLE rows (a INTEGER, b)"))
        with pytest.raises(KeyboardInterrupt) as interrupted:
            with db.session() as s:
                s.execute(text("INSERT INTO rows VALUES (:a, :b)"), [{"a": 1, "b": "x"}, {"a": 2, "b": _CtrlCWhileBound()}])
        assert interrupted.value.__traceback__ is not None  # kept, as an interrupted campaign keeps it while it stores
        wrote = threading.Event()

        def write():
            with db.session() as s:
                s.execute(text("INSERT INTO rows VALUES (3, 'y')"))
            wrote.set()

        threading.Thread(target=write, daemon=True).start()
        assert wrote.wait(20), "the next write waited on the lock the interrupted statement's connection held"
        with db.session() as s:
            assert s.execute(text("SELECT a FROM rows")).scalars().all() == [3]  # the interrupted batch: none of it
    finally:
        sqlite3.adapters.pop((_CtrlCWhileBound, sqlite3.PrepareProtocol), None)
        db.close()
