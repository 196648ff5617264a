"""WarmStart: conformance, source best configurations first, and the pooled model's safety check."""

from __future__ import annotations

import numpy as np
import pytest
from warm_start_fixtures import drive, good_source, misleading_source, race_space, source_data

from autotune.algorithms.random_search import RandomSearch
from autotune.algorithms.warm_start import WarmStart
from autotune.cost_models.pooled import PROPS, PooledModel, agreement, device_vector
from autotune.cost_models.xgb import XGBCostModel
from autotune.errors import UsageError
from autotune.search_spaces.knobs import KnobSpace
from autotune.testing.algorithms import AlgorithmConformance
from autotune.testing.fakes import FakeRunner, small_knob_space
from autotune.types import Device, Task


class TestWarmStartConformance(AlgorithmConformance):
    def make_algorithm(self):
        return WarmStart(RandomSearch(), [source_data(small_knob_space())], top_k=3, init=2, retrain_every=4)


def test_source_best_configs_come_first_and_find_the_optimum():
    space = small_knob_space()
    src = source_data(space)
    algo = WarmStart(RandomSearch(), [src], top_k=4)
    algo.bind(space, np.random.default_rng(0))
    first = algo.ask(6)
    assert [c.key for c in first[:4]] == [m.candidate.key for m in src.ranked()[:4]]
    best = min(FakeRunner(space).measure(space.task, list(space.enumerate())), key=lambda m: m.cost)
    assert first[0].key == best.candidate.key


def test_a_source_that_measured_choices_the_target_lacks_still_guides_it():
    wide = KnobSpace({"x": [1, 2, 4, 8, 16], "y": [1, 2, 4, 8], "mode": ["a", "b", "c", "d"]},
                     constraints=["x * y <= 64"], task=Task("kernel", "fake-quadratic", {"n": 60}))
    space = small_knob_space()  # no mode "d"
    src = source_data(wide)
    assert any(m.candidate.payload["mode"] == "d" for m in src.measurements)
    assert np.isnan(space.features([m.candidate for m in src.measurements if m.candidate.payload["mode"] == "d"])[:, 2]).all()
    algo = WarmStart(RandomSearch(), [src], top_k=4, init=4, retrain_every=4)
    algo.bind(space, np.random.default_rng(0))
    runner = FakeRunner(space)
    for _ in range(4):
        batch = algo.ask(8)
        assert batch and all(space.contains(c) for c in batch)
        algo.tell(runner.measure(space.task, batch))
    assert algo.cost_model.active and algo.cost_model.trained  # the pooled model trained on the wider source


def test_without_sources_it_is_an_ordinary_model_guided_search():
    space = small_knob_space()
    algo = WarmStart(RandomSearch(), [], top_k=4, init=4)
    algo.bind(space, np.random.default_rng(0))
    runner = FakeRunner(space)
    seen = []
    for _ in range(5):
        b = algo.ask(4)
        seen += [c.key for c in b]
        algo.tell(runner.measure(space.task, b))
    assert len(seen) == len(set(seen)) == 20


def test_agreement_ranks_a_good_source_high_and_a_misleading_one_low():
    space = small_knob_space()
    pts = list(space.enumerate())
    y = np.array([m.cost for m in FakeRunner(space).measure(space.task, pts)])
    assert agreement(-np.log(y), y) == pytest.approx(1.0)
    assert agreement(np.log(y), y) == pytest.approx(-1.0)
    failed = np.where(np.arange(len(y)) == int(np.argmax(y)), np.inf, y)  # a failure ranks slowest
    assert agreement(-np.log(y), failed) == pytest.approx(1.0)
    assert np.isnan(agreement(np.zeros(len(y)), y)) and np.isnan(agreement(y[:2], y[:2]))


def test_the_transfer_model_is_the_only_option_left():
    with pytest.raises(UsageError, match="no option"):
        WarmStart(RandomSearch(), [], mode="margin")
    titan = Device("NVIDIA TITAN RTX", "cuda", {})
    algo = WarmStart(RandomSearch(), [source_data(small_knob_space())], target_device=titan)
    algo.bind(small_knob_space(), np.random.default_rng(0))
    assert isinstance(algo.cost_model, PooledModel) and algo.cost_model.active and algo.cost_model.src_X
    alone = WarmStart(RandomSearch(), [])
    alone.bind(small_knob_space(), np.random.default_rng(0))
    assert isinstance(alone.cost_model, XGBCostModel) and list(alone.arms) == ["cold"]  # the cold search alone


class TestWarmStartPropertiesConformance(AlgorithmConformance):
    def make_algorithm(self):
        return WarmStart(RandomSearch(), [source_data(small_knob_space())], top_k=3, init=2,
                         target_device=Device("NVIDIA GeForce RTX 3090", "cuda", {}))


def test_auto_sources_skip_other_vendors_and_named_sources_must_exist(tmp_path):
    from autotune.db import open_database
    from autotune.transfer.sources import choose_sources, warm_start_search

    space = small_knob_space()
    ms = FakeRunner(space).measure(space.task, list(space.enumerate()))
    db = open_database(f"sqlite:///{tmp_path / 'w.db'}")
    try:
        amd = Device("AMD Instinct MI100", "cuda", {"vendor": "AMD", "architecture": "CDNA"})
        titan = Device("NVIDIA TITAN RTX", "cuda", {})
        db.add_trials(space.task, amd, ms)
        target = Device("NVIDIA GeForce RTX 2080 Ti", "cuda", {})
        # no same-vendor device: the most similar other-vendor one, at a low weight
        only_amd = choose_sources(db, space.task, target, "auto")
        assert [s.device.name for s in only_amd] == ["AMD Instinct MI100"] and only_amd[0].weight < 0.3
        other_kind = Device("Intel Xeon", "cpu", {})  # never a device of another kind
        assert warm_start_search(db, space.task, other_kind, "random", "auto") == (None, [])
        db.add_trials(space.task, titan, ms)
        assert [s.device.name for s in choose_sources(db, space.task, target, "auto")] == ["NVIDIA TITAN RTX"]
        named = choose_sources(db, space.task, target, "AMD Instinct MI100")
        assert [s.device.name for s in named] == ["AMD Instinct MI100"]
        with pytest.raises(UsageError, match="no successful measurement"):
            choose_sources(db, space.task, target, "NVIDIA GeForce RTX 3090")
    finally:
        db.close()


def bowl_rows(seed: int):
    """Feature rows and FakeRunner costs of every point of the small knob space, and 12 random row indices."""
    space = small_knob_space()
    pts = list(space.enumerate())
    y = np.array([m.cost for m in FakeRunner(space).measure(space.task, pts)])
    return space.features(pts), y, np.random.default_rng(seed).choice(len(pts), 12, replace=False)


def test_pooled_model_drops_a_misleading_source():
    X, y, idx = bowl_rows(2)
    vec = np.ones(len(PROPS))
    good = PooledModel([(X, y, vec)], vec * 2, check_after=8).fit(X[idx], y[idx])
    bad = PooledModel([(X, 1.0 / y, vec)], vec * 2, check_after=8).fit(X[idx], y[idx])
    assert good.active and good.rho > 0.5
    assert not bad.active and bad.rho < 0
    assert int(np.argmin(y)) in np.argsort(-good.predict(X))[:5].tolist()


@pytest.mark.parametrize("pairs, columns", [("log2", [0, 1, 2]), ("none", [])])
def test_both_arms_of_a_warm_start_model_the_space_alike(pairs, columns):
    """The pooled model, its target-only fallback and the cold arm's model all see the sums and differences
    of the space's log2 columns (pairs="log2"), or all the knobs alone (the default), so the race compares
    arms that model the space alike."""
    space = race_space()
    algo = WarmStart(RandomSearch(), [misleading_source(space)], top_k=4, pairs=pairs)
    drive(algo, space, batches=4)
    pooled = algo.arms["warm"].cost_model
    assert pooled.options["pair_columns"] == columns
    assert algo.arms["cold"].cost_model.options["pair_columns"] == columns
    assert not pooled.active  # the inverted source was left out: the fallback ranks
    assert pooled.fallback.options["pair_columns"] == columns
    assert pooled.fallback.booster.num_features() == 3 + 2 * len(columns)
    good = WarmStart(RandomSearch(), [source_data(space)], top_k=4, pairs=pairs)
    drive(good, space, batches=4)
    pooled = good.arms["warm"].cost_model
    assert pooled.active and pooled.booster.num_features() == 3 + len(PROPS) + 2 * len(columns)


def test_a_warm_start_models_the_knobs_alone_unless_asked():
    assert WarmStart(RandomSearch(), []).config["pairs"] == "none"


@pytest.mark.parametrize("stall", [None, 0, 8])
def test_both_arms_take_the_stall_setting_and_without_it_make_no_far_picks(stall):
    """A cold search's far picks once it stalls are off in a warm start's arms unless asked for (the race
    already moves the slots away from a stalled arm); asked for, both arms make them."""
    space = race_space()
    options = {} if stall is None else {"stall": stall}
    algo = WarmStart(RandomSearch(), [source_data(space)], top_k=4, **options)
    drive(algo, space, batches=2)
    want = 0 if stall is None else stall
    assert {a: arm.config["stall"] for a, arm in algo.arms.items()} == {"warm": want, "cold": want}


@pytest.mark.parametrize("large", [None, "both"])
def test_both_arms_take_the_large_space_setting(large):
    """Above score_all both arms search through the inner algorithm alone unless told otherwise (two
    sampled arms cost more per measurement than the engine's budget on a million points)."""
    space = race_space()
    options = {} if large is None else {"large": large}
    algo = WarmStart(RandomSearch(), [source_data(space)], top_k=4, **options)
    drive(algo, space, batches=1)
    want = "inner" if large is None else large
    assert {a: arm.config["large"] for a, arm in algo.arms.items()} == {"warm": want, "cold": want}


@pytest.mark.parametrize("pool", [None, 300])
def test_the_two_arms_share_one_search_s_model_evaluations(pool):
    """Above score_all each arm's inner search gets half a search's pool unless told otherwise, so a warm
    start evaluates the model as often per batch as a cold search."""
    from autotune.algorithms.model_guided import ModelGuided

    space = race_space()
    options = {} if pool is None else {"pool": pool}
    algo = WarmStart(RandomSearch(), [source_data(space)], top_k=4, **options)
    drive(algo, space, batches=1)
    want = ModelGuided.options["pool"].default // 2 if pool is None else pool
    assert {a: arm.config["pool"] for a, arm in algo.arms.items()} == {"warm": want, "cold": want}


def test_device_vector_numbers_the_vendor():
    amd, nvidia = Device("AMD Instinct MI250X", "cuda", {}), Device("NVIDIA A100-PCIE-40GB", "cuda", {})
    va, vn = device_vector(amd), device_vector(nvidia)
    assert len(va) == len(PROPS) and va[PROPS.index("vendor")] != vn[PROPS.index("vendor")]
    assert va[PROPS.index("sm_count")] == 110 and vn[PROPS.index("sm_count")] == 108
    assert np.isnan(device_vector(Device("Some Unknown Accelerator", "cuda", {}))).all()


def test_each_source_is_trusted_on_its_own_agreement_with_the_target():
    X, y, idx = bowl_rows(3)
    vec = np.ones(len(PROPS))
    model = PooledModel([(X, 1.3 * y, vec), (X, 1.0 / y, vec * 3)], vec * 2, check_after=8).fit(X[idx], y[idx])
    assert model.trusted == [True, False] and model.src_rho[0] > 0.9 > -0.9 > model.src_rho[1]
    assert model.active  # the good source still guides
    few = PooledModel([(X, 1.3 * y, vec), (X, 1.0 / y, vec * 3)], vec * 2, check_after=8).fit(X[idx[:5]], y[idx[:5]])
    assert few.trusted == [True, True]  # too few common configurations to judge


def test_the_source_rows_are_shared_out_so_two_sources_cost_a_fit_what_one_does():
    rng = np.random.default_rng(0)
    X = rng.random((5000, 3))
    y = 1.0 + X.sum(axis=1)
    fastest = set(np.argsort(y)[:500].tolist())
    vec = np.ones(len(PROPS))
    one = PooledModel([(X, y, vec)], vec * 2, max_source_rows=3000, keep_top=500)
    two = PooledModel([(X, y, vec), (X, 2 * y, vec * 3)], vec * 2, max_source_rows=3000, keep_top=500)
    assert [len(r) for r in one.src_X] == [3000] and [len(r) for r in two.src_X] == [1500, 1500]

    def rows_of(Xs):
        index = {r.tobytes(): i for i, r in enumerate(X)}
        return {index[r[:3].tobytes()] for r in Xs}

    assert fastest <= rows_of(one.src_X[0])  # one source keeps its 500 fastest...
    top250 = set(np.argsort(y)[:250].tolist())
    for Xs in two.src_X:  # ...each of two its 250 fastest, and random others beside them
        rows = rows_of(Xs)
        assert top250 <= rows and len(rows - fastest) > 1000


def _gap_to_others(space, spread, others) -> float:
    """Smallest L1 distance, in features scaled to [0, 1], from a point of ``spread`` to another of
    ``spread`` or to one of ``others``."""
    X = np.asarray(space.features(list(space.enumerate())), dtype=float)
    lo, span = X.min(axis=0), np.maximum(np.ptp(X, axis=0), 1e-12)
    A = (np.asarray(space.features(spread), dtype=float) - lo) / span
    B = (np.asarray(space.features(spread + others), dtype=float) - lo) / span
    d = np.abs(A[:, None, :] - B[None, :, :]).sum(axis=2)
    d[np.arange(len(spread)), np.arange(len(spread))] = np.inf
    return float(d.min())


def test_the_points_after_the_probes_are_spread_away_from_them_and_each_other_by_both_arms():
    space = small_knob_space()
    gaps: dict[str, list[float]] = {}
    owners: set[str] = set()
    for design in ("maximin", "random"):
        gaps[design] = []
        for seed in range(6):
            algo = WarmStart(RandomSearch(), [source_data(space)], top_k=4, init=8, design=design)
            algo.bind(space, np.random.default_rng(seed))
            first = algo.ask(12)
            probes, spread = first[:4], first[4:]
            owners |= {algo.owner[c.key] for c in spread}
            gaps[design].append(_gap_to_others(space, spread, probes))
    assert min(gaps["maximin"]) > max(gaps["random"])
    assert owners == {"warm", "cold"}  # both arms drew the points, each away from the other's


def test_only_an_arms_bets_move_its_credit_not_its_points_before_the_model():
    space = small_knob_space()
    runner = FakeRunner(space)
    algo = WarmStart(RandomSearch(), [source_data(space)], top_k=4, init=8)
    algo.bind(space, np.random.default_rng(0))
    first = algo.ask(12)  # the 4 probes, then 8 points before either model
    algo.tell(runner.measure(space.task, first))
    assert algo.misses["cold"] == algo.credit["cold"] == 0.0  # its design points are not its bets
    assert algo.credit["warm"] + algo.misses["warm"] == pytest.approx(4.0, abs=0.5)  # the probes are
    for _ in range(4):
        batch = algo.ask(8)
        algo.tell(runner.measure(space.task, batch))
    bets = sum(1 for arm in algo.arms.values() for k in arm.predicted)
    assert bets > 0 and algo.credit["warm"] + algo.misses["warm"] + algo.credit["cold"] + algo.misses["cold"] > 4.0


def test_the_arms_retrain_side_by_side_and_propose_what_they_would_one_after_the_other(monkeypatch):
    """Both arms' models are fitted at once when both are due; the proposals, batch by batch, are those of
    fitting each at its own ask."""
    from autotune.algorithms import retraining, warm_start

    space = race_space()
    good = good_source(space)

    def proposals() -> list[list[str]]:
        algo = WarmStart(RandomSearch(), [good], top_k=4)
        algo.bind(space, np.random.default_rng(3))
        runner, out = FakeRunner(space), []
        for _ in range(10):
            batch = algo.ask(8)
            out.append([c.key for c in batch])
            algo.tell(runner.measure(space.task, batch))
        return out

    together: list[int] = []
    real = retraining.retrain_together

    def counted(searches):
        together.append(sum(s.retrains_on_ask() for s in searches))
        real(searches)

    monkeypatch.setattr(warm_start, "retrain_together", counted)
    side_by_side = proposals()
    assert max(together) == 2  # both arms were due at once, and fitted together
    monkeypatch.setattr(warm_start, "retrain_together", lambda searches: None)
    assert proposals() == side_by_side


def test_the_arms_list_the_space_once_between_them():
    space = race_space()
    calls = []
    enumerate_points = space.enumerate
    space.enumerate = lambda: calls.append(1) or enumerate_points()
    good = good_source(race_space())  # another copy of the space: its listing is not counted
    algo = WarmStart(RandomSearch(), [good], top_k=4)
    drive(algo, space, batches=4)
    warm, cold = algo.arms["warm"], algo.arms["cold"]
    assert warm._all is not None and warm._all is cold._all and warm._all_X is cold._all_X
    assert len(calls) == 1
