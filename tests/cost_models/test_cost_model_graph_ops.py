"""The graph op-cost model: fit, predict (a score, higher = faster, and seconds), save, load, store."""

import numpy as np
import pytest

from autotune.cost_models.graph_ops import GraphOpCostModel
from autotune.cost_models.metrics import spearman
from autotune.cost_models.registry import COST_MODELS, cost_model_class


def ops_data(n, seed=0):
    """Rows shaped like op_features (op id, log2 FLOPs, log2 bytes, ...) and times that follow them."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.integers(0, 20, n), rng.uniform(5, 30, n), rng.uniform(5, 25, n), rng.uniform(3, 20, n),
                         rng.choice([1, 9], n), np.ones(n), np.ones(n)]).astype(float)
    seconds = 2e-6 + 2 ** X[:, 1] / 2e10 + 2 ** X[:, 2] / 5e9
    return X, seconds


def test_fits_and_predicts_held_out_op_times():
    X, y = ops_data(200)
    Xt, yt = ops_data(100, seed=1)
    model = GraphOpCostModel().fit(X, y)
    assert model.trained and model.n_train == 200
    assert spearman(yt, model.predict(Xt)) > 0.9  # a score: higher means faster
    ratio = model.predict_seconds(Xt) / yt
    assert np.median(np.abs(np.log(ratio))) < np.log(1.5)  # seconds within 1.5x for most ops
    np.testing.assert_allclose(model.predict(Xt), -np.log(model.predict_seconds(Xt)), rtol=1e-6)


def test_untrained_below_min_samples_and_failures_are_left_out():
    X, y = ops_data(30)
    y[:20] = np.inf  # failed ops have no time to learn from
    model = GraphOpCostModel().fit(X, y)
    assert not model.trained and model.n_train == 10
    assert (model.predict(X) == 0).all() and np.isnan(model.predict_seconds(X)).all()
    assert GraphOpCostModel(min_samples=5).fit(X, y).trained


def test_save_and_load_round_trip():
    X, y = ops_data(64)
    model = GraphOpCostModel(rounds=20, max_depth=3).fit(X, y)
    data = model.save()
    assert data[:1] == b"{" and b"autotune_options" in data  # xgboost's JSON, not pickle
    again = GraphOpCostModel.load(data)
    assert again.options == model.options and again.n_train == 64
    np.testing.assert_array_equal(again.predict(X), model.predict(X))
    blank = GraphOpCostModel.load(GraphOpCostModel(min_samples=99).save())
    assert not blank.trained and blank.options["min_samples"] == 99
    with pytest.raises(ValueError, match="no option"):
        GraphOpCostModel(depth=3)


def test_registered_and_stored_like_the_other_models(tmp_path):
    from autotune.db import open_database
    from autotune.types import Device, Task

    assert cost_model_class("graph-ops") is GraphOpCostModel and "graph-ops" in COST_MODELS
    X, y = ops_data(40)
    model = GraphOpCostModel().fit(X, y)
    db = open_database(f"sqlite:///{tmp_path / 'm.db'}")
    task = Task("graph", "m", {"graph": "x"})
    mid = db.save_cost_model(model.name, model.save(), {"n_train": 40}, 40, task, Device("d", "cpu"), fmt="json")
    loaded, loaded_task, info = db.load_cost_model(model_id=mid)
    assert isinstance(loaded, GraphOpCostModel) and loaded_task.key == task.key and info["name"] == "graph-ops"
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_guides_a_search_as_any_cost_model():
    from autotune.algorithms.model_guided import make_search
    from autotune.testing.algorithms import drive
    from autotune.testing.fakes import FakeRunner, small_knob_space

    space = small_knob_space()
    keys = drive(make_search("random", "graph-ops", init=4), space, FakeRunner(space), seed=0, steps=10)
    assert len(keys) == len(set(keys)) == 40
