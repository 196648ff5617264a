"""FailureModel: the probability that a configuration fails (does not compile, does not run), learnt
from the measured ones, so that a search avoids likely failures instead of sampling them again.

A small XGBoost classifier (logistic loss) on ``Space.features`` rows; it is trained only when the
rows hold at least ``min_each`` failures and ``min_each`` successes, and predicts 0 otherwise (a
space without failures is searched as if the model were absent).
"""

from __future__ import annotations

import numpy as np

from autotune.cost_models.xgb import inplace_scores
from autotune.lazy import LazyModule

xgb = LazyModule("xgboost")  # imported when a model is first trained or loaded


class FailureModel:
    def __init__(self, seed: int = 0, rounds: int = 30, max_depth: int = 4, min_each: int = 2):
        self.seed, self.rounds, self.max_depth, self.min_each = seed, rounds, max_depth, min_each
        self.booster: xgb.Booster | None = None

    @property
    def trained(self) -> bool:
        return self.booster is not None

    def fit(self, X: np.ndarray, failed: np.ndarray) -> FailureModel:
        failed = np.asarray(failed, dtype=bool)
        self.booster = None
        if failed.sum() >= self.min_each and (~failed).sum() >= self.min_each:
            d = xgb.DMatrix(np.asarray(X, dtype=np.float32), label=failed.astype(np.float32), nthread=1)
            params = {"objective": "binary:logistic", "max_depth": self.max_depth, "eta": 0.3, "nthread": 1,
                      "min_child_weight": 0.1,  # a split may leave few rows: the first batches are small
                      "seed": self.seed, "verbosity": 0, "tree_method": "hist"}
            self.booster = xgb.train(params, d, self.rounds)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Probability of failure per row (0 everywhere while untrained)."""
        X = np.asarray(X, dtype=np.float32)
        if self.booster is None:
            return np.zeros(len(X))
        return np.asarray(inplace_scores(self.booster, X), dtype=float)
