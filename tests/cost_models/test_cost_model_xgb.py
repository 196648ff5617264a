import json
import math

import numpy as np
import pytest

from autotune.cost_models.features import log_cost, throughput
from autotune.cost_models.metrics import quality, spearman, top_k_recall
from autotune.cost_models.registry import cost_model_class
from autotune.cost_models.xgb import XGBCostModel


def data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 4))
    y = 1e-3 * (1 + 5 * (X[:, 0] - 0.3) ** 2 + 2 * X[:, 1])
    y[rng.random(n) < 0.05] = math.inf
    return X, y


def test_registered():
    assert cost_model_class("xgb") is XGBCostModel


@pytest.mark.parametrize("objective", ["rank", "reg"])
def test_learns_a_ranking(objective):
    X, y = data()
    model = XGBCostModel(objective=objective).fit(X[:150], y[:150])
    q = model.quality(X[150:], y[150:])
    assert q["spearman"] > 0.8
    assert q["n"] == 50


def test_random_scores_below_min_samples():
    X, y = data(20)
    model = XGBCostModel(min_samples=50).fit(X, y)
    assert not model.trained
    s1, s2 = model.predict(X), model.predict(X)
    assert s1.shape == (20,) and not np.allclose(s1, s2)


@pytest.mark.parametrize("objective", ["rank", "reg"])
def test_save_load_round_trip_without_pickle(objective):
    X, y = data()
    model = XGBCostModel(objective=objective, rounds=10, members=1).fit(X, y)
    blob = model.save()
    assert isinstance(blob, bytes)
    doc = json.loads(blob)  # xgboost's own JSON document
    assert "learner" in doc
    loaded = XGBCostModel.load(blob)
    assert loaded.options["objective"] == objective and loaded.n_train == 200
    np.testing.assert_allclose(loaded.predict(X), model.predict(X), rtol=1e-6)
    untrained = XGBCostModel.load(XGBCostModel(min_samples=999).save())
    assert not untrained.trained


def test_groups_normalise_per_task():
    y = np.array([1.0, 2.0, math.inf, 10.0, 40.0])
    g = np.array([0, 0, 0, 1, 1])
    np.testing.assert_allclose(throughput(y, g), [1.0, 0.5, 0.0, 1.0, 0.25])
    lc = log_cost(y, g)
    assert lc[0] == 0 and lc[3] == 0 and lc[2] > lc[1]
    X = np.array([[0.0], [1.0], [2.0], [0.0], [1.0]])
    XGBCostModel(min_samples=2, rounds=3).fit(X, y, groups=g)  # ranking with query groups runs


def test_metrics():
    costs = np.array([1.0, 2.0, 3.0, 4.0, math.inf])
    assert spearman(costs, -costs.clip(max=9)) == pytest.approx(1.0)
    assert spearman(costs, costs.clip(max=9)) == pytest.approx(-1.0)
    assert top_k_recall(costs, np.array([5, 4, 0, 0, 0.0]), k=2) == 1.0
    assert top_k_recall(costs, np.array([0, 0, 5, 4, 3.0]), k=2) == 0.0
    q = quality(costs, np.array([5, 4, 3, 2, 1.0]), k=2)
    assert q == {"spearman": 1.0, "top_k_recall": 1.0, "k": 2, "n": 5}


def test_spearman_is_scipys_with_ties_failures_and_degenerate_inputs():
    stats = pytest.importorskip("scipy.stats", reason="scipy is not installed: nothing to compare with")
    rng = np.random.default_rng(0)
    for n in (3, 4, 7, 50, 400):
        for _ in range(20):
            costs = rng.choice([0.5, 1.0, 1.5, 2.0, math.inf], n) if n < 50 else rng.lognormal(0, 1, n)
            costs[rng.random(n) < 0.1] = math.inf  # failures tie for last
            scores = rng.integers(0, 4, n).astype(float) if rng.random() < 0.5 else rng.normal(size=n)
            finite = np.where(np.isfinite(costs), costs, 2 * np.max(costs[np.isfinite(costs)], initial=1.0) + 1)
            if np.ptp(finite) == 0 or np.ptp(scores) == 0:
                assert math.isnan(spearman(costs, scores))
            else:
                assert spearman(costs, scores) == pytest.approx(stats.spearmanr(-finite, scores).statistic, abs=1e-12)
    assert math.isnan(spearman(np.array([1.0, 2.0, 3.0]), np.array([1.0, math.nan, 2.0])))
    assert math.isnan(spearman(np.array([1.0, 2.0]), np.array([2.0, 1.0])))


def test_ensemble_members_differ_and_round_trip():
    X, y = data()
    model = XGBCostModel(members=3, rounds=10).fit(X, y)
    S = model.predict_members(X)
    assert S.shape == (3, 200) and not np.allclose(S[0], S[1])
    np.testing.assert_allclose(model.predict(X), S.mean(axis=0))
    loaded = XGBCostModel.load(model.save())
    assert len(loaded.boosters) == 3
    np.testing.assert_allclose(loaded.predict_members(X), S, rtol=1e-6)


def test_pair_columns_let_the_model_split_on_a_product_of_two_knobs():
    """A cost that depends only on x * y (a block's threads) is learnt from the sum of the two log2 columns, even
    by stumps, which cannot learn it from either column alone."""
    rng = np.random.default_rng(0)
    X = rng.integers(0, 6, size=(300, 3)).astype(float)  # log2 of three power-of-two knobs
    y = np.where(X[:, 0] + X[:, 1] == 5, 1.0, 2.0) + 0.01 * X[:, 2]
    test = rng.integers(0, 6, size=(300, 3)).astype(float)
    truth = np.where(test[:, 0] + test[:, 1] == 5, 1.0, 2.0)
    hits = {}
    for columns in ([], [0, 1]):
        model = XGBCostModel(objective="reg", members=1, rounds=40, max_depth=1, pair_columns=columns).fit(X, y)
        best = np.argsort(-model.predict(test))[:20]
        hits[len(columns)] = int((truth[best] == 1.0).sum())
    assert hits[2] == 20 and hits[0] < hits[2]


def test_a_large_matrix_is_scored_on_several_threads_with_the_same_scores(monkeypatch):
    import threading

    import autotune.cost_models.xgb as xgb_module

    monkeypatch.setattr(xgb_module, "_threads", lambda: 3)  # more threads than members for one, fewer for the rest
    X, y = data()
    model = XGBCostModel(seed=0).fit(X, y)
    big = np.random.default_rng(1).random((xgb_module.PARALLEL_ROWS + 5, 4))
    names: set[str] = set()
    real = xgb_module.xgb.Booster.inplace_predict

    def predict(self, *args, **kwargs):
        names.add(threading.current_thread().name)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(xgb_module.xgb.Booster, "inplace_predict", predict)
    reconfigured = []
    monkeypatch.setattr(xgb_module.xgb.Booster, "set_param", lambda self, *a, **k: reconfigured.append(a))
    threaded = model.predict_members(big)
    first = model.predict_members(big, slice(0, 1))  # one booster: its rows in slices
    assert len(names) > 1 and all(n.startswith("xgb-predict") for n in names)  # it did run on the pool's threads
    names.clear()
    small = model.predict_members(big[:64])
    assert names == {threading.current_thread().name}  # a small batch is scored where it is asked
    assert reconfigured == []  # no booster is set to another thread count
    monkeypatch.setattr(xgb_module, "PARALLEL_ROWS", 10**9)
    one_call = model.predict_members(big)
    assert np.array_equal(threaded, one_call) and np.array_equal(first, one_call[:1])
    assert np.array_equal(small, threaded[:, :64])
    pair = XGBCostModel(seed=0, members=2).fit(X, y)  # fewer members than threads: each in slices of its rows
    one_call = pair.predict_members(big)
    monkeypatch.setattr(xgb_module, "PARALLEL_ROWS", 10_000)
    monkeypatch.setattr(xgb_module, "_threads", lambda: 4)
    assert np.array_equal(pair.predict_members(big), one_call)
    assert model.predict_members(big, slice(1, 1)).shape == (0, len(big))  # no member asked: no rows


def test_the_members_train_side_by_side_into_the_boosters_of_a_loop(monkeypatch):
    """Members trained on several threads at once are the boosters trained one after the other, in order."""
    import threading

    import xgboost as xgb

    import autotune.cost_models.xgb as xgb_module

    X, y = data()
    names: set[str] = set()
    real_train = xgb_module.xgb.train

    def train(*args, **kwargs):
        names.add(threading.current_thread().name)
        return real_train(*args, **kwargs)

    monkeypatch.setattr(xgb_module, "_threads", lambda: 3)
    monkeypatch.setattr(xgb_module.xgb, "train", train)
    model = XGBCostModel(members=5, rounds=15).fit(X, y)
    assert len(names) > 1 and all(n.startswith("xgb-fit") for n in names)  # it did run on the pool's threads
    monkeypatch.setattr(xgb_module.xgb, "train", real_train)
    monkeypatch.setattr(xgb_module, "_threads", lambda: 1)
    loop = XGBCostModel(members=5, rounds=15).fit(X, y)
    assert [bytes(b.save_raw("json")) for b in model.boosters] == [bytes(b.save_raw("json")) for b in loop.boosters]
    d = xgb.DMatrix(X.astype(np.float32))
    assert not np.array_equal(model.boosters[0].predict(d), model.boosters[1].predict(d))


def test_an_ensemble_is_saved_as_one_json_document_of_its_members():
    X, y = data()
    model = XGBCostModel(members=3, rounds=5).fit(X, y)
    doc = json.loads(model.save())
    assert [json.loads(bytes(b.save_raw("json"))) for b in model.boosters] == doc["autotune_xgb_ensemble"]
