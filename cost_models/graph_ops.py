"""XGBoost regression of an op's run time on its features: the graph domain's op-cost model.

A graph search times each distinct op once per device, up to a cap; the ops beyond it are
predicted by this model, trained on the ops measured so far. Rows are
``autotune.search_spaces.graphs.cost.op_features`` (op type, log2 FLOPs, bytes and
output size, kernel, stride, groups), targets are seconds; the regression is on log
seconds (squared error, 80 rounds of depth 4, eta 0.2, one thread).

As every :class:`CostModel`, ``predict`` is a score where higher means faster: here
``-log(seconds)``; :meth:`predict_seconds` gives the time itself. Below ``min_samples``
usable rows (finite, positive times) the model is untrained and scores every row 0.
``save`` is XGBoost's own JSON with the options in the booster's attributes (no pickle).
"""

from __future__ import annotations

import json
from typing import Self

import numpy as np

from autotune.cost_models.base import CostModel
from autotune.cost_models.metrics import quality as _quality
from autotune.lazy import LazyModule

xgb = LazyModule("xgboost")  # imported when a model is first trained or loaded

DEFAULTS = {"rounds": 80, "max_depth": 4, "eta": 0.2, "min_samples": 16, "seed": 0}


class GraphOpCostModel(CostModel):
    name = "graph-ops"

    def __init__(self, **options):
        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"graph-ops cost model has no option(s) {sorted(unknown)}; valid: {sorted(DEFAULTS)}")
        self.options = {**DEFAULTS, **options}
        self.booster: xgb.Booster | None = None
        self.n_train = 0

    @property
    def trained(self) -> bool:
        return self.booster is not None

    def fit(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None) -> Self:
        """Train on rows with a finite positive time (failures carry no time to regress on)."""
        X = np.asarray(X, dtype=float).reshape(len(y), -1)
        y = np.asarray(y, dtype=float)
        keep = np.isfinite(y) & (y > 0)
        self.n_train = int(keep.sum())
        if self.n_train < int(self.options["min_samples"]):
            self.booster = None
            return self
        o = self.options
        params = {"max_depth": int(o["max_depth"]), "eta": float(o["eta"]), "nthread": 1, "seed": int(o["seed"]),
                  "verbosity": 0}
        data = xgb.DMatrix(X[keep], label=np.log(y[keep]), nthread=1)
        self.booster = xgb.train(params, data, num_boost_round=int(o["rounds"]))
        return self

    def predict_seconds(self, X: np.ndarray) -> np.ndarray:
        """Predicted time per row, seconds (NaN while untrained)."""
        X = np.asarray(X, dtype=float)
        if self.booster is None:
            return np.full(len(X), np.nan)
        return np.exp(self.booster.predict(xgb.DMatrix(X, nthread=1)).astype(float))

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        if self.booster is None:
            return np.zeros(len(X))
        return -self.booster.predict(xgb.DMatrix(X, nthread=1)).astype(float)

    def quality(self, X_holdout: np.ndarray, y_holdout: np.ndarray, k: int = 10) -> dict:
        """Spearman rank correlation and top-k recall of the predictions on held-out rows."""
        return _quality(np.asarray(y_holdout, dtype=float), self.predict(X_holdout), k)

    def save(self) -> bytes:
        if self.booster is None:
            return json.dumps({"autotune_graph_ops": {"options": self.options, "trained": False}}).encode()
        self.booster.set_attr(autotune_options=json.dumps(self.options), autotune_n_train=str(self.n_train))
        return bytes(self.booster.save_raw("json"))

    @classmethod
    def load(cls, data: bytes) -> Self:
        doc = json.loads(bytes(data).decode())
        if "autotune_graph_ops" in doc:
            return cls(**doc["autotune_graph_ops"]["options"])
        booster = xgb.Booster(params={"nthread": 1})
        booster.load_model(bytearray(data))
        model = cls(**json.loads(booster.attr("autotune_options") or "{}"))
        model.booster = booster
        model.n_train = int(booster.attr("autotune_n_train") or 0)
        return model
