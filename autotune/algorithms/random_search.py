"""Uniform random search without replacement: the reference every algorithm is compared with."""

from __future__ import annotations

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
        # an indexable space is walked in a random permutation: exact sampling without replacement
        self.perm = self.rng.permutation(size) if size is not None and hasattr(self.space, "point") else None

    def ask(self, n: int) -> list[Candidate]:
        out: list[Candidate] = []
        if self.perm is not None:
            while len(out) < n and self.pos < len(self.perm):
                c = self.space.point(int(self.perm[self.pos]))
                self.pos += 1
                if c.key not in self.seen:
                    self.seen.add(c.key)
                    out.append(c)
            return out
        misses = 0
        while len(out) < n and misses < 1000:
            c = self.space.sample(self.rng)
            if c.key in self.seen:
                misses += 1
                continue
            misses = 0
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
