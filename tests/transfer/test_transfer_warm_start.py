"""WarmStart: conformance, source best configurations first, and the prior models' safety check."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.algorithms.random_search import RandomSearch
from autotune.testing.algorithms import AlgorithmConformance
from autotune.testing.fakes import FakeRunner, small_knob_space
from autotune.cost_models.prior import SourcePrior, TransferModel, agreement
from autotune.algorithms.warm_start import SourceData, WarmStart
from autotune.types import Device, Measurement, Status

SRC = Device("source-gpu", "cuda", {})


def source_data(space, invert: bool = False, fraction: float = 1.0) -> SourceData:
    """The FakeRunner's bowl measured on every point (or the inverted bowl: a misleading source)."""
    pts = list(space.enumerate())[: max(1, int(len(list(space.enumerate())) * fraction))]
    ms = FakeRunner(space).measure(space.task, pts)
    if invert:
        ms = [Measurement(m.candidate, Status.OK, cost=1.0 / m.cost) for m in ms]
    return SourceData(SRC, ms)


class TestWarmStartConformance(AlgorithmConformance):
    def make_algorithm(self):
        return WarmStart(RandomSearch(), [source_data(small_knob_space())], top_k=3, init=2, retrain_every=4)


class TestWarmStartFeatureModeConformance(AlgorithmConformance):
    def make_algorithm(self):
        return WarmStart(RandomSearch(), [source_data(small_knob_space())], top_k=3, init=2, mode="feature")


def test_source_best_configs_come_first_and_find_the_optimum():
    space = small_knob_space()
    src = source_data(space)
    algo = WarmStart(RandomSearch(), [src], top_k=4)
    algo.bind(space, np.random.default_rng(0))
    first = algo.ask(6)
    assert [c.key for c in first[:4]] == [m.candidate.key for m in src.ranked()[:4]]
    best = min(FakeRunner(space).measure(space.task, list(space.enumerate())), key=lambda m: m.cost)
    assert first[0].key == best.candidate.key


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


@pytest.mark.parametrize("mode", ["margin", "feature"])
def test_prior_models_drop_a_misleading_source_and_keep_a_good_one(mode):
    space = small_knob_space()
    pts = list(space.enumerate())
    X = space.features(pts)
    runner = FakeRunner(space)
    y = np.array([m.cost for m in runner.measure(space.task, pts)])
    rng = np.random.default_rng(1)
    idx = rng.choice(len(pts), 12, replace=False)
    good = SourcePrior([(X, y)])
    bad = SourcePrior([(X, 1.0 / y)])
    assert agreement(good(X[idx]), y[idx]) > 0.9 and agreement(bad(X[idx]), y[idx]) < -0.9
    m_good = TransferModel(good, check_after=8, mode=mode, min_rho=0.2).fit(X[idx], y[idx])
    m_bad = TransferModel(bad, check_after=8, mode=mode, min_rho=0.2).fit(X[idx], y[idx])
    assert m_good.active and not m_bad.active
    # the kept prior ranks the true optimum near the top; the dropped one falls back to target-only XGBoost
    order = np.argsort(-m_good.predict(X))
    assert int(np.argmin(y)) in order[:5].tolist()
    assert m_bad.predict(X).shape == (len(pts),)
    # before check_after target results the prior is trusted as it is
    few = TransferModel(bad, check_after=8, mode=mode).fit(X[idx[:3]], y[idx[:3]])
    assert few.active


def test_prior_uses_exact_source_scores_and_a_model_elsewhere():
    space = small_knob_space()
    pts = list(space.enumerate())
    X = space.features(pts)
    y = np.array([m.cost for m in FakeRunner(space).measure(space.task, pts)])
    half = SourcePrior([(X[::2], y[::2])])
    s = half(X)
    assert s[0] == pytest.approx(-np.log(y[0] / y[::2].min()))
    assert agreement(s[1::2], y[1::2]) > 0.5  # unmeasured points: predicted by the source's model


class TestWarmStartPropertiesConformance(AlgorithmConformance):
    def make_algorithm(self):
        return WarmStart(RandomSearch(), [source_data(small_knob_space())], top_k=3, init=2, mode="properties",
                         target_device=Device("NVIDIA GeForce RTX 3090", "cuda", {}))


def test_auto_sources_skip_other_vendors_and_named_sources_must_exist(tmp_path):
    from autotune.db import open_database

    from autotune.errors import UsageError
    from autotune.transfer.sources import choose_sources, warm_start_search

    space = small_knob_space()
    ms = FakeRunner(space).measure(space.task, list(space.enumerate()))
    db = open_database(f"sqlite:///{tmp_path / 'w.db'}")
    try:
        amd = Device("AMD Instinct MI100", "cuda", {"vendor": "AMD", "architecture": "CDNA"})
        titan = Device("NVIDIA TITAN RTX", "cuda", {})
        db.add_trials(space.task, amd, ms)
        target = Device("NVIDIA GeForce RTX 2080 Ti", "cuda", {})
        assert choose_sources(db, space.task, target, "auto") == []
        assert warm_start_search(db, space.task, target, "random", "auto") == (None, [])
        db.add_trials(space.task, titan, ms)
        assert [s.device.name for s in choose_sources(db, space.task, target, "auto")] == ["NVIDIA TITAN RTX"]
        named = choose_sources(db, space.task, target, "AMD Instinct MI100")
        assert [s.device.name for s in named] == ["AMD Instinct MI100"]
        with pytest.raises(UsageError, match="no successful measurement"):
            choose_sources(db, space.task, target, "NVIDIA GeForce RTX 3090")
    finally:
        db.close()


def test_pooled_model_drops_a_misleading_source():
    from autotune.cost_models.pooled import PooledModel

    space = small_knob_space()
    pts = list(space.enumerate())
    X = space.features(pts)
    y = np.array([m.cost for m in FakeRunner(space).measure(space.task, pts)])
    idx = np.random.default_rng(2).choice(len(pts), 12, replace=False)
    vec = np.ones(6)
    good = PooledModel([(X, y, vec)], vec * 2, check_after=8).fit(X[idx], y[idx])
    bad = PooledModel([(X, 1.0 / y, vec)], vec * 2, check_after=8).fit(X[idx], y[idx])
    assert good.active and good.rho > 0.5
    assert not bad.active and bad.rho < 0
    assert int(np.argmin(y)) in np.argsort(-good.predict(X))[:5].tolist()
