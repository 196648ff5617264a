"""Uniform random search without replacement: the reference every algorithm is compared with."""

from __future__ import annotations

import numpy as np

from autotune.algorithms.base import SearchAlgorithm
from autotune.types import Candidate, Measurement


class RandomSearch(SearchAlgorithm):
    name = "random"
    description = "uniform random sampling without replacement"
    no_repeats = True

    def setup(self) -> None:
        self.seen: set[str] = set()
        self.pos = 0
        size = self.space.size()
        # an indexable space is walked in a fixed order of its points (for random search, a permutation)
        self.order = self._order(size) if size is not None and hasattr(self.space, "point") else None

    def _order(self, size: int) -> np.ndarray:
        return self.rng.permutation(size)

    def _unseen(self, c: Candidate, out: list[Candidate]) -> bool:
        if c.key in self.seen:
            return False
        self.seen.add(c.key)
        out.append(c)
        return True

    def ask(self, n: int) -> list[Candidate]:
        out: list[Candidate] = []
        if self.order is not None:
            while len(out) < n and self.pos < len(self.order):
                self._unseen(self.space.point(int(self.order[self.pos])), out)
                self.pos += 1
            return out
        return self._ask_unindexed(n, out)

    def _ask_unindexed(self, n: int, out: list[Candidate]) -> list[Candidate]:
        misses = 0
        while len(out) < n and misses < 1000:
            misses = 0 if self._unseen(self.space.sample(self.rng), out) else misses + 1
        return out

    def tell(self, results: list[Measurement]) -> None:
        self.seen.update(m.candidate.key for m in results)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "pos": self.pos}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.pos = int(state.get("pos", self.pos))
