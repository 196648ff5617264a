"""The queries that need a few trials of a large log read a few: `best`, `trials --top` and the
`--device` filter of `trials` are answered from the (task, device, cost) index, never by reading every
trial (on SQLite, no full scan of the trials table in their plans), and give the answers a reading of
every trial gives (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from sqlalchemy import event

from autotune.db import open_database, queries
from autotune.testing.fakes import FakeRunner, small_knob_space
from autotune.types import Device, Task

DEVICES = [Device(f"gpu-{i}", "simulated", {"i": i}) for i in range(3)]


def _fill(db):
    """Two tasks measured on three devices, each with costs of its own (ties included); returns every OK
    trial as (task name, device name, cost, candidate key, trial order)."""
    space = small_knob_space()
    points = list(space.enumerate())
    expected, order = [], 0
    for t in range(2):
        task = Task("kernel", f"task-{t}", {"t": t})
        for d, device in enumerate(DEVICES):
            ms = FakeRunner(space, fail={points[t + d].key}, device=device).measure(task, points)
            for m in ms:
                if m.ok:  # a tie every three points; the order of storing breaks it
                    m.times = [round(m.cost * (1 + (t + 2 * d) / 10), 6)] * 3
                    m.cost = m.times[0]
            db.add_trials(task, device, ms)
            for m in ms:
                order += 1
                if m.ok:
                    expected.append((task.name, device.name, m.cost, m.candidate.key, order))
    return expected


@pytest.fixture
def log(db_url):
    db = open_database(db_url)
    yield db, _fill(db)
    db.close()


def _fastest(expected, k, keep=lambda row: True):
    groups = {}
    for row in sorted(filter(keep, expected), key=lambda r: (r[2], r[4])):
        groups.setdefault((row[0], row[1]), []).append(row)
    return {pair: [r[3] for r in rows[:k]] for pair, rows in groups.items()}


def test_best_and_top_give_what_reading_every_trial_gives(log):
    db, expected = log
    for k in (1, 3):
        got = queries.best(db, k=k)
        pairs = {}
        for row in got.itertuples():
            pairs.setdefault((row.task, row.device), []).append((row.rank, row.candidate_key))
        assert {p: [key for _, key in ranked] for p, ranked in pairs.items()} == _fastest(expected, k)
        assert all([r for r, _ in ranked] == list(range(1, len(ranked) + 1)) for ranked in pairs.values())
        one = queries.best(db, device="gpu-1", k=k)
        assert set(one["device"]) == {"gpu-1"} and len(one) == 2 * k
    everything = sorted(expected, key=lambda r: (r[2], r[4]))
    assert list(queries.trials(db, top=5)["candidate_key"]) == [r[3] for r in everything[:5]]
    on_one = [r for r in everything if r[1] == "gpu-2" and r[0] == "task-1"]
    assert list(queries.trials(db, top=4, device="gpu-2", task="task-1")["candidate_key"]) == [r[3] for r in on_one[:4]]
    assert queries.count_trials(db, device="gpu-0") == len(queries.trials(db, device="gpu-0", limit=10_000)) > 0
    assert set(queries.trials(db, device="gpu-0", limit=5)["device"]) == {"gpu-0"}
    from autotune.db.names import UnknownName

    for call in (lambda: queries.best(db, device="no-such-device"), lambda: queries.trials(db, top=3, task="no-such-task")):
        with pytest.raises(UnknownName):  # an unknown name is refused, naming the closest, as on the command line
            call()


def test_sqlite_answers_them_without_reading_every_trial(sqlite_url):
    import sqlite3

    db = open_database(sqlite_url)
    _fill(db)
    statements = []
    event.listen(db.engine, "before_cursor_execute",
                 lambda conn, cursor, sql, params, context, many: statements.append((sql, params)))
    calls = {
        "best": lambda: queries.best(db, k=2),
        "best --device": lambda: queries.best(db, device="gpu-1"),
        "trials --top": lambda: queries.trials(db, top=5),
        "trials --top --device": lambda: queries.trials(db, top=5, device="gpu-1"),
        "trials --device": lambda: queries.trials(db, device="gpu-1", limit=20),
        "trials --device, their count": lambda: queries.count_trials(db, device="gpu-1"),
    }
    raw = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    try:
        for name, call in calls.items():
            statements.clear()
            call()
            plans = [row[3] for sql, params in statements if not sql.startswith("PRAGMA")
                     for row in raw.execute("EXPLAIN QUERY PLAN " + sql, params)]
            full = [step for step in plans if step.startswith("SCAN trials")]
            assert plans and not full, (name, plans)
    finally:
        raw.close()
        db.close()


def test_export_reads_the_log_a_page_at_a_time_and_writes_every_trial_once(log):
    """A log of millions of trials exports in bounded memory: the first line comes once the first page of
    trials is read, and every trial is written once, oldest first (SQLite and PostgreSQL)."""
    import json

    from autotune.db.logs import export_items

    db, _ = log
    total = db.count_trials()
    reads = []
    event.listen(db.engine, "before_cursor_execute",
                 lambda conn, cursor, sql, params, context, many: reads.append(sql) if "FROM trials" in sql else None)
    trial_lines = (line for line, is_trial in export_items(db, page=40) if is_trial)
    first = json.loads(next(trial_lines))
    assert len(reads) == 1 and "LIMIT" in reads[0]
    keys = [(d["task"]["name"], d["device"]["name"], d["candidate_key"]) for d in [first, *map(json.loads, trial_lines)]]
    assert len(keys) == len(set(keys)) == total > 3 * 40 and len(reads) <= total // 40 + 1
    assert sum(is_trial for _, is_trial in export_items(db, device="gpu-1", page=7)) == \
        queries.count_trials(db, device="gpu-1")
