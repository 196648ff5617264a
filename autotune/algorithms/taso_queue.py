"""TASO's cost-based backtracking search as an ask/tell algorithm over Space.children.

A priority queue of told candidates ordered by cost; ``ask`` pops the cheapest
unexpanded one and proposes its unseen children; ``tell`` queues every candidate
whose cost is below ``alpha`` times the best so far (alpha > 1 lets the search pass
through slightly worse graphs, e.g. enlarging a kernel before a merge).
Used when the engine's registry has no "backtracking" algorithm.
"""

from __future__ import annotations

import heapq
from typing import ClassVar

from autotune.algorithms.base import Option, SearchAlgorithm
from autotune.types import Candidate, Measurement


class Backtracking(SearchAlgorithm):
    name = "backtracking"
    description = "TASO cost-based backtracking with alpha relaxation over Space.children"
    needs = ("children",)
    no_repeats = True
    options: ClassVar[dict[str, Option]] = {
        "alpha": Option(1.05, "queue candidates costing up to alpha x the best so far")}

    def setup(self) -> None:
        self.seen: set[str] = set()
        self.queue: list[tuple[float, int, Candidate]] = []
        self.pending: list[Candidate] = []
        self.best = float("inf")
        self.n = 0
        self.started = False

    def ask(self, n: int) -> list[Candidate]:
        if not self.started:
            self.started = True
            root = self.space.initial()
            if root is not None and root.key not in self.seen:
                self.seen.add(root.key)
                return [root]
        out: list[Candidate] = []
        while len(out) < n:
            if not self.pending:
                if not self.queue:
                    break
                _, _, c = heapq.heappop(self.queue)
                self.pending = [k for k in self.space.children(c) if k.key not in self.seen]
                for k in self.pending:
                    self.seen.add(k.key)
                self.pending.reverse()
                if not self.pending and out:
                    break
                continue
            out.append(self.pending.pop())
        return out

    def tell(self, results: list[Measurement]) -> None:
        for m in results:
            self.seen.add(m.candidate.key)
            if not m.ok:
                continue
            if m.cost < self.config["alpha"] * self.best:
                self.n += 1
                heapq.heappush(self.queue, (m.cost, self.n, m.candidate))
            self.best = min(self.best, m.cost)
