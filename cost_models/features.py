"""Training targets derived from measured costs (the features themselves come from Space.features).

Costs are normalised per task group, so rows from several tasks (or devices) can be mixed:
``throughput`` is best/cost within the group (1 for the fastest, 0 for failures) and
``log_cost`` is log(cost / best) within the group (failures get a penalty above the slowest).
"""

from __future__ import annotations

import numpy as np


def _groups(y: np.ndarray, groups: np.ndarray | None) -> np.ndarray:
    return np.zeros(len(y), dtype=np.int64) if groups is None else np.unique(np.asarray(groups), return_inverse=True)[1]


def throughput(y: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """best/cost per group, in [0, 1]; failures (inf) are 0."""
    y = np.asarray(y, dtype=float)
    g = _groups(y, groups)
    out = np.zeros(len(y))
    for gi in np.unique(g):
        m = g == gi
        ok = m & np.isfinite(y) & (y > 0)
        if ok.any():
            out[ok] = y[ok].min() / y[ok]
    return out


def log_cost(y: np.ndarray, groups: np.ndarray | None = None, fail_penalty: float = 1.0) -> np.ndarray:
    """log(cost/best) per group; failures get the group's worst value + ``fail_penalty``."""
    y = np.asarray(y, dtype=float)
    g = _groups(y, groups)
    out = np.zeros(len(y))
    for gi in np.unique(g):
        m = g == gi
        ok = m & np.isfinite(y) & (y > 0)
        if ok.any():
            out[ok] = np.log(y[ok] / y[ok].min())
            out[m & ~ok] = out[ok].max() + fail_penalty
    return out


def query_order(groups: np.ndarray | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A stable order sorting rows by group, and the sorted group ids (XGBoost ranking needs qid sorted)."""
    g = _groups(np.zeros(n), groups)
    order = np.argsort(g, kind="stable")
    return order, g[order]


def with_pairs(X: np.ndarray, columns: list[int]) -> np.ndarray:
    """``X`` with the sum and the difference of every two of ``columns`` appended: on log2 columns, the
    products and ratios of power-of-two knobs (a block's threads, the work per thread of a tile), which
    single-column tree splits reach only through deep interactions."""
    if len(columns) < 2:
        return X
    i, j = np.triu_indices(len(columns), k=1)
    a, b = X[:, np.asarray(columns)[i]], X[:, np.asarray(columns)[j]]
    return np.hstack([X, a + b, a - b])
