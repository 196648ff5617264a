"""TASO's cost-ordered queue over complete points whose children are rewrites of them.

A priority queue of told candidates ordered by cost; ``ask`` pops the cheapest one not
yet expanded and proposes its children not seen before; ``tell`` queues every OK
candidate whose cost is below ``alpha`` times the best so far (alpha > 1 lets the search
pass through slightly worse graphs, e.g. enlarging a kernel before a merge). The search
starts from ``space.initial()`` and ends (``ask`` returns []) when the queue is empty.

It needs a space whose ``children`` of a point are complete points (``rewrites``: graph
rewrites); a knob space, whose children are the partial points of a tree, is refused when
the search is bound to it (``backtracking`` searches that tree). Compared with
``backtracking``, it makes no rollouts and keeps no frontier limit, which on graph spaces
evaluates several times more graphs per second.

State: what ``tell`` rebuilds from the history (the queue, the best cost) is not stored;
the state holds which queue entries were popped (by their push number), the children of
the expanded node not proposed yet, and the rng. ``load_state_dict`` after ``bind`` with
the same history gives back exactly the queue of the interrupted search.
"""

from __future__ import annotations

import heapq
from typing import ClassVar

from autotune.algorithms.base import Option, SearchAlgorithm
from autotune.algorithms.support import cand_from_json, cand_to_json
from autotune.types import Candidate, Measurement


class TasoQueue(SearchAlgorithm):
    name = "taso-queue"
    description = "TASO's cost-ordered queue of rewrites with alpha relaxation (spaces whose children are complete points)"
    needs = ("rewrites",)
    no_repeats = True
    options: ClassVar[dict[str, Option]] = {
        "alpha": Option(1.05, "queue candidates costing less than alpha x the best so far", low=1)}

    def setup(self) -> None:
        self.seen: set[str] = set()
        self.queue: list[tuple[float, int, Candidate]] = []
        self.pending: list[Candidate] = []  # children of the expanded node not proposed yet, next last
        self.popped: list[int] = []  # push numbers of the queue entries expanded so far
        self.best = float("inf")
        self.pushes = 0
        self.started = False

    def _expand(self, node: Candidate) -> None:
        kids = []
        for k in self.space.children(node):
            if k.key not in self.seen and self.space.is_complete(k):  # two rewrites giving one graph: one point
                self.seen.add(k.key)
                kids.append(k)
        kids.reverse()
        self.pending = kids

    def ask(self, n: int) -> list[Candidate]:
        out: list[Candidate] = []
        if n <= 0:
            return out
        if not self.started:
            self.started = True
            root = self.space.initial()
            if root is not None and root.key not in self.seen and self.space.contains(root):
                self.seen.add(root.key)
                return [root]
        while len(out) < n:
            if self.pending:
                out.append(self.pending.pop())
                continue
            if out or not self.queue:
                break  # costs of the proposals decide what is expanded next
            _, i, node = heapq.heappop(self.queue)
            self.popped.append(i)
            self._expand(node)
        return out

    def tell(self, results: list[Measurement]) -> None:
        alpha = float(self.config["alpha"])
        for m in results:
            self.seen.add(m.candidate.key)
            if not m.ok:
                continue
            if m.cost < alpha * self.best:
                heapq.heappush(self.queue, (m.cost, self.pushes, m.candidate))
                self.pushes += 1
            self.best = min(self.best, m.cost)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "started": self.started, "popped": list(self.popped),
                "pending": [cand_to_json(c) for c in self.pending]}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.started = bool(state.get("started", self.started))
        self.popped = [int(i) for i in state.get("popped", [])]
        gone = set(self.popped)
        self.queue = [e for e in self.queue if e[1] not in gone]
        heapq.heapify(self.queue)
        self.pending = [cand_from_json(d) for d in state.get("pending", [])]
        self.seen.update(c.key for c in self.pending)
