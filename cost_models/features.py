"""Training targets derived from measured costs (the features themselves come from Space.features).

Costs are normalised per task group, so rows from several tasks (or devices) can be mixed:
``throughput`` is best/cost within the group (1 for the fastest, 0 for failures) and
``log_cost`` is log(cost / best) within the group (failures get a penalty above the slowest).
Both read a cost of 0 through ``positive_costs``, which every ratio or log of costs goes through.
"""

from __future__ import annotations

import numpy as np


def _groups(y: np.ndarray, groups: np.ndarray | None) -> np.ndarray:
    return np.zeros(len(y), dtype=np.int64) if groups is None else np.unique(np.asarray(groups), return_inverse=True)[1]


#: the share of its group's smallest positive cost that a cost of 0 stands for in ratios and logs
ZERO_COST_SHARE = 0.5


def positive_costs(y, groups: np.ndarray | None = None) -> np.ndarray:
    """The costs ``y`` (each >= 0, failures inf or NaN) as floats that a ratio or a log can use: each 0
    becomes ``ZERO_COST_SHARE`` (half) of the smallest positive cost of its group, or 1.0 in a group
    whose successes are all 0; positive costs and failures come back unchanged.

    A 0 is the best a cost can be (an error metric at its optimum), so it must stay below every positive
    cost, and finitely so: cost/0 and log(0) are not numbers a ranking or a regression can use. Half the
    smallest positive cost puts it log 2 below that cost: on a metric that steps 0, d, 2d, ... the 0 is as
    far below d as d is below 2d, clearly the best without a gap that would outweigh the other targets of
    a regression on log cost. Where every success of a group is 0 they are equal, and any positive value
    gives them the ratios (1) and logs (0) of equals."""
    y = np.array(y, dtype=float)
    zero = y == 0
    if not zero.any():
        return y
    g = _groups(y, groups)
    positive = np.isfinite(y) & (y > 0)
    for gi in np.unique(g[zero]):
        m = g == gi
        y[m & zero] = y[m & positive].min() * ZERO_COST_SHARE if (m & positive).any() else 1.0
    return y


def throughput(y: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """best/cost per group, in [0, 1] (a cost of 0 is 1, see ``positive_costs``); failures (inf) are 0."""
    y = positive_costs(y, groups)
    g = _groups(y, groups)
    out = np.zeros(len(y))
    for gi in np.unique(g):
        m = g == gi
        ok = m & np.isfinite(y) & (y > 0)
        if ok.any():
            out[ok] = y[ok].min() / y[ok]
    return out


def log_cost(y: np.ndarray, groups: np.ndarray | None = None, fail_penalty: float = 1.0) -> np.ndarray:
    """log(cost/best) per group (a cost of 0 is best, see ``positive_costs``); failures get the group's
    worst value + ``fail_penalty``."""
    y = positive_costs(y, groups)
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
