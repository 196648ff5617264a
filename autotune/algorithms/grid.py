"""Exhaustive search in the space's enumeration order."""

from __future__ import annotations

from itertools import islice

import numpy as np

from autotune.algorithms.random_search import RandomSearch
from autotune.types import Candidate


class GridSearch(RandomSearch):
    name = "grid"
    description = "every valid point, in enumeration order"
    needs = ("enumerate",)

    def _order(self, size: int) -> np.ndarray:
        return np.arange(size)

    def _ask_unindexed(self, n: int, out: list[Candidate]) -> list[Candidate]:
        # a space without point(i) is enumerated afresh from the saved position (state stays one integer)
        for c in islice(self.space.enumerate(), self.pos, None):
            self.pos += 1
            if self._unseen(c, out) and len(out) >= n:
                break
        return out
