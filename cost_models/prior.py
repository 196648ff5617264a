"""What the source devices know, as a cost model for the target.

:class:`SourcePrior` scores configurations from the source devices' measurements: the exact
normalised score where a source measured the configuration, else an XGBoost regression
trained on that source's rows. The score is ``-log(cost / best)`` per source (0 for the
source's best, failures below its worst), averaged over the sources with their weights.

:class:`TransferModel` is the cost model of a warm-started search. Its XGBoost booster
starts from the prior (the prior is the ``base_margin``, in log-cost units), so with no
target data it ranks exactly as the sources do, and every retrain fits only the target's
correction to the source ranking: the source's influence decays as target data arrives.
Safety: after ``check_after`` target results it compares the prior with the target's
measurements (Spearman rank correlation, failures ranked last); below ``min_rho`` the prior
is dropped and the model is an ordinary XGBoost model trained on the target data alone.
The check is repeated at every retrain, so a prior dropped on little evidence comes back.
"""

from __future__ import annotations

import json
from typing import Self

import numpy as np
import xgboost as xgb

from autotune.cost_models.base import CostModel
from autotune.cost_models.features import log_cost
from autotune.cost_models.metrics import rank_correlation
from autotune.cost_models.xgb import XGBCostModel

_REG = {"nthread": 1, "objective": "reg:squarederror", "verbosity": 0, "tree_method": "hist"}


def _row_keys(X: np.ndarray) -> list[bytes]:
    return [r.tobytes() for r in np.ascontiguousarray(np.asarray(X, dtype=np.float64))]


def kept_rows(X: np.ndarray, exclude: set[bytes]) -> np.ndarray:
    """Mask of the rows of X not in ``exclude`` (row bytes, see ``_row_keys``)."""
    return np.array([k not in exclude for k in _row_keys(X)], dtype=bool) if exclude else np.ones(len(X), dtype=bool)


class SourcePrior:
    """Scores (higher = faster) of feature rows from one or more sources' (X, costs)."""

    def __init__(self, sources: list[tuple[np.ndarray, np.ndarray]], weights: list[float] | None = None,
                 rounds: int = 80, seed: int = 0):
        if not sources:
            raise ValueError("a source prior needs at least one source")
        self.weights = np.asarray(weights if weights is not None else [1.0] * len(sources), dtype=float)
        self.exact: list[dict[bytes, float]] = []
        self.models: list[xgb.Booster | None] = []
        for X, y in sources:
            X = np.asarray(X, dtype=np.float64)
            score = -log_cost(np.asarray(y, dtype=float))
            self.exact.append(dict(zip(_row_keys(X), score.tolist())))
            booster = None
            if len(X) >= 8:
                params = {**_REG, "max_depth": 8, "eta": 0.3, "seed": seed}
                booster = xgb.train(params, xgb.DMatrix(X.astype(np.float32), label=score, nthread=1), rounds)
            self.models.append(booster)

    def __call__(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        keys = _row_keys(X)
        total = np.zeros(len(X))
        for w, exact, model in zip(self.weights, self.exact, self.models):
            vals = np.array([exact.get(k, np.nan) for k in keys])
            miss = np.isnan(vals)
            if miss.any():
                vals[miss] = model.inplace_predict(X[miss].astype(np.float32)) if model is not None else 0.0
            total += w * vals
        return total / max(float(self.weights.sum()), 1e-12)


def agreement(prior_scores: np.ndarray, y: np.ndarray) -> float:
    """Spearman correlation of prior scores with the measured speed (failures slowest); nan if undefined."""
    y = np.asarray(y, dtype=float)
    speed = np.where(np.isfinite(y), -np.log(np.where(np.isfinite(y) & (y > 0), y, 1.0)), -np.inf)
    finite = speed[np.isfinite(speed)]
    if len(finite) == 0 or len(y) < 3:
        return float("nan")
    speed = np.where(np.isfinite(speed), speed, finite.min() - 1.0)
    if np.ptp(speed) == 0 or np.ptp(prior_scores) == 0:
        return float("nan")
    return rank_correlation(prior_scores, speed)


class TransferModel(CostModel):
    """XGBoost boosted from a source prior; falls back to target-only XGBoost when the prior disagrees."""

    name = "xgb-transfer"

    def __init__(self, prior: SourcePrior | None, min_rho: float = 0.2, check_after: int = 8,
                 rounds: int = 30, max_depth: int = 4, eta: float = 0.3, seed: int = 0, mode: str = "margin"):
        self.prior = prior
        self.mode = mode
        self.options = {"min_rho": min_rho, "check_after": check_after, "rounds": rounds,
                        "max_depth": max_depth, "eta": eta, "seed": seed, "mode": mode}
        self.ranker = XGBCostModel(seed=seed)
        self.exclude: set[bytes] = set()  # feature rows of the source probes (set by WarmStart)
        self.booster: xgb.Booster | None = None
        self.fallback = XGBCostModel(seed=seed)
        self.active = prior is not None
        self.rho = float("nan")
        self.n_train = 0

    @property
    def trained(self) -> bool:
        return self.active or self.fallback.trained

    def fit(self, X: np.ndarray, y: np.ndarray, groups=None) -> Self:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=float)
        self.n_train = len(y)
        if self.prior is None:
            self.active = False
        else:
            s = self.prior(X)
            self.rho = agreement(s, y)
            checked = int(np.isfinite(y).sum()) >= int(self.options["check_after"])
            self.active = not (checked and not (self.rho >= float(self.options["min_rho"])))
        if not self.active:
            # a dropped source's probes (its top-k, measured first) stay out of the target's model:
            # a misleading source's picks are outliers that otherwise mislead the ranking model
            keep = kept_rows(X, self.exclude) if self.prior is not None else np.ones(len(X), dtype=bool)
            self.fallback.fit(X[keep], y[keep])
            return self
        self.booster = None
        if self.mode == "feature":
            self.ranker.fit(np.column_stack([X, s]), y)
            return self
        if np.isfinite(y).sum() >= 2:
            o = self.options
            params = {**_REG, "max_depth": int(o["max_depth"]), "eta": float(o["eta"]), "seed": int(o["seed"])}
            d = xgb.DMatrix(X.astype(np.float32), label=log_cost(y), base_margin=-s, nthread=1)
            self.booster = xgb.train(params, d, int(o["rounds"]))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if not self.active:
            return self.fallback.predict(X)
        s = self.prior(X)
        if self.mode == "feature":
            return self.ranker.predict(np.column_stack([X, s])) if self.ranker.trained else s
        if self.booster is None:
            return s
        return -np.asarray(self.booster.inplace_predict(X.astype(np.float32), base_margin=-s), dtype=float)

    def save(self) -> bytes:
        """The target-side model only (the prior is the sources' data, already in the database)."""
        if not self.active:
            return self.fallback.save()
        if self.booster is None:
            return json.dumps({"autotune_xgb_transfer": {"options": self.options, "rho": self.rho}}).encode()
        self.booster.set_attr(autotune_transfer=json.dumps({"options": self.options, "rho": self.rho}))
        return bytes(self.booster.save_raw("json"))

    @classmethod
    def load(cls, data: bytes) -> Self:
        """A model without its prior (the prior is not serialised): it predicts as target-only XGBoost."""
        return cls(None)
