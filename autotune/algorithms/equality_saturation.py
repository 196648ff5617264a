"""Equality saturation (Tensat): every rewrite applied at once in an e-graph, the cheapest point extracted.

Where the tree searches (``taso-queue``, ``backtracking``) evaluate one rewritten point at a time,
this asks the space once for its e-graph (``Space.saturate``): every point reachable by any
sequence of rewrites is held at the same time, and the cheapest by the space's own additive cost
is extracted (on graph spaces: per-op costs, an integer program). It proposes the space's
initial point and the extracted one, then is done (``ask`` returns []): the search's time is one
saturation and one extraction. The runner's measurement of the two is what the campaign compares.

State: whether the saturation ran and the proposals not yet asked for.
"""

from __future__ import annotations

from autotune.algorithms.base import Option, SearchAlgorithm
from autotune.algorithms.support import cand_from_json, cand_to_json
from autotune.types import Candidate, Measurement


class EqualitySaturation(SearchAlgorithm):
    name = "equality-saturation"
    description = "Tensat: all rewrites at once in an e-graph, the cheapest point extracted by the space's cost"
    no_repeats = True
    needs = ("saturate",)
    options = {
        "max_iters": Option(8, "saturation rounds (each applies every rule at every match)"),
        "max_nodes": Option(20000, "stop saturating at this many e-nodes", low=1),
        "time_limit": Option(20.0, "seconds for the saturation, and again for the extraction"),
        "multi_iters": Option(1, "rounds in which rules replacing several outputs at once (merges) apply"),
    }

    def setup(self) -> None:
        self.done = False
        self.seen: set[str] = set()
        self.queue: list[Candidate] = []

    def ask(self, n: int) -> list[Candidate]:
        if not self.done:
            self.done = True
            start = self.space.initial()
            limits = {k: type(o.default)(self.config[k]) for k, o in self.options.items()}
            for c in ([start] if start is not None else []) + self.space.saturate(**limits):
                if c.key not in self.seen:
                    self.seen.add(c.key)
                    self.queue.append(c)
        out, self.queue = self.queue[:n], self.queue[n:]
        return out

    def tell(self, results: list[Measurement]) -> None:
        self.seen.update(m.candidate.key for m in results)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "done": self.done, "queue": [cand_to_json(c) for c in self.queue]}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.done = bool(state.get("done", False))
        self.queue = [cand_from_json(d) for d in state.get("queue", [])]
        self.seen.update(c.key for c in self.queue)
