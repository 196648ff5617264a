"""PostgreSQL under a lock another session holds (a transaction left open in psql): a write waits for it as
long as the lock timeout, then says so in one line; a campaign's writes go on waiting, saying so once, and
store everything once the lock is released. (SQLite's counterpart: test_sqlite_file_trouble.py.)"""

from __future__ import annotations

import threading

import pytest

from autotune.campaign import Campaign
from autotune.db import engine, open_database, queries
from autotune.errors import DatabaseError
from autotune.testing.fakes import FakeRunner, FakeRunnerTroubledOnSecondBatch, small_knob_space


def _hold_row_lock(url: str, campaign: str, seconds: float) -> tuple[threading.Thread, threading.Event]:
    """A session that locks the campaign's row (SELECT ... FOR UPDATE) for ``seconds``, then commits; the
    event is set once the lock is held."""
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(url)
    held = threading.Event()

    def hold():
        with psycopg.connect(host=u.host, port=u.port or 5432, user=u.username, dbname=u.database) as conn:
            conn.execute("SELECT id FROM campaigns WHERE name = %s FOR UPDATE", (campaign,))
            held.set()
            threading.Event().wait(seconds)
            conn.commit()

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    assert held.wait(30)
    return t, held


def test_a_batch_is_stored_once_another_session_lets_go_of_a_lock_held_past_the_lock_timeout(
        postgres_url, monkeypatch, capsys):
    monkeypatch.setattr(engine, "BUSY_TIMEOUT_S", 0.3)  # read when the database is opened
    db = open_database(postgres_url)
    holders = []
    space = small_knob_space()
    try:
        result = Campaign("c", space, "random",
                          FakeRunnerTroubledOnSecondBatch(space, lambda: holders.append(_hold_row_lock(postgres_url, "c", 2.0)[0])),
                          db, trials=12, batch=4, progress=False).run()
        holders[0].join(30)
        assert result.status == "finished" and result.trials == 12
        assert queries.count_trials(db, campaign="c") == 12
    finally:
        db.close()
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if "is locked" in line]
    assert len(notes) == 1 and "another session has held a lock" in notes[0] and "waiting for it to end" in notes[0], err


def test_a_write_refused_on_a_lock_held_past_the_lock_timeout_is_one_line_naming_the_cause(postgres_url, monkeypatch):
    monkeypatch.setattr(engine, "BUSY_TIMEOUT_S", 0.2)
    db = open_database(postgres_url)
    space = small_knob_space()
    Campaign("c", space, "random", FakeRunner(space), db, trials=2, batch=2, progress=False).run()
    holder, _ = _hold_row_lock(postgres_url, "c", 3.0)
    try:
        with pytest.raises(DatabaseError, match=r"is locked: another session has held a lock this write needs"):
            db.rename_campaign("c", "d")
    finally:
        holder.join(30)
        db.close()
