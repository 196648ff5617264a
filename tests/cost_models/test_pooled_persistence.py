"""A warm start's model (PooledModel, stored as xgb-pooled) loads back and scores as it did when stored."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.cost_models.pooled import PROPS, PooledModel
from autotune.cost_models.registry import COST_MODELS, cost_model_class
from autotune.cost_models.xgb import XGBCostModel
from autotune.errors import UsageError


def _data(seed=0, n=300):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 6, size=(n, 3)).astype(float)
    y = 1.0 + (X[:, 0] - 2) ** 2 + 0.5 * (X[:, 1] - 4) ** 2 + 0.1 * X[:, 2]
    return X, y


def _vec(scale):
    return np.array([80.0 * scale, 900.0, 1700.0, 6144.0, 30.0, 8.6, 1.0])[:len(PROPS)]


def test_an_active_pooled_model_loads_with_its_target_and_scores_the_same():
    X, y = _data()
    model = PooledModel([(X, 1.3 * y, _vec(1.0))], _vec(0.5), check_after=8)
    model.options["pair_columns"] = [0, 1]  # as ModelGuided sets them: the boosters see the pairs too
    idx = np.random.default_rng(1).choice(len(X), 40, replace=False)
    model.fit(X[idx], y[idx])
    assert model.active and model.booster is not None
    loaded = cost_model_class("xgb-pooled").load(model.save())
    assert isinstance(loaded, PooledModel) and loaded.active and loaded.target_known
    np.testing.assert_allclose(loaded.target, model.target)
    assert loaded.options["pair_columns"] == [0, 1] and loaded.n_train == 40
    np.testing.assert_allclose(loaded.predict(X), model.predict(X), rtol=1e-6)


def test_a_pooled_model_whose_sources_were_left_out_loads_as_its_target_only_model():
    X, y = _data()
    model = PooledModel([(X, 1.0 / y, _vec(1.0))], _vec(0.5), check_after=8)  # a source ranking upside down
    idx = np.random.default_rng(2).choice(len(X), 60, replace=False)
    model.fit(X[idx], y[idx])
    assert not model.active and model.fallback.trained
    loaded = PooledModel.load(model.save())
    assert not loaded.active and loaded.trained
    np.testing.assert_allclose(loaded.predict(X), model.predict(X), rtol=1e-6)


def test_an_untrained_pooled_model_loads_untrained():
    model = PooledModel([(np.zeros((3, 3)), np.ones(3), _vec(1.0))], _vec(0.5))
    assert not PooledModel.load(model.save()).trained


def test_damaged_bytes_are_a_value_error_naming_the_model_kind():
    for blob in (b"garbage", b"[1, 2]", b'{"foo": 1}'):
        with pytest.raises(ValueError, match="not a stored xgb-pooled model"):
            PooledModel.load(blob)
        with pytest.raises(ValueError, match="not a stored xgb model"):
            XGBCostModel.load(blob)


def test_the_pooled_model_is_not_a_choice_of_cost_model(tmp_path):
    assert "xgb-pooled" not in COST_MODELS
    with pytest.raises(UsageError, match="not chosen with cost_model"):
        cost_model_class("xgb-pooled")()
    from typer.testing import CliRunner

    from autotune.cli.main import app

    db = tmp_path / "none.db"
    r = CliRunner().invoke(app, ["tune", "replay", "--cache", "example:pnpoly-rtx3090", "--cost-model", "xgb-pooled",
                                 "--trials", "2", "--db", f"sqlite:///{db}"])
    assert r.exit_code == 2 and "not chosen with --cost-model" in r.stderr and not db.exists()
