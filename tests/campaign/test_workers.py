"""Workers sharing a campaign: candidates reserved before they are measured, claims within the
budget, heartbeats, and a dead worker's reservations taken over by the others; streaming runners."""

import os
from datetime import timedelta

import pytest

from autotune.campaign import Campaign
from autotune.db import open_database
from autotune.db.models import utcnow
from autotune.db.workers import this_host, worker_id
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import ReplaySpace
from autotune.testing.fakes import FakeStreamingRunner

EXAMPLE = "example:pnpoly-rtx3090"


@pytest.fixture(scope="module")
def replay():
    space = ReplaySpace(EXAMPLE)
    return space, ReplayRunner(space.cache)


def _open(db, space, runner, name="c"):
    row, _ = db.open_campaign(name, space.task, runner.device, "random", {})
    return row.id, db.task_id(space.task), db.device_id(runner.device)


def _cands(space, n):
    return list(space.enumerate())[:n]


def test_a_reserved_candidate_is_refused_to_every_other_worker(db_url, replay):
    space, runner = replay
    db = open_database(db_url)
    cid, _, _ = _open(db, space, runner)
    a, b = _cands(space, 2)
    assert db.reserve(cid, "host:1", [a]) == [a]
    assert db.reserve(cid, "host:2", [a, b]) == [b]
    assert db.reserve(cid, "host:2", [a, b]) == []  # its own reservation is not granted twice
    assert db.pending_keys(cid) == {a.key: "host:1", b.key: "host:2"}
    assert db.reserve(cid, "host:3", _cands(space, 10), limit=3) == _cands(space, 10)[2:5]


def test_storing_a_trial_ends_its_reservation_and_the_claim_counts_what_is_in_flight(db_url, replay):
    space, runner = replay
    db = open_database(db_url)
    cid, tid, did = _open(db, space, runner)
    got = db.record_batch(tid, did, cid, [], worker="host:1", claim_next=(4, 10))
    assert got.granted == 4 and got.adopted == []
    cands = db.reserve(cid, "host:1", _cands(space, 4))
    done = runner.measure(space.task, cands[:1])
    got = db.record_batch(tid, did, cid, done, worker="host:1", claim_next=(1, 10), in_flight=3)
    assert got.total == 1 and got.granted == 1
    assert set(db.pending_keys(cid)) == {c.key for c in cands[1:]}
    # another worker may claim only what is left of the budget: 10 - 1 stored - (3 + 1) claimed
    assert db.record_batch(tid, did, cid, [], worker="host:2", claim_next=(8, 10)).granted == 5
    assert {w["worker"]: w["claimed"] for w in db.campaign_workers(cid)} == {"host:1": 4, "host:2": 5}


def test_a_silent_workers_claim_is_dropped_and_its_reservations_taken_over(db_url, replay, monkeypatch):
    space, runner = replay
    db = open_database(db_url)
    cid, tid, did = _open(db, space, runner)
    dead = "another-host:77"  # not on this host: only its heartbeat tells whether it lives
    db.record_batch(tid, did, cid, [], worker=dead, claim_next=(3, 5))
    cands = db.reserve(cid, dead, _cands(space, 3))
    assert db.record_batch(tid, did, cid, [], worker="host:2", claim_next=(5, 5)).granted == 2
    # still heard of: nothing is taken over
    db.heartbeat(cid, dead)
    assert db.record_batch(tid, did, cid, [], worker="host:2", claim_next=(5, 5)).adopted == []
    monkeypatch.setattr(type(db), "CLAIM_GRACE_S", 0.0)
    got = db.record_batch(tid, did, cid, [], worker="host:2", claim_next=(5, 5))
    assert got.granted == 5 and [c.key for c in got.adopted] == [c.key for c in cands]
    assert set(db.pending_keys(cid).values()) == {"host:2"}
    assert [w["worker"] for w in db.campaign_workers(cid)] == ["host:2"]


def test_a_dead_process_of_this_host_is_dead_at_once(db_url, replay):
    import subprocess
    import sys

    space, runner = replay
    db = open_database(db_url)
    cid, tid, did = _open(db, space, runner)
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    gone = f"{this_host()}:{p.pid}"
    db.record_batch(tid, did, cid, [], worker=gone, claim_next=(2, 4))
    db.reserve(cid, gone, _cands(space, 2))
    got = db.record_batch(tid, did, cid, [], worker="host:2", claim_next=(4, 4))
    assert got.granted == 4 and len(got.adopted) == 2


def test_a_worker_of_another_pid_namespace_of_this_host_name_is_judged_by_its_heartbeat(db_url, replay):
    """Containers sharing the host's name (host networking) have PIDs of their own: a worker of another one, whose
    PID names no process here, lives while it sends heartbeats; its claim and reservations stay its own."""
    import shutil
    import subprocess
    import sys

    from autotune.runners.processes import process_alive

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("making a PID namespace needs root and unshare(1)")
    pid = next(p for p in range(30000, 1000, -1) if not process_alive(p))  # no process of this PID here
    name = f"{sys.executable} -c 'from autotune.db.workers import worker_id; print(worker_id(run=True))'"
    out = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
                          f"echo {pid - 1} > /proc/sys/kernel/ns_last_pid && {name}"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        pytest.skip(f"no PID namespace here: {out.stderr.strip()[-200:]}")
    other = out.stdout.strip()
    assert other.split(":")[1] == str(pid)
    space, runner = replay
    db = open_database(db_url)
    cid, tid, did = _open(db, space, runner)
    db.record_batch(tid, did, cid, [], worker=other, claim_next=(2, 4))
    db.reserve(cid, other, _cands(space, 2))
    got = db.record_batch(tid, did, cid, [], worker=worker_id(run=True), claim_next=(4, 4))
    assert got.granted == 2 and got.adopted == []
    assert set(db.pending_keys(cid).values()) == {other}


def test_a_campaign_measures_the_reservations_of_a_dead_worker(sqlite_url, replay):
    space, runner = replay
    db = open_database(sqlite_url)
    cid, _, _ = _open(db, space, runner, "shared")
    orphans = db.reserve(cid, "vanished:1", _cands(space, 5))  # no claim row, no heartbeat: not alive
    result = Campaign("shared", space, "random", runner, db, trials=20, batch=4, seed=1).run()
    assert result.trials == 20 and db.pending_keys(cid) == {}
    hist = [m.candidate.key for m, _ in db.campaign_history(cid)]
    assert hist[:4] == [c.key for c in orphans[:4]] and orphans[4].key in hist


def test_heartbeat_refreshes_the_claim(sqlite_url, replay):
    space, runner = replay
    db = open_database(sqlite_url)
    cid, _, _ = _open(db, space, runner)
    db.heartbeat(cid, "host:1")
    first = db.campaign_workers(cid)[0]
    assert first["claimed"] == 0 and first["alive"]
    with db.session() as s:
        from sqlalchemy import update

        from autotune.db.models import CampaignClaimRow
        s.execute(update(CampaignClaimRow).values(heartbeat=utcnow() - timedelta(hours=1)))
    assert not db.campaign_workers(cid)[0]["alive"]
    db.heartbeat(cid, "host:1")
    assert db.campaign_workers(cid)[0]["alive"]


def test_a_streaming_runner_is_never_held_up_by_one_slow_candidate(sqlite_url, replay):
    """Four slots: while the first candidate takes 1 s, the other slots keep measuring."""
    space, runner = replay
    slow = {"key": None}

    def delay(c):
        if slow["key"] is None:
            slow["key"] = c.key
        return 1.0 if c.key == slow["key"] else 0.01

    streaming = FakeStreamingRunner(runner, slots=4, delay=delay)
    db = open_database(sqlite_url)
    result = Campaign("s", space, "random", streaming, db, trials=40, seed=3).run()
    streaming.close()
    assert result.trials == 40 and result.status == "finished"
    done_at = {k: t for e, k, t in streaming.log if e == "done"}
    submitted = [k for e, k, _ in streaming.log if e == "submit"]
    assert len(submitted) == len(set(submitted)) == 40
    finished_before_slow = [k for k, t in done_at.items() if t < done_at[slow["key"]]]
    assert len(finished_before_slow) >= 20, "the other slots waited for the slow candidate"


def test_a_streaming_runner_keeps_the_trial_budget_exact_with_two_workers(sqlite_url, replay):
    import threading

    space, _ = replay
    results = []

    def work(seed):
        streaming = FakeStreamingRunner(ReplayRunner(space.cache), slots=3, delay=lambda c: 0.005)
        results.append(Campaign("two", space, "random", streaming, open_database(sqlite_url), trials=60,
                                seed=seed).run())
        streaming.close()

    threads = [threading.Thread(target=work, args=(s,)) for s in (1, 1)]  # same seed: same proposals
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    db = open_database(sqlite_url)
    keys = [m.candidate.key for m, reused in db.campaign_history(db.campaign("two").id) if not reused]
    assert len(keys) == len(set(keys)) == 60


def test_results_other_workers_store_are_told_to_the_algorithm(sqlite_url, replay, monkeypatch):
    """The cost model of each worker learns from every worker's rows, not only its own."""
    from autotune.algorithms.random_search import RandomSearch

    space, runner = replay
    db = open_database(sqlite_url)
    cid, tid, did = _open(db, space, runner, "shared")
    others = runner.measure(space.task, _cands(space, 30)[20:30])

    class OtherWorkerMeanwhile(ReplayRunner):
        calls = 0

        def measure(self, task, cands):
            if OtherWorkerMeanwhile.calls == 1:  # another worker stores its results while this one measures
                db.record_batch(tid, did, cid, others, worker="elsewhere:1")
            OtherWorkerMeanwhile.calls += 1
            return super().measure(task, cands)

    class Recording(RandomSearch):
        name = "random"  # the workers' algorithm, which records what it is told

        def tell(self, results):
            self.told = getattr(self, "told", []) + [m.candidate.key for m in results]
            super().tell(results)

    monkeypatch.setattr(Campaign, "SYNC_S", 0.0)
    algo = Recording()
    Campaign("shared", space, algo, OtherWorkerMeanwhile(space.cache), db, trials=40, batch=4, seed=5).run()
    assert {m.candidate.key for m in others} <= set(algo.told)
    assert db.others_since(cid, 0, "elsewhere:1")[0] != [] and len(db.others_since(cid, 0, "nobody")[0]) == 40


def test_a_candidate_stored_since_it_was_looked_up_is_not_reserved(db_url, replay):
    """Worker B looked a candidate up before worker A stored it: A's reservation is gone, and B must
    not get a new one (it would measure the candidate a second time)."""
    space, runner = replay
    db = open_database(db_url)
    cid, tid, did = _open(db, space, runner)
    a, b = _cands(space, 2)
    assert db.reserve(cid, "host:1", [a]) == [a]
    db.record_batch(tid, did, cid, runner.measure(space.task, [a]), worker="host:1")
    assert db.reserve(cid, "host:2", [a, b]) == [b] and db.pending_keys(cid) == {b.key: "host:2"}


def test_two_campaigns_of_one_task_and_device_never_measure_a_point_twice(db_url, replay):
    """Two campaigns (not two workers of one) over the same task and device, proposing the same points
    (the same seed): a point the other campaign is measuring is looked up once stored, not measured again
    and lost to the other's stored row; each stays within its budget, and every measurement is stored."""
    import threading

    space, _ = replay
    results = {}

    errors = {}

    def work(name):
        try:
            results[name] = Campaign(name, space, "random", ReplayRunner(space.cache, delay_s=0.01),
                                     open_database(db_url), trials=40, batch=8, seed=3).run()
        except Exception:  # noqa: BLE001 - reported by the assertion below, with its traceback
            import traceback
            errors[name] = traceback.format_exc()

    threads = [threading.Thread(target=work, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and set(results) == {"a", "b"}, errors
    for r in results.values():  # each its own budget, exactly
        assert (r.status, r.trials, r.measured_here) == ("finished", 40, 40), {n: vars(r) for n, r in results.items()}
    db = open_database(db_url)
    own = [db.campaign_history(db.campaign(n).id) for n in ("a", "b")]
    measured = [m.candidate.key for h in own for m, reused in h if not reused]
    twice = sorted(k for k in set(measured) if measured.count(k) > 1)
    assert len(measured) == len(set(measured)) == 80, (len(measured), twice)  # no point measured by both


def test_a_point_another_campaign_stores_while_this_one_reserves_it_is_not_reserved(postgres_url, replay, monkeypatch):
    """Campaign b stores a point it reserved between the two reads of campaign a's reservation of it (the other
    campaigns' reservations, and the stored trials): a does not get the point, whichever read comes first.
    PostgreSQL only: on SQLite a's reservation holds the file's write lock from its first insert on, so nothing
    is stored meanwhile."""
    space, runner = replay
    db_a, db_b = open_database(postgres_url), open_database(postgres_url)
    a_id, tid, did = _open(db_a, space, runner, "a")
    b_id, _, _ = _open(db_b, space, runner, "b")
    point = _cands(space, 1)
    db_a.heartbeat(a_id, "host:a")
    db_b.heartbeat(b_id, "host:b")
    assert db_b.reserve(b_id, "host:b", point, elsewhere=[]) == point
    measured = runner.measure(space.task, point)
    reads = []

    def then_b_stores(name, read):
        def wrapped(*args, **kwargs):
            out = read(*args, **kwargs)
            reads.append(name)
            if len(reads) == 1:  # after a's first read, before its second
                db_b.record_batch(tid, did, b_id, measured, worker="host:b")
            return out
        return wrapped

    monkeypatch.setattr(db_a, "_rows_for_keys", then_b_stores("stored", db_a._rows_for_keys))
    monkeypatch.setattr(db_a, "_reserved_first_elsewhere", then_b_stores("reserved", db_a._reserved_first_elsewhere))
    later = []
    assert db_a.reserve(a_id, "host:a", point, elsewhere=later) == []
    assert sorted(reads) == ["reserved", "stored"] and db_a.pending_keys(a_id) == {}
    assert [c.key for c in later] == [point[0].key]  # b had it reserved when a looked: a looks its trial up later


def test_a_running_campaign_whose_workers_are_gone_shows_as_stopped(db_url, replay, monkeypatch):
    """SIGKILL leaves a campaign stored as running: with no worker heard of within the grace it is shown
    as stopped (rerunning it resumes it); a live worker's heartbeat shows it as running."""
    from autotune.db import queries

    space, runner = replay
    db = open_database(db_url)
    cid, _, _ = _open(db, space, runner, "killed")

    def status():
        return queries.campaigns(db).set_index("campaign").loc["killed", "status"]

    assert db.campaign("killed").status == "running" and status() == "stopped"
    db.heartbeat(cid, "host:1")
    assert status() == "running"
    monkeypatch.setattr(db, "CLAIM_GRACE_S", 0.0)  # the same heartbeat, long ago
    assert status() == "stopped"
    db.set_campaign_status(cid, "finished")
    assert status() == "finished"


def test_a_running_campaign_whose_worker_was_killed_on_this_host_shows_as_stopped_at_once(db_url, replay):
    """A run killed here (SIGKILL, a crash) is dead at once for the claims and `autotune workers`: the campaign
    list says so too, without waiting for its heartbeat to age; a live process of this host keeps it running."""
    import subprocess
    import sys

    from autotune.db import queries

    space, runner = replay
    db = open_database(db_url)
    cid, _, _ = _open(db, space, runner, "killed-here")
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    db.heartbeat(cid, f"{this_host()}:{p.pid}:tok")  # a fresh heartbeat of a process that is gone

    def status():
        return queries.campaigns(db).set_index("campaign").loc["killed-here", "status"]

    assert [w["alive"] for w in db.campaign_workers(cid)] == [False]
    assert status() == "stopped"
    db.heartbeat(cid, worker_id(run=True))  # this process: alive
    assert status() == "running"


def test_a_worker_out_of_its_own_time_leaves_the_campaign_running_for_the_others(db_url, replay):
    """The time budget is each run's: one that stops at it while other workers run on does not mark the campaign
    ended; the last run to end does."""
    space, runner = replay
    db = open_database(db_url)
    cid, _, _ = _open(db, space, runner, "t")
    db.heartbeat(cid, "elsewhere:1:x")  # a live worker of another host
    slow = ReplayRunner(space.cache, delay_s=0.05)
    result = Campaign("t", space, "random", slow, db, trials=1000, time_budget=0.3, batch=2, seed=1).run()
    assert result.status == "time-budget" and db.campaign("t").status == "running"
    db.release_claim(cid, "elsewhere:1:x")
    Campaign("t", space, "random", slow, db, trials=1000, time_budget=0.3, batch=2, seed=1).run()
    assert db.campaign("t").status == "time-budget"
