"""Steady-state evolutionary search: tournament selection, ``Space.crossover`` + ``Space.neighbor``
mutation, elitism, and never a known point proposed again.

The population is the ``population`` best distinct points told so far (failures excluded), so
the elite always survives and the population is a pure function of the history (ties broken by
key), which makes a resumed search identical. Until ``init`` points were told, proposals are
random samples (the space's initial point first, when it has one). Each child: two parents by
tournament of size ``tournament``; crossover with probability ``crossover_rate`` (else a copy of
the first parent), then a neighbor mutation with probability ``mutation_rate``; a child already
seen is mutated further (a short random walk) until it is new, else replaced by a random sample.
Uses only the Space interface (sample, neighbor, crossover, initial, contains, size).
"""

from __future__ import annotations

import bisect

from autotune.algorithms.base import Option, SearchAlgorithm
from autotune.algorithms.support import exhausted, fresh_sample, fresh_walk, start_point
from autotune.types import Candidate, Measurement


class Evolutionary(SearchAlgorithm):
    name = "evolutionary"
    description = "steady-state genetic search: tournament selection, crossover, neighbor mutation, elitism"
    no_repeats = True
    needs = ("sample", "neighbor", "crossover")
    options = {
        "population": Option(32, "population size (the best distinct points told so far)", low=1),
        "init": Option(16, "random points proposed before breeding starts"),
        "tournament": Option(3, "tournament size for parent selection", low=1),
        "crossover_rate": Option(0.8, "probability that a child is a crossover of two parents", high=1),
        "mutation_rate": Option(0.5, "probability that a child gets a neighbor mutation", high=1),
    }

    def setup(self) -> None:
        self.seen: set[str] = set()
        self.pending: list[str] = []
        self.told = 0
        self.pop: list[tuple[float, str, Candidate]] = []  # sorted (cost, key, candidate)

    def _select(self) -> Candidate:
        k = min(int(self.config["tournament"]), len(self.pop))
        idx = self.rng.choice(len(self.pop), size=k, replace=False)
        return self.pop[int(min(idx))][2]  # the population is sorted: the smallest index wins

    def _child(self) -> Candidate | None:
        space, rng = self.space, self.rng
        if self.told + len(self.pending) < int(self.config["init"]) or len(self.pop) < 2:
            return start_point(space, rng, self.seen)
        a = self._select()
        child = a
        if rng.random() < float(self.config["crossover_rate"]):
            child = space.crossover(a, self._select(), rng)
        if rng.random() < float(self.config["mutation_rate"]) or child.key in self.seen:
            child = space.neighbor(child, rng)
        if child.key in self.seen:
            child = fresh_walk(space, child, rng, self.seen)
        return child if child is not None else fresh_sample(space, rng, self.seen)

    def ask(self, n: int) -> list[Candidate]:
        out: list[Candidate] = []
        while len(out) < n and not exhausted(self.space, self.seen):
            c = self._child()
            if c is None:
                break
            self.seen.add(c.key)
            self.pending.append(c.key)
            out.append(c)
        return out

    def tell(self, results: list[Measurement]) -> None:
        size = int(self.config["population"])
        members = {key for _, key, _ in self.pop}
        done = set()
        for m in results:
            key = m.candidate.key
            done.add(key)
            if key not in self.seen:
                self.seen.add(key)
            self.told += 1
            if not m.ok or key in members:
                continue
            entry = (m.cost, key, m.candidate)
            if len(self.pop) < size or entry[:2] < self.pop[-1][:2]:
                bisect.insort(self.pop, entry, key=lambda e: e[:2])
                members.add(key)
                if len(self.pop) > size:
                    members.discard(self.pop.pop()[1])
        self.pending = [k for k in self.pending if k not in done]

    def state_dict(self) -> dict:
        return {**super().state_dict(), "pending": list(self.pending)}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.pending = list(state.get("pending", []))
        self.seen.update(self.pending)
