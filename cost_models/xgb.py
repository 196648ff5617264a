"""XGBoost cost model on ``Space.features`` rows.

Two objectives (option ``objective``):
- ``"rank"``: ``rank:pairwise`` on normalised throughput (best/cost within each task group,
  failures 0); the score is the raw ranking output.
- ``"reg"``: squared-error regression on log(cost/best) within each group (failures get a
  penalty above the slowest); the score is the negated prediction.
Which ranks better on the replay data is recorded in scripts/bench_search.py's report; the
default is the winner. Below ``min_samples`` successful rows the model is untrained and
predicts random scores. XGBoost runs with ``nthread=1`` (on small shared machines the default
OpenMP threads busy-wait and train several times slower). ``save`` gives XGBoost's own JSON
bytes (the options ride in the booster's attributes); nothing is pickled.
"""

from __future__ import annotations

import json
from typing import Self

import numpy as np
import xgboost as xgb

from autotune.cost_models.base import CostModel
from autotune.cost_models.features import log_cost, query_order, throughput
from autotune.cost_models.metrics import quality as _quality

DEFAULTS = {"objective": "rank", "rounds": 60, "max_depth": 6, "eta": 0.3, "min_samples": 8, "seed": 0}


class XGBCostModel(CostModel):
    name = "xgb"

    def __init__(self, **options):
        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"xgb cost model has no option(s) {sorted(unknown)}; valid: {sorted(DEFAULTS)}")
        self.options = {**DEFAULTS, **options}
        if self.options["objective"] not in ("rank", "reg"):
            raise ValueError("xgb objective must be 'rank' or 'reg'")
        self.booster: xgb.Booster | None = None
        self.n_train = 0
        self._rng = np.random.default_rng(int(self.options["seed"]))

    @property
    def trained(self) -> bool:
        return self.booster is not None

    def _params(self) -> dict:
        o = self.options
        params = {"nthread": 1, "max_depth": int(o["max_depth"]), "eta": float(o["eta"]),
                  "seed": int(o["seed"]), "verbosity": 0, "tree_method": "hist"}
        if o["objective"] == "rank":
            params.update(objective="rank:pairwise", lambdarank_pair_method="mean", lambdarank_num_pair_per_sample=8)
        else:
            params.update(objective="reg:squarederror")
        return params

    def fit(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None) -> Self:
        X = np.asarray(X, dtype=np.float32)
        y = np.asarray(y, dtype=float)
        self.n_train = int(len(y))
        if int(np.isfinite(y).sum()) < int(self.options["min_samples"]):
            self.booster = None
            return self
        order, qid = query_order(groups, len(y))
        if self.options["objective"] == "rank":
            dtrain = xgb.DMatrix(X[order], label=throughput(y, groups)[order], qid=qid, nthread=1)
        else:
            dtrain = xgb.DMatrix(X, label=log_cost(y, groups), nthread=1)
        self.booster = xgb.train(self._params(), dtrain, num_boost_round=int(self.options["rounds"]))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float32)
        if self.booster is None:
            return self._rng.random(len(X))
        pred = self.booster.inplace_predict(X)
        return np.asarray(pred if self.options["objective"] == "rank" else -pred, dtype=float)

    def quality(self, X_holdout: np.ndarray, y_holdout: np.ndarray, k: int = 10) -> dict:
        """Spearman rank correlation and top-k recall of the predictions on held-out rows."""
        return _quality(np.asarray(y_holdout, dtype=float), self.predict(X_holdout), k)

    def save(self) -> bytes:
        if self.booster is None:
            return json.dumps({"autotune_xgb": {"options": self.options, "trained": False}}).encode()
        self.booster.set_attr(autotune_options=json.dumps(self.options), autotune_n_train=str(self.n_train))
        return bytes(self.booster.save_raw("json"))

    @classmethod
    def load(cls, data: bytes) -> Self:
        doc = json.loads(bytes(data).decode())
        if "autotune_xgb" in doc:
            return cls(**doc["autotune_xgb"]["options"])
        booster = xgb.Booster(params={"nthread": 1})
        booster.load_model(bytearray(data))
        model = cls(**json.loads(booster.attr("autotune_options") or "{}"))
        model.booster = booster
        model.n_train = int(booster.attr("autotune_n_train") or 0)
        return model
