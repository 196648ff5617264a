"""Exhaustive search in the space's enumeration order."""

from __future__ import annotations

from autotune.algorithms.base import SearchAlgorithm
from autotune.types import Candidate, Measurement


class GridSearch(SearchAlgorithm):
    name = "grid"
    description = "every valid point, in enumeration order"
    no_repeats = True
    needs = ("enumerate",)

    def setup(self) -> None:
        self.pos = 0
        self.seen: set[str] = set()
        self._iter = None

    def _next(self) -> Candidate | None:
        if hasattr(self.space, "point"):
            size = self.space.size()
            if size is not None:
                if self.pos >= size:
                    return None
                c = self.space.point(self.pos)
                self.pos += 1
                return c
        if self._iter is None:
            self._iter = iter(self.space.enumerate())
            for _ in range(self.pos):
                next(self._iter, None)
        c = next(self._iter, None)
        if c is not None:
            self.pos += 1
        return c

    def ask(self, n: int) -> list[Candidate]:
        out: list[Candidate] = []
        while len(out) < n:
            c = self._next()
            if c is None:
                break
            if c.key not in self.seen:
                self.seen.add(c.key)
                out.append(c)
        return out

    def tell(self, results: list[Measurement]) -> None:
        self.seen.update(m.candidate.key for m in results)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "pos": self.pos}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.pos = int(state.get("pos", self.pos))
        self._iter = None
