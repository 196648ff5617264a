"""Cost-based backtracking over ``Space.children`` (TASO's best-first search with alpha relaxation).

Nodes are points of a tree search: ``children(None)`` gives the root's children, and a node is
measured only when ``space.is_complete`` says so. On knob spaces a child fixes the next knob;
any later space that offers ``children`` works the same way.

**Where a partial node's cost comes from.** A partial point cannot be measured, so each partial
node, when it enters the frontier, gets one *rollout*: a random descent through ``children``
to a complete point, which is proposed for measurement (or, when already known, costs nothing).
A node's cost is the best cost of the complete points linked to it (its rollouts, its
complete children, itself when complete), so it is a measured upper bound of its subtree's
best. Complete nodes enter the frontier too: on spaces where every point is complete and
``children`` are rewrites of it (graph substitutions, as in TASO), the search walks the
rewrites of the cheapest graphs. Under
``ModelGuided`` the "measurements" the inner search sees are the cost model's predictions,
so there a node's cost is the model's predicted best rollout: the model guides the tree.

**Search.** Best-first: the frontier node with the lowest cost is expanded when its cost is
at most ``alpha`` times the best cost found (TASO's relaxation; the others wait); its
complete children are proposed directly, its partial children enter the frontier with a
rollout each. The frontier keeps the ``beam`` lowest-cost nodes (nodes still waiting for
their rollout's result are kept). When no node is within alpha of the best, the lowest-cost
node gets one more rollout (a single rollout is a noisy cost), which backtracks to it once a
rollout finds a cost within alpha. After ``max_nodes`` expansions, or when the frontier is
empty, proposals are random samples, so ``ask`` only returns [] when the space is exhausted.
"""

from __future__ import annotations

import math

from autotune.algorithms.base import Option, SearchAlgorithm
from autotune.algorithms.support import cand_from_json, cand_to_json, exhausted, fresh_sample
from autotune.types import Candidate, Measurement


class Backtracking(SearchAlgorithm):
    name = "backtracking"
    description = "TASO-style best-first search over children with alpha relaxation, beam and node budget"
    no_repeats = True
    needs = ("sample", "children")
    options = {
        "alpha": Option(1.1, "expand a node when its cost is below alpha * best cost", low=1),
        "beam": Option(64, "frontier size: nodes kept, lowest cost first", low=1),
        "max_nodes": Option(10000, "node expansions before falling back to random samples"),
    }

    def setup(self) -> None:
        self.seen: set[str] = set()
        self.pending: list[str] = []
        self.costs: dict[str, float] = {}
        self.best = math.inf
        self.frontier: list[Candidate] = []
        self.links: dict[str, list[str]] = {}
        self.expanded = 0
        self.started = False
        self.queue: list[Candidate] = []  # proposals made by an expansion, not yet asked for

    # -- node costs ------------------------------------------------------------------
    def _cost(self, node: Candidate) -> float | None:
        known = [self.costs[k] for k in self.links.get(node.key, ()) if k in self.costs]
        return min(known) if known else None

    def _rollout(self, node: Candidate) -> Candidate | None:
        c = node
        for _ in range(10_000):
            if self.space.is_complete(c):
                return c
            kids = list(self.space.children(c))
            if not kids:
                return None
            c = kids[int(self.rng.integers(len(kids)))]
        return None

    def _propose(self, c: Candidate) -> None:
        if c.key not in self.seen and self.space.contains(c):
            self.seen.add(c.key)
            self.queue.append(c)

    def _expand(self, node: Candidate | None) -> None:
        self.expanded += 1
        for child in self.space.children(node):
            if self.space.is_complete(child):
                if node is not None:
                    self.links.setdefault(node.key, []).append(child.key)
                if next(iter(self.space.children(child)), None) is not None:
                    # a complete point with children of its own (graph rewrites) is a node too
                    self.links.setdefault(child.key, []).append(child.key)
                    self.frontier.append(child)
                self._propose(child)
                continue
            leaf = self._rollout(child)
            if leaf is not None:
                self.frontier.append(child)
                self.links.setdefault(child.key, []).append(leaf.key)
                self._propose(leaf)

    def _pop(self) -> Candidate | None:
        """The lowest-cost frontier node within alpha of the best (None if there is none); the
        frontier is trimmed to the ``beam`` lowest-cost nodes (nodes waiting for results stay)."""
        scored = [(self._cost(c), i, c) for i, c in enumerate(self.frontier)]
        known = sorted(((s, i, c) for s, i, c in scored if s is not None), key=lambda t: (t[0], t[1]))
        known = known[: max(1, int(self.config["beam"]))]
        waiting = [c for s, _, c in scored if s is None]
        limit = float(self.config["alpha"]) * self.best if math.isfinite(self.best) else math.inf
        if known and known[0][0] <= limit:
            self.frontier = [c for _, _, c in known[1:]] + waiting
            return known[0][2]
        self.frontier = [c for _, _, c in known] + waiting
        return None

    def _refine(self) -> bool:
        """No node is within alpha of the best: one more rollout from the lowest-cost node refines
        its cost (a single rollout is a noisy estimate); a node without new completions is dropped."""
        while self.frontier:
            scored = [(s, i) for i, c in enumerate(self.frontier) if (s := self._cost(c)) is not None]
            if not scored:
                return False
            _, i = min(scored)
            node = self.frontier[i]
            for _ in range(8):
                leaf = self._rollout(node)
                if leaf is not None and leaf.key not in self.seen and self.space.contains(leaf):
                    self.links[node.key].append(leaf.key)
                    self._propose(leaf)
                    return True
            self.frontier.pop(i)
        return False

    # -- ask / tell ------------------------------------------------------------------
    def ask(self, n: int) -> list[Candidate]:
        out: list[Candidate] = []
        if not self.started:
            self.started = True
            self._expand(None)
        while len(out) < n:
            if self.queue:
                out.append(self.queue.pop(0))
                continue
            if exhausted(self.space, self.seen):
                break
            node = self._pop() if self.expanded < int(self.config["max_nodes"]) else None
            if node is not None:
                self._expand(node)
                continue
            if self.expanded < int(self.config["max_nodes"]) and self._refine():
                continue
            if out and any(self._cost(c) is None for c in self.frontier):
                break  # wait for the rollouts' results before expanding further
            c = fresh_sample(self.space, self.rng, self.seen)
            if c is None:
                break
            self.seen.add(c.key)
            out.append(c)
        self.pending.extend(c.key for c in out)
        return out

    def tell(self, results: list[Measurement]) -> None:
        done = set()
        for m in results:
            self.seen.add(m.candidate.key)
            self.costs[m.candidate.key] = m.objective
            self.best = min(self.best, m.objective)
            done.add(m.candidate.key)
        self.pending = [k for k in self.pending if k not in done]

    # -- state -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {**super().state_dict(), "pending": list(self.pending), "started": self.started,
                "expanded": self.expanded, "frontier": [cand_to_json(c) for c in self.frontier],
                "links": self.links, "queue": [cand_to_json(c) for c in self.queue]}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.pending = list(state.get("pending", []))
        self.seen.update(self.pending)
        self.started = bool(state.get("started", False))
        self.expanded = int(state.get("expanded", 0))
        self.frontier = [cand_from_json(d) for d in state.get("frontier", [])]
        self.links = {k: list(v) for k, v in state.get("links", {}).items()}
        self.queue = [cand_from_json(d) for d in state.get("queue", [])]
        self.seen.update(c.key for c in self.queue)
