"""How a model-guided batch is chosen from scored candidates (pure functions on score arrays).

- :func:`member_scores`: every ensemble member's scores of the candidates (of a large listing, the
  members but the first only on the first's best rows);
- :func:`round_robin`: slot j takes the best candidate of ensemble member ``first + j``, a Thompson-like
  choice that spreads a batch over what the members disagree on (one member: the top n);
- :func:`far_picks`: of the best-scored candidates, each pick the farthest (per-feature rank) from every
  point seen and every pick before it, to leave a plateau the model keeps proposing around.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from autotune.algorithms.support import nearest_distance
from autotune.cost_models.base import CostModel

SCREEN_ROWS = 20_000  # rows from which the ensemble's other members score only the first member's best
SCREEN_KEEP = 10_000  # how many of them


def member_scores(model: CostModel, X: np.ndarray, screen: bool = False) -> np.ndarray:
    """Scores per ensemble member (members x rows); one row for a plain model.

    ``screen`` (a listing of the space, scored at every retrain): from ``SCREEN_ROWS`` rows on, the first
    member scores every row and the others only its ``SCREEN_KEEP`` best. A batch takes each member's best
    few and the far picks the mean's best 256 (``stall_pool``); on the synthetic spaces measured those lay
    among the first member's best 10,000 (the members are fitted on 80% samples of the same rows, so they
    agree on the top). For every other member the other rows get the first member's score shifted below
    that member's every screened score, so they rank last and in the first member's order. That scores
    N + 70,000 of the 8 N rows x members of N rows: a fifth at 95,000 points, a third at 40,000
    (docs/benchmarks.md, on spaces above 20,000 points). Screening needs an ensemble model with a
    ``members`` count and ``predict_members(X, members)`` taking a slice of them (``XGBCostModel``)."""
    if not hasattr(model, "predict_members"):
        return model.predict(X)[None, :]
    size = int(getattr(model, "members", 1)) if screen else 1
    if len(X) < max(SCREEN_ROWS, SCREEN_KEEP + 1) or size <= 1:
        return np.atleast_2d(model.predict_members(X))
    first = model.predict_members(X, slice(0, 1))[0]
    top = np.argpartition(-first, SCREEN_KEEP)[:SCREEN_KEEP]
    rest = np.ones(len(X), dtype=bool)
    rest[top] = False
    screened = model.predict_members(X[top], slice(1, size))
    out = np.empty((size, len(X)))
    out[0] = first
    out[1:, top] = screened
    out[1:, rest] = first[rest] - (np.nanmax(first[rest]) - np.nanmin(screened) + 1.0)
    return out


def first_member_scores(model: CostModel, X: np.ndarray) -> np.ndarray:
    """The first ensemble member's scores of the rows (a plain model's own): what the inner search of a
    large space is told, one booster call per step instead of one per member."""
    if not hasattr(model, "predict_members"):
        return model.predict(X)
    return model.predict_members(X, slice(0, 1))[0]


def best_first(row: np.ndarray, k: int) -> np.ndarray:
    """Indices of at least the ``k`` highest scores of ``row``, highest first, ties by index (the
    order of a stable argsort of -row, without sorting the whole row)."""
    if k >= len(row):
        return np.argsort(-row, kind="stable")
    threshold = np.partition(row, len(row) - k)[len(row) - k]
    top = np.flatnonzero(row >= threshold)  # every tie of the k-th score too
    return top[np.argsort(-row[top], kind="stable")]


def round_robin(scores: np.ndarray, n: int, first: int = 0) -> list[int]:
    """Columns of ``scores`` (members x candidates) for ``n`` slots: slot j takes the best-scored
    candidate of member first + j not taken yet; one member = its top n."""
    chosen: list[int] = []
    if scores.shape[1] == 0 or n <= 0:  # e.g. every model slot went to far picks
        return chosen
    orders = [best_first(row, 2 * n) for row in scores]  # a member is passed over at most n times
    pos = [0] * len(orders)
    taken: set[int] = set()
    while len(chosen) < min(n, scores.shape[1]):
        m = (first + len(chosen)) % len(orders)
        while int(orders[m][pos[m]]) in taken:
            pos[m] += 1
        i = int(orders[m][pos[m]])
        taken.add(i)
        chosen.append(i)
    return chosen


def far_picks(ranked: np.ndarray, row: Callable[[int], int], mean: np.ndarray, n: int, pool_size: int,
              near: list[int], chosen: list[int]) -> list[int]:
    """Up to ``n`` candidates (indices of ``mean``; ``row(i)``: candidate i's row of ``ranked``), each of
    the ``pool_size`` best ``mean``-scored ones not in ``chosen`` the farthest from the rows ``near``,
    from the chosen ones and from every pick before it."""
    if n <= 0 or len(mean) == 0:
        return []
    taken = set(chosen)
    pool = [int(i) for i in best_first(mean, pool_size + len(taken)) if int(i) not in taken][:pool_size]
    picked = np.array([row(i) for i in pool], dtype=int)
    dist = nearest_distance(ranked, picked, near + [row(i) for i in chosen])  # updated with each pick
    out: list[int] = []
    for _ in range(min(n, len(pool))):
        k = int(np.argmax(dist))
        out.append(pool[k])
        dist = np.minimum(dist, nearest_distance(ranked, picked, [int(picked[k])]))
        dist[k] = -np.inf
    return out
