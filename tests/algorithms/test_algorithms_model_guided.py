import json
import math

import numpy as np
import pytest

from autotune.algorithms.batch_choice import member_scores
from autotune.algorithms.model_guided import ModelGuided, make_guided
from autotune.algorithms.support import rank_scaled
from autotune.cost_models.xgb import XGBCostModel
from autotune.testing.algorithms import AlgorithmConformance
from autotune.testing.fakes import FakeRunner, small_knob_space
from autotune.types import Measurement, Status


class TestGuidedMCMC(AlgorithmConformance):
    def make_algorithm(self):
        return make_guided("mcmc", init=6, retrain_every=4, cost_model_options={"min_samples": 4, "rounds": 10})


def run(algo, space, runner, steps, seed=0, batch=4):
    algo.bind(space, np.random.default_rng(seed), [])
    results = []
    for _ in range(steps):
        b = algo.ask(batch)
        if not b:
            break
        r = runner.measure(space.task, b)
        algo.tell(r)
        results.extend(r)
    return results


@pytest.mark.parametrize("score_all,large", [(100_000, "inner"), (0, "inner"), (20, "both")])
def test_guided_search_finds_the_optimum_quickly(score_all, large):
    space = small_knob_space()
    runner = FakeRunner(space)
    algo = make_guided("evolutionary", init=8, retrain_every=4, score_all=score_all, large=large, pool=200,
                       epsilon=0.0, cost_model_options={"min_samples": 4, "rounds": 20})
    results = run(algo, space, runner, steps=6)
    optimum = min(runner.cost(c) for c in space.enumerate())
    assert min(m.objective for m in results) <= optimum * 1.000001
    assert len({m.candidate.key for m in results}) == len(results)


def test_on_retrain_gets_metrics_and_model_bytes():
    space = small_knob_space()
    calls = []
    algo = make_guided("mcmc", init=8, retrain_every=4, quality_every=1,
                       cost_model_options={"min_samples": 4, "rounds": 10})
    algo.on_retrain = lambda metrics, blob: calls.append((metrics, blob))
    run(algo, space, FakeRunner(space), steps=8)
    assert len(calls) >= 3
    metrics, blob = calls[-1]
    assert metrics["n_train"] >= 24 and metrics["spearman"] is not None and 0 <= metrics["top_k_recall"] <= 1
    assert metrics["holdout"].startswith("random")
    preq = [m for m, _ in calls if m.get("holdout") == "new results"]
    assert preq and all(m["n"] >= 3 for m in preq)
    assert np.isfinite(XGBCostModel.load(blob).predict(space.features([space.initial()]))).all()
    assert algo.last_metrics == metrics


def test_epsilon_share_is_random_and_carried():
    space = small_knob_space()
    algo = make_guided("mcmc", init=8, epsilon=0.25, cost_model_options={"min_samples": 4, "rounds": 5})
    run(algo, space, FakeRunner(space), steps=2)
    chosen = []
    for _ in range(2):
        before = set(algo.predicted)
        b = algo.ask(2)
        chosen.append(sum(c.key not in before and c.key in algo.predicted for c in b))
        algo.tell(FakeRunner(space).measure(space.task, b))
    assert sorted(chosen) == [1, 2]  # 0.25 * 2 = 0.5 random per batch: one in the two batches


def test_state_includes_inner_state_and_is_json():
    space = small_knob_space()
    algo = make_guided("mcmc", init=4, score_all=0, pool=32, cost_model_options={"min_samples": 4, "rounds": 5})
    run(algo, space, FakeRunner(space), steps=3)
    state = json.loads(json.dumps(algo.state_dict()))
    assert state["trained_on"] >= 4 and state["inner"]["temperature"] > 0
    assert algo.name == "mcmc+xgb"
    assert isinstance(algo, ModelGuided)


def test_options_are_split_between_wrapper_and_inner():
    algo = make_guided("mcmc", t0=0.5, epsilon=0.2)
    assert algo.config["epsilon"] == 0.2 and algo.inner.config["t0"] == 0.5
    assert not math.isnan(algo.config["init"])


class TestGuidedWithEnsemble(AlgorithmConformance):
    def make_algorithm(self):
        return make_guided("mcmc", init=6, retrain_every=4, cost_model_options={"min_samples": 4, "rounds": 5, "members": 2})


def test_batches_of_one_take_turns_over_the_members():
    """A batch smaller than the ensemble starts where the last one stopped, so every member gets its turn
    (with each batch starting at member 0, batches of one would only ever follow the first member)."""
    space = small_knob_space()
    runner = FakeRunner(space)
    algo = make_guided("evolutionary", init=6, retrain_every=100, epsilon=0.0, avoid_failures=1.0,
                       cost_model_options={"min_samples": 4, "rounds": 5, "members": 4})
    run(algo, space, runner, steps=2, batch=3)  # 6 initial points
    assert algo._ready()  # the model is trained on them, once
    unseen = [c for c in space.enumerate() if c.key not in algo.seen]
    members = algo.cost_model.predict_members(space.features(unseen))
    assert algo.slot == 0
    picks = []
    for j in range(4):
        (c,) = algo.ask(1)
        picks.append(c.key)
        # the candidate member j (mod 4) scores best among those not taken before
        left = [i for i, u in enumerate(unseen) if u.key not in picks[:-1]]
        best = max(left, key=lambda i: (members[j][i], -i))
        assert c.key == unseen[best].key
    assert algo.slot == 4


def test_with_several_evaluations_in_flight_the_model_retrains_beside_the_search(monkeypatch):
    """set_parallel(n > 1): a due retrain fits a copy in a thread; ask keeps scoring with the current
    model and the copy replaces it (and is reported to on_retrain) once it is done."""
    import threading

    space = small_knob_space()
    runner = FakeRunner(space)
    algo = make_guided("evolutionary", init=6, retrain_every=4, cost_model_options={"min_samples": 4, "rounds": 10})
    stored = []
    algo.on_retrain = lambda metrics, data: stored.append(metrics["n_train"])
    algo.bind(space, np.random.default_rng(0), [])
    algo.set_parallel(4)
    release = threading.Event()
    fit = XGBCostModel.fit

    def slow_fit(self, X, y, groups=None):
        if threading.current_thread() is not threading.main_thread():
            release.wait(30)  # the background fit waits until the test lets it finish
        return fit(self, X, y, groups)

    monkeypatch.setattr(XGBCostModel, "fit", slow_fit)
    algo.tell(runner.measure(space.task, algo.ask(6)))
    algo.ask(2)  # the first model is trained in place: there is none to score with yet
    assert stored == [6] and algo._job is None
    first = algo.cost_model
    algo.tell(runner.measure(space.task, algo.ask(4)))
    assert len(algo.ask(2)) == 2  # due: the retrain runs in the thread and ask answers meanwhile
    assert algo._job is not None and algo.cost_model is first and stored == [6]
    release.set()
    algo._job[0].result(30)
    algo.ask(1)
    assert algo.cost_model is not first and stored == [6, 10] and algo.trained_on == 10


def test_learnt_failures_are_avoided():
    """A 1,000-point space where every point with x >= 64 fails (40% of it): once the failure model
    has seen some, the random exploration of a guided search measures far fewer failures than with it off."""
    from autotune.search_spaces.knobs import KnobSpace
    from autotune.types import Task

    space = KnobSpace({k: [2**i for i in range(10)] for k in ("x", "y", "z")}, task=Task("kernel", "fails", {}))
    failing = {c.key for c in space.enumerate() if c.payload["x"] >= 64}
    runner = FakeRunner(space, fail=failing)

    def failures_after_init(avoid: float) -> int:
        algo = make_guided("random", "xgb", init=16, epsilon=0.5, avoid_failures=avoid)  # many random picks
        algo.bind(space, np.random.default_rng(0))
        n = 0
        for i in range(15):
            batch = algo.ask(8)
            if i >= 3:
                n += sum(c.key in failing for c in batch)
            algo.tell(runner.measure(space.task, batch))
        return n

    on, off = failures_after_init(0.5), failures_after_init(1.0)
    assert on <= 0.5 * off and off >= 5


def test_the_failure_model_learns_from_a_first_batch_of_eight():
    from autotune.cost_models.failures import FailureModel

    x = np.array([[32.0], [64.0], [128.0], [256.0], [512.0], [1024.0], [768.0], [384.0]])
    model = FailureModel().fit(x, x[:, 0] > 256)
    p = model.predict(np.array([[96.0], [160.0], [640.0], [896.0]]))
    assert (p[:2] < 0.5).all() and (p[2:] > 0.5).all()


def test_design_points_avoid_learnt_failures_while_the_ranking_model_waits():
    """Three of four points of a space fail (x above 8): while too few have run for the ranking model,
    the spread design points are drawn from what the failure model expects to run."""
    from autotune.search_spaces.knobs import KnobSpace
    from autotune.types import Task

    space = KnobSpace({"x": list(range(1, 33)), "y": list(range(1, 9)), "z": [0, 1]}, task=Task("kernel", "f", {}))
    failing = {c.key for c in space.enumerate() if c.payload["x"] > 8}
    runner = FakeRunner(space, fail=failing)
    later = {}
    for avoid in (0.9, 1.0):
        later[avoid] = 0
        for seed in range(3):
            algo = make_guided("random", "xgb", init=8, epsilon=0.0, spread_avoid=avoid,
                               cost_model_options={"min_successes": 1000})  # the ranking model never starts
            algo.bind(space, np.random.default_rng(seed))
            for i in range(4):
                batch = algo.ask(8)
                later[avoid] += sum(c.key in failing for c in batch) if i >= 1 else 0
                algo.tell(runner.measure(space.task, batch))
    assert later[0.9] <= 0.4 * later[1.0] and later[1.0] >= 30


def test_the_ranking_model_can_start_before_eight_successes():
    x = np.arange(8, dtype=float)[:, None]
    y = np.array([1.0, 2.0, 3.0, math.inf, math.inf, math.inf, math.inf, math.inf])
    assert not XGBCostModel().fit(x, y).trained  # 8 successful rows by default
    assert XGBCostModel(min_successes=3).fit(x, y).trained
    assert not XGBCostModel(min_successes=3).fit(x[:5], y[:5]).trained  # and 8 rows


def _min_gap(space, cands) -> float:
    """Smallest L1 distance between two of ``cands`` in per-feature rank scaled to [0, 1]."""
    X = np.asarray(space.features(list(space.enumerate())), dtype=float)
    lo, span = X.min(axis=0), np.maximum(np.ptp(X, axis=0), 1e-12)
    R = (np.asarray(space.features(cands), dtype=float) - lo) / span
    d = np.abs(R[:, None, :] - R[None, :, :]).sum(axis=2)
    return float(d[np.triu_indices(len(cands), 1)].min())


def test_maximin_design_spreads_the_points_before_the_model():
    space = small_knob_space()
    gaps = {}
    for design in ("maximin", "random"):
        gaps[design] = []
        for seed in range(8):
            algo = make_guided("evolutionary", init=8, design=design)
            algo.bind(space, np.random.default_rng(seed), [])
            first = algo.ask(8)
            assert first[0].key == space.initial().key  # the default point is still measured first
            assert len({c.key for c in first}) == 8 and all(space.contains(c) for c in first)
            gaps[design].append(_min_gap(space, first))
    assert min(gaps["maximin"]) > max(gaps["random"])


def test_maximin_design_falls_back_to_random_points_on_a_space_it_cannot_enumerate():
    space = small_knob_space()
    algo = make_guided("evolutionary", init=8, design="maximin", score_all=0)
    algo.bind(space, np.random.default_rng(0), [])
    first = algo.ask(8)
    assert len({c.key for c in first}) == 8 and all(space.contains(c) for c in first)


def test_the_model_sees_products_and_ratios_of_power_of_two_knobs():
    space = small_knob_space()  # x and y are powers of two, mode is a choice
    assert space.log2_columns == [0, 1]
    for pairs, columns in (("log2", [0, 1]), ("none", [])):
        algo = make_guided("evolutionary", init=8, retrain_every=4, pairs=pairs,
                           cost_model_options={"min_samples": 4, "rounds": 5})
        results = run(algo, space, FakeRunner(space), steps=3)
        assert algo.cost_model.options["pair_columns"] == columns
        assert algo.cost_model.booster.num_features() == 3 + (2 if columns else 0)  # x + y and x - y
        # the model takes the space's own features: the pairs are its own transform, saved with it
        stored = XGBCostModel.load(algo.cost_model.save())
        X = space.features([m.candidate for m in results])
        np.testing.assert_allclose(stored.predict(X), algo.cost_model.predict(X))


def test_the_design_points_and_failure_model_see_the_knobs_not_their_pairs():
    space = small_knob_space()
    firsts = []
    for pairs in ("log2", "none"):
        algo = make_guided("evolutionary", init=8, pairs=pairs)
        algo.bind(space, np.random.default_rng(3), [])
        firsts.append([c.key for c in algo.ask(8)])
        assert algo._features([space.initial()]).shape == (1, 3)
    assert firsts[0] == firsts[1]


def test_unknown_design_or_pairs_is_refused():
    with pytest.raises(ValueError, match="pairs must be one of log2, none"):
        make_guided("evolutionary", pairs="all")
    with pytest.raises(ValueError, match="design must be one of maximin, random"):
        make_guided("evolutionary", design="lhs")


class _WorseEveryBatch(FakeRunner):
    """FakeRunner whose costs grow with every call: after the first batch no result is a better one."""

    def cost(self, c):
        return super().cost(c) + self.calls


def test_a_stalled_search_gives_part_of_its_batch_to_promising_points_far_from_those_seen():
    from autotune.search_spaces.knobs import KnobSpace
    from autotune.types import Task

    space = KnobSpace({"x": list(range(1, 33)), "y": list(range(1, 33))}, task=Task("kernel", "f", {}))
    batches, algos = {}, {}
    for stall in (0, 8):
        algo = make_guided("evolutionary", init=8, retrain_every=4, epsilon=0.0, stall=0, stall_share=0.25,
                           stall_pool=16, cost_model_options={"min_samples": 4, "rounds": 5})
        run(algo, space, _WorseEveryBatch(space), steps=4, batch=8)  # 32 results, the best among the first 8
        algo.config["stall"] = stall  # the same history and model for both; only the last batch differs
        assert algo._stalled(8, True) == (2 if stall else 0)
        batches[stall], algos[stall] = algo.ask(8), algo
    plain, stalled = batches[0], batches[8]
    assert [c.key for c in stalled[:6]] == [c.key for c in plain[:6]]  # the model's own picks come first
    algo = algos[8]
    R = rank_scaled(algo._all_X)
    near = [algo._all_index[m.candidate.key] for m in algo.history] + [algo._all_index[c.key] for c in stalled[:6]]
    scores = member_scores(algo.cost_model, algo._all_X).mean(axis=0)
    pool = sorted(set(range(len(algo._all))) - set(near), key=lambda i: -scores[i])[:16]  # the model's best 16

    def gap(i):
        return np.abs(R[near] - R[i]).sum(axis=1).min()

    for c in stalled[6:]:  # each far pick: of those 16, the farthest from everything seen and picked before it
        i = algo._all_index[c.key]
        assert i in pool and gap(i) > 0 and gap(i) >= max(gap(j) for j in pool) - 1e-9
        assert gap(i) > min(gap(j) for j in pool)  # a real choice: the pool's points are not all as far
        pool.remove(i)
        near.append(i)


def test_a_search_that_keeps_improving_is_not_stalled():
    space = small_knob_space()
    algo = make_guided("evolutionary", init=8, retrain_every=4, stall=8, cost_model_options={"min_samples": 4, "rounds": 5})
    algo.bind(space, np.random.default_rng(0), [])
    cands = list(space.enumerate())[:20]
    algo.tell([Measurement(c, Status.OK, times=[20.0 - i]) for i, c in enumerate(cands)])  # each better than before
    assert algo._stalled(8, True) == 0 and algo._stalled(8, False) == 0
    algo.tell([Measurement(c, Status.OK, times=[50.0]) for c in list(space.enumerate())[20:28]])
    assert algo._stalled(8, True) == 2 and algo._stalled(8, False) == 0  # enumerated spaces only


def test_batches_of_one_make_their_share_of_far_picks():
    space = small_knob_space()
    algo = make_guided("evolutionary", init=8, retrain_every=4, stall=8, stall_share=0.25,
                       cost_model_options={"min_samples": 4, "rounds": 5})
    algo.bind(space, np.random.default_rng(0), [])
    cands = list(space.enumerate())
    algo.tell([Measurement(c, Status.OK, times=[1.0 + i]) for i, c in enumerate(cands[:12])])  # the first was best
    assert [algo._stalled(1, True) for _ in range(8)] == [0, 0, 0, 1, 0, 0, 0, 1]  # one slot in four
    assert [algo._stalled(1, True) for _ in range(2)] == [0, 0] and algo.state_dict()["far_carry"] == 0.5  # resumed too
    assert algo._stalled(8, True) == 2 and algo._stalled(2, True) == 1  # a batch: its share, at least one
    algo.tell([Measurement(cands[12], Status.OK, times=[0.5])])  # a better result: not stalled, nothing carried
    assert algo._stalled(1, True) == 0 and algo.far_carry == 0.0


@pytest.mark.parametrize("batch, share", [(1, 0.25), (8, 1.0)])
def test_a_stalled_search_whose_model_slots_all_go_to_far_picks_still_proposes(batch, share):
    from autotune.search_spaces.knobs import KnobSpace
    from autotune.types import Task

    space = KnobSpace({"x": list(range(1, 17)), "y": list(range(1, 17))}, task=Task("kernel", "f", {}))
    algo = make_guided("evolutionary", init=8, retrain_every=4, epsilon=0.0, stall=8, stall_share=share,
                       cost_model_options={"min_samples": 4, "rounds": 5})
    run(algo, space, _WorseEveryBatch(space), steps=24 // batch, batch=batch)  # stalled after the first batch
    keys = set()
    for _ in range(8 // batch):
        got = algo.ask(batch)
        assert len(got) == batch and not keys & {c.key for c in got}
        keys |= {c.key for c in got}
        algo.tell(_WorseEveryBatch(space).measure(space.task, got))
