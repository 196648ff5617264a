"""Ranking-quality metrics for cost models: Spearman rank correlation and top-k recall.

Both compare a predicted *score* (higher = faster) with measured *costs* (lower = faster;
``inf`` for failures, which rank last).
"""

from __future__ import annotations

import math

import numpy as np


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Each value's rank from 0, tied values given the mean of the ranks they span (scipy's rankdata
    "average", less one)."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts
    return (first + (counts - 1) / 2.0)[inverse.ravel()]


def spearman(costs: np.ndarray, scores: np.ndarray) -> float:
    """Spearman correlation between -cost and score (1 = perfect ranking); nan below 3 points, where either
    side is constant, or a score is nan. The Pearson correlation of the average ranks, as scipy.stats.spearmanr
    computes it, in numpy: importing scipy.stats takes about a second, which every process that trains a
    model would pay for its first quality figure."""
    costs = np.asarray(costs, dtype=float)
    scores = np.asarray(scores, dtype=float)
    if len(costs) < 3 or np.isnan(scores).any():
        return math.nan
    finite_max = np.max(costs[np.isfinite(costs)], initial=1.0)
    c = np.where(np.isfinite(costs), costs, 2 * finite_max + 1)  # failures tie for last
    if np.all(c == c[0]) or np.all(scores == scores[0]):
        return math.nan
    a, b = _average_ranks(-c), _average_ranks(scores)
    a -= a.mean()
    b -= b.mean()
    return float(np.clip((a @ b) / math.sqrt((a @ a) * (b @ b)), -1.0, 1.0))


def top_k_recall(costs: np.ndarray, scores: np.ndarray, k: int = 10) -> float:
    """Share of the k truly fastest points that are among the k highest-scored ones."""
    costs = np.asarray(costs, dtype=float)
    scores = np.asarray(scores, dtype=float)
    k = min(k, len(costs))
    if k == 0:
        return math.nan
    true_top = set(np.argsort(costs, kind="stable")[:k].tolist())
    pred_top = set(np.argsort(-scores, kind="stable")[:k].tolist())
    return len(true_top & pred_top) / k


def quality(costs: np.ndarray, scores: np.ndarray, k: int = 10) -> dict:
    """Both metrics as a JSON-ready dict (nan becomes None)."""
    def clean(x: float):
        return None if x is None or not math.isfinite(x) else round(float(x), 4)

    return {"spearman": clean(spearman(costs, scores)), "top_k_recall": clean(top_k_recall(costs, scores, k)),
            "k": min(k, len(costs)), "n": len(costs)}


def rank_correlation(x, y) -> float:
    """Spearman rank correlation (ties get their average rank); nan when either side is constant."""
    import pandas as pd

    rx, ry = pd.Series(np.asarray(x, dtype=float)).rank().to_numpy(), pd.Series(np.asarray(y, dtype=float)).rank().to_numpy()
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])
