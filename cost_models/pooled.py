"""PooledModel: the cost model of a warm-started search (autotune/algorithms/warm_start.py):
one XGBoost ranking model over every device's rows, with the device properties as extra features.

Each device is one ranking group (labels best/cost within the device); the target's group is
weighted up so that its pairs count as much as all the sources' together. Source rows are
subsampled to keep retraining cheap: ``max_source_rows`` in all, shared out evenly among the
sources, each source's share its fastest rows (``keep_top`` of every ``max_source_rows``) and
random others; one source keeps its 500 fastest and 2,500 others, each of two 250 and 1,250, so
a warm start from two devices retrains about as fast as from one.

Safety: after ``check_after`` successful target results, the sources-only model's ranking of
the target's measured rows is compared with the measurements (Spearman, :func:`agreement`);
below ``min_rho`` the source rows are left out until the agreement recovers, and the model is an
ordinary target-only XGBoost model trained without the sources' probes (their top
configurations, measured first: a misleading source's picks are outliers that would otherwise
mislead the ranking). Without sources it is that target-only model from the start.

Per-source trust: a source that measured at least ``check_after`` of the configurations the
target measured is also compared with the target on those (Spearman of its own costs, no model
needed) at every fit; below ``min_rho`` that source alone is left out of the training rows, so
one misleading source among good ones does not drag the others down.
"""

from __future__ import annotations

import json
from typing import Self

import numpy as np

from autotune.cost_models.base import CostModel
from autotune.cost_models.features import positive_costs, throughput
from autotune.cost_models.metrics import rank_correlation
from autotune.cost_models.xgb import XGBCostModel, inplace_scores, stored_document, xgb_message
from autotune.errors import UsageError, argument
from autotune.gpus import device_properties
from autotune.lazy import LazyModule
from autotune.types import Device

xgb = LazyModule("xgboost")  # imported when a model is first trained or loaded

PROPS = ("sm_count", "memory_bandwidth_gbs", "boost_clock_mhz", "l2_kib", "fp32_tflops", "compute_capability", "vendor")
#: the vendor as a number, so that trees can split NVIDIA from AMD rows
VENDORS = {"NVIDIA": 1.0, "AMD": 2.0, "Intel": 3.0}


def row_keys(X: np.ndarray) -> list[bytes]:
    """One hashable key per feature row (its float64 bytes)."""
    return [r.tobytes() for r in np.ascontiguousarray(np.asarray(X, dtype=np.float64))]


def kept_rows(X: np.ndarray, exclude: set[bytes]) -> np.ndarray:
    """Mask of the rows of X not in ``exclude`` (row keys, see ``row_keys``)."""
    if not exclude:
        return np.ones(len(X), dtype=bool)
    return np.array([k not in exclude for k in row_keys(X)], dtype=bool)


def speed(y: np.ndarray) -> np.ndarray | None:
    """-log cost per row (a cost of 0 the fastest, see ``positive_costs``), a failure one below the slowest
    success; None without a success."""
    y = positive_costs(y)
    s = np.where(np.isfinite(y), -np.log(np.where(np.isfinite(y) & (y > 0), y, 1.0)), -np.inf)
    finite = s[np.isfinite(s)]
    return np.where(np.isfinite(s), s, finite.min() - 1.0) if len(finite) else None


def agreement(scores: np.ndarray, y: np.ndarray) -> float:
    """Spearman correlation of scores (higher = faster) with measured speed (failures slowest), or nan."""
    fast = speed(y)
    if fast is None or len(fast) < 3:
        return float("nan")
    if np.ptp(fast) == 0 or np.ptp(scores) == 0:
        return float("nan")
    return rank_correlation(scores, fast)


def device_vector(d: Device) -> np.ndarray:
    """The device's properties (``PROPS``) as numbers, nan where unknown."""
    p = device_properties(d)
    out = []
    for k in PROPS:
        v = VENDORS.get(p.get(k)) if k == "vendor" else p.get(k)
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            out.append(np.nan)
    return np.array(out)


class PooledModel(CostModel):
    name = "xgb-pooled"

    def __init__(self, sources: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None,
                 target: np.ndarray | None = None, seed: int = 0, rounds: int = 60, max_source_rows: int = 3000,
                 keep_top: int = 500, min_rho: float = 0.2, check_after: int = 8):
        if sources is None or target is None:  # named as a model of its own (--cost-model xgb-pooled)
            raise UsageError(f"cost model 'xgb-pooled' is the model of a warm start ({argument('transfer_from')}), "
                             f"built from its sources; it is not chosen with {argument('cost_model')} (valid: graph-ops, xgb)")
        self.min_rho, self.check_after = min_rho, check_after
        self.active = bool(sources)
        self.exclude: set[bytes] = set()  # feature rows of the source probes (set by WarmStart)
        self.fallback = XGBCostModel(seed=seed)
        # the fallback's options: the log2 columns whose sums and differences every booster here also sees
        # (``pair_columns``, set by ModelGuided, see XGBCostModel) apply to the pooled boosters as to it
        self.options = self.fallback.options
        self.rho = float("nan")
        self._source_only: xgb.Booster | None = None
        rng = np.random.default_rng(seed)
        # the rows are shared out among the sources (each its fastest and random others in the same
        # proportion), so a fit costs about the same whatever the number of sources
        share = max_source_rows // max(1, len(sources))
        keep_top = keep_top * share // max_source_rows if max_source_rows > 0 else 0
        self.target = np.asarray(target, dtype=float)
        self.seed, self.rounds = seed, rounds
        self.src_X, self.src_y, self.src_g = [], [], []
        self.src_costs: list[dict[bytes, float]] = []  # every row's cost by row key, per source
        self.trusted: list[bool] = []
        self.src_rho: list[float] = []
        for g, (X, y, vec) in enumerate(sources):
            X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
            order = np.argsort(y, kind="stable")
            keep = order[:keep_top]
            rest = order[keep_top:]
            extra = rng.choice(rest, min(len(rest), max(0, share - len(keep))), replace=False) if len(rest) else rest
            idx = np.concatenate([keep, extra]).astype(int)
            self.src_X.append(np.column_stack([X[idx], np.tile(vec, (len(idx), 1))]))
            self.src_y.append(throughput(y[idx]))
            self.src_g.append(np.full(len(idx), g + 1))
            self.src_costs.append(dict(zip(row_keys(X), y.tolist())))
            self.trusted.append(True)
            self.src_rho.append(float("nan"))
        self.booster: xgb.Booster | None = None
        self.n_train = 0
        self.target_known = True  # False: loaded from a booster stored without the target's properties

    @property
    def trained(self) -> bool:
        return self.booster is not None if self.active else self.fallback.trained

    def fit(self, X: np.ndarray, y: np.ndarray, groups=None) -> Self:
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        self.n_train = len(y)
        tX = np.column_stack([X, np.tile(self.target, (len(X), 1))])
        self._check_each_source(X, y)
        if self.src_X and int(np.isfinite(y).sum()) >= self.check_after:
            if self._source_only is None:
                self._source_only = self._train([], [], [], range(len(self.src_X)))
            self.rho = agreement(self._source_only.inplace_predict(self._input(tX)), y)
            self.active = not (self.rho < self.min_rho)
        self.active = self.active and any(self.trusted)
        if not self.active:  # the ordinary target-only model, without the sources' probes
            keep = kept_rows(X, self.exclude)
            self.fallback.fit(X[keep], y[keep])
            return self
        self.booster = self._train([tX], [throughput(y)], [np.zeros(len(tX), dtype=int)],
                                   [i for i, ok in enumerate(self.trusted) if ok])
        return self

    def _check_each_source(self, X: np.ndarray, y: np.ndarray) -> None:
        """Per-source trust: a source that measured at least ``check_after`` of the target's measured
        configurations is compared with the target on them (Spearman of its own costs); below
        ``min_rho`` it is left out of the model until it agrees again. Updated at every fit, so from
        every target result."""
        keys = row_keys(X)
        for s, costs in enumerate(self.src_costs):
            both = [(costs[k], t) for k, t in zip(keys, y) if k in costs]
            if len(both) < self.check_after:
                continue
            src, tgt = np.array(both, dtype=float).T
            scores = speed(src)
            self.src_rho[s] = agreement(scores, tgt) if scores is not None else float("nan")
            self.trusted[s] = not (self.src_rho[s] < self.min_rho)

    def _train(self, Xs: list, ys: list, gs: list, used) -> xgb.Booster:
        """A ranking booster on the given target rows and the rows of the sources ``used`` (indices)."""
        Xs, ys, gs = Xs + [self.src_X[i] for i in used], ys + [self.src_y[i] for i in used], gs + [self.src_g[i] for i in used]
        n_target = sum(len(g) for g in gs if len(g) and g[0] == 0)
        n_src = sum(len(self.src_y[i]) for i in used)
        weights = ([max(1.0, n_src / n_target)] if n_target else []) + [1.0] * len(used)
        d = xgb.DMatrix(self._input(np.vstack(Xs)), label=np.concatenate(ys), qid=np.concatenate(gs),
                        weight=np.array(weights), nthread=1)
        params = {"nthread": 1, "objective": "rank:pairwise", "lambdarank_pair_method": "mean",
                  "lambdarank_num_pair_per_sample": 8, "max_depth": 6, "eta": 0.3, "seed": self.seed,
                  "verbosity": 0, "tree_method": "hist"}
        return xgb.train(params, d, self.rounds)

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        if not self.active:
            return self.fallback.predict(X)
        if self.booster is None:
            return np.zeros(len(X))
        tX = np.column_stack([X, np.tile(self.target, (len(X), 1))])
        return np.asarray(inplace_scores(self.booster, self._input(tX)), dtype=float)

    def _input(self, X: np.ndarray) -> np.ndarray:
        """Rows (the space's features, then the device's) as the boosters see them: as the fallback's."""
        return self.fallback._input(X)

    def save(self) -> bytes:
        """The pooled booster's XGBoost JSON, carrying in its attributes what scoring needs besides the trees:
        the target device's properties (the columns appended to every row), the fallback's options (the
        pair columns) and the training size. Once the sources are left out, the fallback's own bytes."""
        if not self.active:
            return self.fallback.save()
        if self.booster is None:
            return XGBCostModel().save()
        target = [None if not np.isfinite(v) else float(v) for v in self.target]
        self.booster.set_attr(autotune_pooled=json.dumps({"target": target, "options": self.options,
                                                          "n_train": int(self.n_train)}))
        return bytes(self.booster.save_raw("json"))

    @classmethod
    def load(cls, data: bytes) -> Self:
        """Inverse of ``save``: a model that scores as the saved one did (it holds no source rows, so it is for
        prediction; fitting it trains the target-only fallback). A booster stored without its attributes (by
        an older version) has ``target_known`` False: set ``target`` (``device_vector``) before predicting."""
        doc = stored_document(data, "xgb-pooled")
        model = cls([], np.full(len(PROPS), np.nan))
        if "autotune_xgb" in doc or "autotune_xgb_ensemble" in doc:  # the target-only fallback's bytes
            model.fallback = XGBCostModel.load(data)
            model.options = model.fallback.options
            return model
        booster = xgb.Booster(params={"nthread": 1})
        try:
            booster.load_model(bytearray(data))
        except xgb.core.XGBoostError as exc:
            raise ValueError(f"not a stored xgb-pooled model ({xgb_message(exc)})") from None
        if booster.attr("autotune_options") is not None and booster.attr("autotune_pooled") is None:
            model.fallback = XGBCostModel.load(data)  # a one-member fallback: its booster alone
            model.options = model.fallback.options
            return model
        meta = json.loads(booster.attr("autotune_pooled") or "{}")
        model.fallback = XGBCostModel(**(meta.get("options") or {}))
        model.options = model.fallback.options
        model.target_known = "target" in meta
        if model.target_known:
            model.target = np.array([np.nan if v is None else float(v) for v in meta["target"]], dtype=float)
        model.booster, model.active = booster, True
        model.n_train = int(meta.get("n_train", 0))
        return model
