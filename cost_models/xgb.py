"""XGBoost cost model on ``Space.features`` rows.

Two objectives (option ``objective``):
- ``"rank"``: ``rank:pairwise`` on normalised throughput (best/cost within each task group,
  failures 0); the score is the raw ranking output.
- ``"reg"``: squared-error regression on log(cost/best) within each group (failures get a
  penalty above the slowest); the score is the negated prediction.
Which ranks better on the replay data is recorded in scripts/bench_search.py's report; the
default is the winner. ``fit(..., members=[...])`` refits only those members of a trained ensemble
(a search asked one point at a time refits the member whose turn it is). Below ``min_samples``
rows, or ``min_successes`` successful ones (None: as many as ``min_samples``), the model is
untrained and predicts random scores. XGBoost runs with
``nthread=1`` (on small shared machines the default OpenMP threads busy-wait and train several
times slower); the ensemble's members train side by side instead, one thread each, on up to 4 of
the cores the process may use (the same boosters as one after the other: each is seeded and
single-threaded; about twice as fast on 2 cores), and scoring a large matrix (``PARALLEL_ROWS``
rows or more: a listed space, every point at each retrain) runs the members, and slices of the rows,
side by side on as many threads, one thread each, with the same scores (``boosters_scores``; 1.4 to 1.7
times as fast on 2 cores). ``save`` gives XGBoost's own JSON
bytes (the options ride in the booster's attributes); nothing is pickled.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Self

import numpy as np

from autotune.cost_models.base import CostModel
from autotune.cost_models.features import log_cost, query_order, throughput, with_pairs
from autotune.cost_models.metrics import quality as _quality
from autotune.errors import UsageError
from autotune.lazy import LazyModule

xgb = LazyModule("xgboost")  # imported when a model is first trained or loaded

OBJECTIVES = ("rank", "reg", "reg-tp")
PARALLEL_ROWS = 10_000  # rows from which a prediction uses several threads (see the module's docstring)
DEFAULTS = {"objective": "rank", "rounds": 60, "max_depth": 4, "eta": 0.3, "min_samples": 8, "min_successes": None,
            "seed": 0, "members": 8, "pair_columns": []}


def stored_document(data: bytes, kind: str) -> dict:
    """The JSON object a stored model's bytes hold; ValueError naming the model's ``kind`` for bytes that are
    not one."""
    try:
        doc = json.loads(bytes(data).decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"not a stored {kind} model ({str(exc)[:80]})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"not a stored {kind} model (not a JSON object)")
    return doc


class XGBCostModel(CostModel):
    name = "xgb"

    def __init__(self, **options):
        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise UsageError(f"xgb cost model has no option(s) {sorted(unknown)}; valid: {sorted(DEFAULTS)}")
        self.options = {**DEFAULTS, **options}
        if self.options["objective"] not in OBJECTIVES:
            raise UsageError(f"xgb objective must be one of {', '.join(OBJECTIVES)}")
        self.boosters: list[xgb.Booster] = []
        self.n_train = 0
        self._rng = np.random.default_rng(int(self.options["seed"]))

    @property
    def trained(self) -> bool:
        return bool(self.boosters)

    @property
    def booster(self) -> xgb.Booster | None:
        return self.boosters[0] if self.boosters else None

    def _params(self, member: int = 0) -> dict:
        o = self.options
        params = {"nthread": 1, "max_depth": int(o["max_depth"]), "eta": float(o["eta"]),
                  "seed": int(o["seed"]) + member, "verbosity": 0, "tree_method": "hist"}
        if int(o["members"]) > 1:  # an ensemble: each member sees a random 80% of rows and features
            params.update(subsample=0.8, colsample_bynode=0.8)
        if o["objective"] == "rank":
            params.update(objective="rank:pairwise", lambdarank_pair_method="mean", lambdarank_num_pair_per_sample=8)
        else:
            params.update(objective="reg:squarederror")
        return params

    def _input(self, X: np.ndarray) -> np.ndarray:
        """The rows the boosters see: the features, and with ``pair_columns`` (column indices, log2 of power-of-two
        knobs) the sum and difference of every two of those columns."""
        cached = getattr(self, "_last_input", None)
        if cached is not None and cached[0] is X:  # the same listing, scored again: its pairs are the same
            return cached[1]
        rows = np.asarray(with_pairs(X, list(self.options["pair_columns"])), dtype=np.float32)
        if len(X) >= PARALLEL_ROWS:
            self._last_input = (X, rows)
        return rows

    def fit(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None,
            members: list[int] | None = None) -> Self:
        """Train every ensemble member on the rows; with ``members`` (indices) and a trained ensemble, refit
        those members alone and keep the others as they are."""
        refit = members is not None and len(self.boosters) == max(1, int(self.options["members"]))
        if refit and not members:
            return self
        X = self._input(X)
        y = np.asarray(y, dtype=float)
        least = self.options["min_successes"]
        least = int(self.options["min_samples"] if least is None else least)
        if not refit and (len(y) < int(self.options["min_samples"]) or int(np.isfinite(y).sum()) < least):
            self.n_train, self.boosters = len(y), []
            return self
        order, qid = query_order(groups, len(y))
        if self.options["objective"] == "rank":
            rows, label = X[order], throughput(y, groups)[order]
        elif self.options["objective"] == "reg-tp":
            rows, label, qid = X, throughput(y, groups), None
        else:
            rows, label, qid = X, log_cost(y, groups), None
        which = sorted(set(members)) if refit else range(max(1, int(self.options["members"])))
        fitted = train_boosters([self._params(j) for j in which],
                                lambda: xgb.DMatrix(rows, label=label, qid=qid, nthread=1), int(self.options["rounds"]))
        if refit:
            for j, booster in zip(which, fitted):
                self.boosters[j] = booster
        else:
            self.n_train, self.boosters = len(y), fitted
        return self

    @property
    def members(self) -> int:
        """Trained ensemble members (0 untrained)."""
        return len(self.boosters)

    def predict_members(self, X: np.ndarray, members: slice = slice(None)) -> np.ndarray:
        """One row of scores per ensemble member (shape members x len(X)), or per member of the slice
        ``members``; random when untrained."""
        if not self.boosters:
            return self._rng.random((1, len(X)))
        X, boosters = self._input(X), self.boosters[members]
        if not boosters:
            return np.empty((0, len(X)))
        pred = np.vstack(boosters_scores(boosters, X)).astype(float)
        return -pred if self.options["objective"] == "reg" else pred

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.predict_members(X).mean(axis=0)

    def quality(self, X_holdout: np.ndarray, y_holdout: np.ndarray, k: int = 10) -> dict:
        """Spearman rank correlation and top-k recall of the predictions on held-out rows."""
        return _quality(np.asarray(y_holdout, dtype=float), self.predict(X_holdout), k)

    def save(self) -> bytes:
        """XGBoost's JSON model; an ensemble is a JSON list of its members' XGBoost JSON models."""
        if not self.boosters:
            return json.dumps({"autotune_xgb": {"options": self.options, "trained": False}}).encode()
        for b in self.boosters:
            b.set_attr(autotune_options=json.dumps(self.options), autotune_n_train=str(self.n_train))
        if len(self.boosters) == 1:
            return bytes(self.boosters[0].save_raw("json"))
        # the members' JSON documents joined as they are: decoding and encoding them again cost ten times as much
        return b'{"autotune_xgb_ensemble": [' + b", ".join(bytes(b.save_raw("json")) for b in self.boosters) + b"]}"

    @classmethod
    def load(cls, data: bytes) -> Self:
        """Inverse of ``save``; ValueError naming what is wrong for bytes that are not such a model."""
        doc = stored_document(data, "xgb")
        if "autotune_xgb" in doc:
            return cls(**doc["autotune_xgb"]["options"])
        raw = [json.dumps(m).encode() for m in doc["autotune_xgb_ensemble"]] if "autotune_xgb_ensemble" in doc else [data]
        boosters = []
        for blob in raw:
            b = xgb.Booster(params={"nthread": 1})
            try:
                b.load_model(bytearray(blob))
            except xgb.core.XGBoostError as exc:
                raise ValueError(f"not a stored xgb model ({xgb_message(exc)})") from None
            boosters.append(b)
        model = cls(**json.loads(boosters[0].attr("autotune_options") or "{}"))
        model.boosters = boosters
        model.n_train = int(boosters[0].attr("autotune_n_train") or 0)
        return model


def train_boosters(params: list[dict], data: Callable[[], xgb.DMatrix], rounds: int) -> list[xgb.Booster]:
    """One booster per parameter set (in that order), ``rounds`` rounds each, on up to ``_threads()`` threads
    at once; each trains on a DMatrix of its own from ``data()``, since XGBoost caches its histogram index in
    the DMatrix. With one thread in each booster's parameters, the boosters are those a loop gives."""
    workers = min(len(params), _threads())
    if workers <= 1:
        d = data()
        return [xgb.train(p, d, num_boost_round=rounds) for p in params]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="xgb-fit") as pool:
        return list(pool.map(lambda p: xgb.train(p, data(), num_boost_round=rounds), params))


def inplace_scores(booster: xgb.Booster, X: np.ndarray) -> np.ndarray:
    """``booster.inplace_predict(X)``; from ``PARALLEL_ROWS`` rows on several threads (``boosters_scores``)."""
    return boosters_scores([booster], X)[0]


def boosters_scores(boosters: list[xgb.Booster], X: np.ndarray) -> list[np.ndarray]:
    """Each booster's ``inplace_predict(X)``. From ``PARALLEL_ROWS`` rows the boosters, and the rows of each
    in as many slices as there are threads for it, are predicted side by side on up to ``_threads()``
    threads, each prediction on one thread (boosters keep ``nthread=1``): XGBoost predicts without the
    interpreter's lock and may predict with one booster on several threads at once, and a tree model
    scores each row on its own, so the scores are those of one call. This runs where XGBoost's own
    threads do not (a process limited to one OpenMP thread), and a booster is never reconfigured for
    another thread count (which costs more than predicting a small batch)."""
    workers = _threads() if len(X) >= PARALLEL_ROWS else 1
    if workers <= 1 or not boosters:
        return [b.inplace_predict(X) for b in boosters]
    slices = max(1, -(-workers // len(boosters)))  # row slices per booster, so that every thread has work
    bounds = np.linspace(0, len(X), slices + 1).astype(int)
    jobs = [(b, X[lo:hi]) for b in boosters for lo, hi in itertools.pairwise(bounds)]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="xgb-predict") as pool:
        parts = list(pool.map(lambda job: job[0].inplace_predict(job[1]), jobs))
    return [np.concatenate(parts[i * slices:(i + 1) * slices]) for i in range(len(boosters))]


def xgb_message(exc: Exception) -> str:
    """The first line of an XGBoost error without its time stamp and source location ("[14:13:48]
    /workspace/include/xgboost/json.h:88: ")."""
    line = (str(exc).strip().splitlines() or [""])[0]
    return re.sub(r"^\[[0-9:]+\]\s+\S+:\d+:\s*", "", line)[:100]


def _threads() -> int:
    """The cores this process may run on, at most 4."""
    try:
        return max(1, min(4, len(os.sched_getaffinity(0))))
    except AttributeError:  # no affinity call on this platform
        return max(1, min(4, os.cpu_count() or 1))
