import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from sqlalchemy import func, select

from autotune.algorithms.registry import make_algorithm
from autotune.campaign import Campaign
from autotune.db import open_database, queries
from autotune.db.models import CampaignTrialRow, TrialRow
from autotune.errors import UsageError
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import ReplaySpace
from autotune.testing.fakes import FakeRunner, small_knob_space

EXAMPLE = "example:pnpoly-rtx3090"


@pytest.fixture(scope="module")
def replay():
    space = ReplaySpace(EXAMPLE)
    return space, ReplayRunner(space.cache)


def _keys(db, campaign):
    camp = db.campaign(campaign)
    with db.session() as s:
        return s.scalars(select(TrialRow.candidate_key).where(TrialRow.campaign_id == camp.id).order_by(TrialRow.id)).all()


def test_campaign_runs_to_budget_and_tracks_the_best(db_url, replay):
    space, runner = replay
    db = open_database(db_url)
    res = Campaign("c", space, "random", runner, db, trials=50, batch=7, seed=1).run()
    assert res.trials == 50 and res.status == "finished"
    df = queries.trials(db, campaign="c")
    assert len(df) == 50 and df["candidate_key"].is_unique
    assert res.best.cost == pytest.approx(df["cost"].min())
    assert res.simulated_s == pytest.approx(df["simulated_s"].sum())
    conv = queries.convergence(db, "c")
    assert conv["best_so_far"].is_monotonic_decreasing and conv["best_so_far"].iloc[-1] == pytest.approx(res.best.cost)


def test_resume_continues_the_same_search(sqlite_url, replay, tmp_path):
    space, runner = replay
    db = open_database(sqlite_url)
    Campaign("r", space, "random", runner, db, trials=30, seed=5).run()
    res = Campaign("r", space, "random", runner, db, trials=70, seed=5).run()
    assert res.resumed and res.trials == 70
    ref = open_database(f"sqlite:///{tmp_path / 'ref.db'}")
    Campaign("r", space, "random", runner, ref, trials=70, seed=5).run()
    assert _keys(db, "r") == _keys(ref, "r")


def test_known_trials_are_reused_not_measured_again(sqlite_url, replay):
    space, runner = replay
    db = open_database(sqlite_url)
    Campaign("first", space, "random", runner, db, trials=40, seed=9).run()
    res = Campaign("second", space, "random", runner, db, trials=40, seed=9).run()  # same seed: same proposals
    assert res.evaluations - res.trials == res.reused == 40  # the first 40 came from the database
    assert db.count_trials() == 80
    conv = queries.convergence(db, "second", include_reused=True)
    assert conv["reused"].sum() == 40 and len(conv) == 80
    assert len(queries.convergence(db, "second")) == 40  # its own measurements


def test_finite_space_is_exhausted(sqlite_url):
    space = small_knob_space()
    db = open_database(sqlite_url)
    res = Campaign("g", space, "grid", FakeRunner(space), db, batch=5).run()
    assert res.status == "exhausted" and res.trials == space.size() == 57
    again = Campaign("g", space, "grid", FakeRunner(space), db, batch=5).run()
    assert again.trials == 57 and again.status == "exhausted"


def test_bad_budgets_and_mismatched_resume_are_usage_errors(sqlite_url, replay):
    space, runner = replay
    db = open_database(sqlite_url)
    for bad in ({"trials": 0}, {"trials": -3}, {"time_budget": 0.0}, {"batch": 0}):
        with pytest.raises(UsageError, match="positive"):
            Campaign("x", space, "random", runner, db, **bad)
    with pytest.raises(UsageError, match="unknown algorithm 'nope'; valid: .*grid.*random"):
        Campaign("x", space, "nope", runner, db, trials=3)
    other = small_knob_space()
    Campaign("y", other, "random", FakeRunner(other), db, trials=3).run()
    with pytest.raises(UsageError, match="already exists for another task"):
        Campaign("y", space, "random", runner, db, trials=3).run()
    with pytest.raises(UsageError, match="was run with algorithm 'random', not 'grid'"):
        Campaign("y", other, "grid", FakeRunner(other), db, trials=6).run()
    assert Campaign("y", other, "random", FakeRunner(other), db, trials=6).run().trials == 6  # the same one resumes
    for seed in (-1, 1.5, True):
        with pytest.raises(UsageError, match="seed must be a whole number >= 0"):
            Campaign("z", space, "random", runner, db, trials=3, seed=seed)
    assert [c for c in queries.campaigns(db)["campaign"]] == ["y"]


class SlowReplay(ReplayRunner):
    def measure(self, task, candidates):
        time.sleep(0.02)
        return super().measure(task, candidates)


def test_time_budget_stops_the_run(sqlite_url, replay):
    space, _ = replay
    res = Campaign("t", space, "random", SlowReplay(space.cache), open_database(sqlite_url), time_budget=2.0, batch=1).run()
    assert res.status == "time-budget" and 0 < res.trials <= 100 and res.wall_s >= 2.0


class SlowFake(FakeRunner):
    """A plain runner whose measurements take 0.3 s each, one after another."""

    def measure(self, task, candidates):
        out = []
        for c in candidates:
            time.sleep(0.3)
            out += super().measure(task, [c])
        return out


def test_time_budget_holds_within_one_measurement_not_one_batch(sqlite_url):
    """A batch of 8 slow measurements starts none past the budget; those made are all stored."""
    space = small_knob_space()
    db = open_database(sqlite_url)
    t0 = time.perf_counter()
    res = Campaign("tb", space, "random", SlowFake(space), db, time_budget=0.5, batch=8, seed=3).run()
    elapsed = time.perf_counter() - t0
    assert res.status == "time-budget" and 1 <= res.trials <= 3, res.trials  # not the whole batch of 8
    assert elapsed < 0.5 + 0.3 + 1.0  # the budget, one measurement, and slack for a loaded machine
    assert len(queries.trials(db, campaign="tb")) == res.trials
    assert db.pending_keys(db.campaign("tb").id) == {}  # the batch's unstarted candidates are given back
    again = Campaign("tb", space, "random", SlowFake(space), db, trials=res.trials + 2, batch=8, seed=3).run()
    assert again.trials == res.trials + 2  # resumes, measuring what was left unstarted as any other point


@pytest.mark.parametrize("algorithm", ["grid", "random"])
def test_candidates_a_time_budget_left_unstarted_are_asked_again_on_resume(sqlite_url, algorithm):
    """The algorithm was asked for the whole batch; what the budget left unstarted is not counted as asked
    in the stored state, so resuming to the space's size measures every point."""
    space = small_knob_space()
    db = open_database(sqlite_url)
    first = Campaign("tb", space, algorithm, SlowFake(space), db, time_budget=0.5, batch=8, seed=3).run()
    assert first.status == "time-budget" and first.trials < 8
    size = space.size()
    again = Campaign("tb", space, algorithm, FakeRunner(space), db, trials=size, batch=8, seed=3).run()
    assert again.status == "finished" and again.trials == size
    assert set(queries.trials(db, campaign="tb")["candidate_key"]) == {c.key for c in space.enumerate()}


def test_a_space_stored_whole_is_linked_at_once_not_searched_a_batch_at_a_time(sqlite_url):
    """After an import of the whole recording, a campaign has nothing to measure: it links every stored trial
    in one go (the search is never asked) and ends exhausted, its best the best of them."""
    from autotune.db.logs import import_kt

    db = open_database(sqlite_url)
    import_kt(db, EXAMPLE)
    space = ReplaySpace(EXAMPLE)
    algo = make_algorithm("random")
    asked = []
    ask = algo.ask
    algo.ask = lambda n: asked.append(n) or ask(n)
    res = Campaign("whole", space, algo, ReplayRunner(space.cache), db, trials=24, batch=8, seed=0).run()
    assert res.status == "exhausted" and res.trials == 0 and res.reused == space.size() and not asked
    stored = queries.trials(db, task=space.task.key, status="OK")
    assert res.best_including_reused.cost == stored["cost"].min()


def test_simulated_budget(sqlite_url, replay):
    space, runner = replay
    res = Campaign("s", space, "random", runner, open_database(sqlite_url), simulated_budget=10.0, batch=1).run()
    assert res.status == "simulated-budget" and 10.0 <= res.simulated_s < 12.0


def _race(url, barrier):
    space = ReplaySpace(EXAMPLE)
    db = open_database(url)
    barrier.wait()
    Campaign("race", space, "random", ReplayRunner(space.cache), db, trials=300, batch=4, seed=2).run()


# four workers race on PostgreSQL by default; two (a milder race) and SQLite with -m slow (on SQLite, three workers
# of one campaign, proposing alike, share its claims by default in tests/scale/test_workers_kill.py)
@pytest.mark.parametrize("workers", [pytest.param(2, marks=pytest.mark.slow), 4])
@pytest.mark.parametrize("db_url", [pytest.param("sqlite", marks=pytest.mark.slow), "postgres"], indirect=True)
def test_workers_on_one_campaign_store_exactly_the_budget(db_url, workers):
    """Each worker claims its batch from the budget in the database before measuring (the same seed makes
    them propose the same candidates, the hardest case for duplicates)."""
    open_database(db_url).close()
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(workers)
    procs = [ctx.Process(target=_race, args=(db_url, barrier)) for _ in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0
    db = open_database(db_url)
    with db.session() as s:
        keys = s.scalars(select(TrialRow.candidate_key)).all()
        links = s.scalar(select(func.count(CampaignTrialRow.id)))
    assert len(keys) == len(set(keys)) == 300 and links >= 300


KILL_SCRIPT = """
import sys, time
from autotune.campaign import Campaign
from autotune.db import open_database
from autotune.algorithms.model_guided import make_search
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import ReplaySpace

class SlowReplay(ReplayRunner):
    def measure(self, task, cands):
        time.sleep(0.02)
        return super().measure(task, cands)

name, _, model = sys.argv[2].partition("+")
space = ReplaySpace("example:pnpoly-rtx3090")
Campaign("k", space, make_search(name, model or None), SlowReplay(space.cache), open_database(sys.argv[1]),
         trials=int(sys.argv[3]), batch=3, seed=11).run()
"""


def _search(spec):
    # imported here, not at the top: the spawned race workers import this module, and XGBoost (which
    # model_guided imports) would be half of their start
    from autotune.algorithms.model_guided import make_search

    name, _, model = spec.partition("+")
    return make_search(name, model or None)


# the default search, alone and guided by XGBoost, runs by default; the other algorithms with -m slow (each one's
# state round trip, what a resume restores, is checked by default in tests/algorithms/test_conformance.py)
@pytest.mark.parametrize("algorithm,trials", [
    pytest.param("random", 400, marks=pytest.mark.slow), pytest.param("grid", 400, marks=pytest.mark.slow),
    pytest.param("mcmc", 150, marks=pytest.mark.slow), ("evolutionary", 150),
    pytest.param("backtracking", 150, marks=pytest.mark.slow), pytest.param("optuna-tpe", 60, marks=pytest.mark.slow),
    pytest.param("bandit", 150, marks=pytest.mark.slow), ("evolutionary+xgb", 60),
])
def test_sigkill_then_resume_loses_nothing_and_measures_nothing_twice(tmp_path, replay, algorithm, trials):
    """Killed mid-campaign and resumed, a campaign keeps what it committed, measures nothing twice and
    ends with exactly the trials of an uninterrupted run (the algorithm's state is restored)."""
    space, runner = replay
    url = f"sqlite:///{tmp_path / 'k.db'}"
    db = open_database(url)
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, url, algorithm, str(trials)])
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if db.count_trials() >= trials // 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the campaign ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    committed = _keys(db, "k")
    assert trials // 3 <= len(committed) < trials
    Campaign("k", space, _search(algorithm), runner, db, trials=trials, batch=3, seed=11).run()
    after = _keys(db, "k")
    assert after[: len(committed)] == committed and len(after) == len(set(after)) == trials
    ref = open_database(f"sqlite:///{tmp_path / 'ref.db'}")
    Campaign("k", space, _search(algorithm), runner, ref, trials=trials, batch=3, seed=11).run()
    assert sorted(after) == sorted(_keys(ref, "k"))


def test_random_search_matches_the_order_statistics_formula(replay):
    """Mean evaluations until within 5% of the optimum = (N+1)/(K+1) for sampling without replacement."""
    space, runner = replay
    ms = runner.measure(space.task, list(space.enumerate()))
    costs = np.array([m.objective for m in ms])
    best = costs.min()
    n, k = len(costs), int((costs <= 1.05 * best).sum())
    good = {m.candidate.key for m, c in zip(ms, costs) if c <= 1.05 * best}
    hits = []
    for seed in range(300):
        algo = make_algorithm("random").bind(space, np.random.default_rng(seed), [])
        i = 0
        while True:
            batch = algo.ask(64)
            found = [j for j, c in enumerate(batch) if c.key in good]
            if found:
                hits.append(i + found[0] + 1)
                break
            i += len(batch)
    expected = (n + 1) / (k + 1)
    assert np.mean(hits) == pytest.approx(expected, rel=0.2)
