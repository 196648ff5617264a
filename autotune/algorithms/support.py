"""Small helpers shared by the search algorithms (Space interface only, no KnobSpace internals)."""

from __future__ import annotations

import math

import numpy as np

from autotune.search_spaces.base import Space
from autotune.types import Candidate


def exhausted(space: Space, seen: set[str]) -> bool:
    """Whether every point of a bounded space has been proposed or told."""
    size = space.size()
    return size is not None and len(seen) >= size


def fresh_sample(space: Space, rng: np.random.Generator, seen: set[str], tries: int = 200) -> Candidate | None:
    """A random point not in ``seen`` (None when ``tries`` samples all were known)."""
    for _ in range(tries):
        c = space.sample(rng)
        if c.key not in seen:
            return c
    return None


def start_point(space: Space, rng: np.random.Generator, seen: set[str]) -> Candidate | None:
    """The space's initial (default) point if it is new and valid, else a fresh random one."""
    init = space.initial()
    if init is not None and init.key not in seen and space.contains(init):
        return init
    return fresh_sample(space, rng, seen)


def fresh_walk(space: Space, start: Candidate, rng: np.random.Generator, seen: set[str],
               tries: int = 64) -> Candidate | None:
    """A not-yet-seen point reached by a short random walk of neighbor moves from ``start``.

    The walk gets longer as tries fail, so a fully explored neighbourhood is escaped."""
    c = start
    for t in range(tries):
        c = space.neighbor(c if t % 8 else start, rng)
        if c.key not in seen:
            return c
    return None


def rank_scaled(X: np.ndarray) -> np.ndarray:
    """Each column replaced by the rank of its value among the column's distinct values, scaled to
    [0, 1] (NaN ranks first), so every feature weighs the same in a distance."""
    cols = []
    for j in range(X.shape[1]):
        values, rank = np.unique(np.nan_to_num(X[:, j], nan=-1.0), return_inverse=True)
        cols.append(rank / max(1, len(values) - 1))
    return np.column_stack(cols) if cols else np.zeros((len(X), 0))


def nearest_distance(R: np.ndarray, pool: np.ndarray, near: list[int]) -> np.ndarray:
    """Per row of ``pool`` (indices into ``R``), its L1 distance to its nearest row of ``near`` (inf when
    ``near`` is empty)."""
    if not near:
        return np.full(len(pool), np.inf)
    return np.abs(R[pool][:, None, :] - R[near][None, :, :]).sum(axis=2).min(axis=1)


def farthest(R: np.ndarray, pool: np.ndarray, near: list[int]) -> int:
    """The row of ``pool`` (indices into ``R``) whose L1 distance to its nearest row of ``near`` is
    largest (a maximin pick); the first of ``pool`` when ``near`` is empty."""
    return int(pool[int(np.argmax(nearest_distance(R, pool, near)))])


def cand_to_json(c: Candidate | None):
    return None if c is None else {"payload": c.payload, "key": c.key}


def cand_from_json(d) -> Candidate | None:
    return None if d is None else Candidate(d["payload"], d["key"])


def finite(x: float | None) -> float | None:
    """JSON-safe float (inf/nan become None)."""
    return x if x is not None and math.isfinite(x) else None


def unfinite(x: float | None) -> float:
    return math.inf if x is None else float(x)
