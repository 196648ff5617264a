"""GraphSpace: candidates are rule applications from the input graph, keyed by the result's structural hash."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator

import numpy as np
from autotune.runners.base import Runner
from autotune.search_spaces.base import Space
from autotune.search_spaces.graphs import ops
from autotune.search_spaces.graphs.builtin_rules import builtin_rules
from autotune.search_spaces.graphs.ir import Graph

from autotune.errors import UsageError
from autotune.types import Candidate, Device, Measurement, Status, Task

FEATURE_OPS = sorted(o for o in ops.OPS if not o.startswith("_")) + ["<opaque>"]


class GraphSpace(Space):
    """Payload: ``[[rule_name, [matched tensor names...]], ...]`` applied in order to the input graph.

    ``children`` = all applications of all rules at all matches; ``neighbor`` = one
    random application; ``crossover`` replays the other parent's applications that
    still apply; ``sample`` = a short random walk from the input graph.
    """

    def __init__(self, graph: Graph, rules=None, cost_model=None, max_walk: int = 6, cache_size: int = 4096):
        self.root = graph
        self.rules = list(rules) if rules is not None else builtin_rules()
        self.by_name = {r.name: r for r in self.rules}
        self.cost_model = cost_model
        self.max_walk = max_walk
        self.graphs: OrderedDict[str, Graph] = OrderedDict()
        self.cache_size = cache_size
        self._apps: dict[str, list] = {}
        self.task = Task("graph", graph.name, {"graph": graph.structural_hash(), "rules": sorted(self.by_name)})
        self._remember(graph)

    # -- graphs -------------------------------------------------------------------
    def _remember(self, g: Graph) -> str:
        k = g.structural_hash()
        self.graphs[k] = g
        self.graphs.move_to_end(k)
        while len(self.graphs) > self.cache_size:
            old, _ = self.graphs.popitem(last=False)
            self._apps.pop(old, None)
        return k

    def graph(self, c: Candidate | None) -> Graph:
        if c is None:
            return self.root
        g = self.graphs.get(c.key)
        if g is None:
            g = self.replay(c.payload)
            self._remember(g)
        return g

    def replay(self, payload) -> Graph:
        g = self.root
        for step in payload:
            name, match = step[0], tuple(step[1])
            if name not in self.by_name:
                raise UsageError(f"unknown rule {name!r} in a graph candidate; known: {', '.join(self.by_name)}")
            g2 = self.by_name[name].apply(g, match)
            if g2 is None:
                raise UsageError(f"rule {name!r} does not apply at {list(match)} in this graph")
            g = g2
        return g

    def applications(self, g: Graph) -> list[tuple[str, tuple]]:
        k = g.structural_hash()
        if k not in self._apps:
            self._apps[k] = [(r.name, m) for r in self.rules for m in r.matches(g)]
        return self._apps[k]

    def _apply(self, c: Candidate, g: Graph, app) -> Candidate | None:
        g2 = self.by_name[app[0]].apply(g, app[1])
        if g2 is None:
            return None
        key = self._remember(g2)
        return Candidate(list(c.payload) + [[app[0], list(app[1])]], key)

    # -- Space moves -----------------------------------------------------------
    def initial(self) -> Candidate:
        return Candidate([], self.root.structural_hash())

    def candidate(self, config) -> Candidate:
        try:
            g = self.replay(config)
        except (TypeError, IndexError) as exc:
            raise UsageError(f"a graph candidate is a list of [rule, [tensors]] steps: {exc}") from None
        return Candidate(list(config), self._remember(g))

    def contains(self, c: Candidate) -> bool:
        try:
            return self.graph(c).structural_hash() == c.key
        except UsageError:
            return False

    def children(self, c: Candidate | None) -> Iterator[Candidate]:
        c = c if c is not None else self.initial()
        g = self.graph(c)
        for app in self.applications(g):
            child = self._apply(c, g, app)
            if child is not None:
                yield child

    def neighbor(self, c: Candidate, rng: np.random.Generator) -> Candidate:
        g = self.graph(c)
        apps = list(self.applications(g))
        while apps:
            child = self._apply(c, g, apps.pop(int(rng.integers(len(apps)))))
            if child is not None:
                return child
        return c

    def sample(self, rng: np.random.Generator) -> Candidate:
        c = self.initial()
        for _ in range(int(rng.integers(1, self.max_walk + 1))):
            c = self.neighbor(c, rng)
        return c

    def crossover(self, a: Candidate, b: Candidate, rng: np.random.Generator) -> Candidate:
        c, g = a, self.graph(a)
        for step in b.payload:
            if rng.random() < 0.5:
                child = self._apply(c, g, (step[0], tuple(step[1])))
                if child is not None:
                    c, g = child, self.graph(child)
        return c

    def features(self, cs: list[Candidate]) -> np.ndarray:
        rows = []
        for c in cs:
            g = self.graph(c)
            counts = dict.fromkeys(FEATURE_OPS, 0.0)
            flops = 0.0
            for n in g.runtime_nodes():
                counts[n.op if n.op in counts else "<opaque>"] += 1
                if ops.is_known(n.op):
                    flops += ops.flops(n.op, [g.shape[t] for t in n.inputs if t], [g.shape[t] for t in n.outputs], n.a)
            rows.append(list(counts.values()) + [len(g.runtime_nodes()), math.log1p(flops), len(c.payload)])
        return np.asarray(rows, dtype=float).reshape(len(cs), len(FEATURE_OPS) + 3)

    def cost(self, c: Candidate) -> float:
        if self.cost_model is None:
            raise UsageError("this GraphSpace has no cost model")
        return self.cost_model.graph_cost(self.graph(c))


class GraphCostRunner(Runner):
    """Evaluates graph candidates by their predicted cost (sum of per-op costs): cheap, used inside search."""

    def __init__(self, space: GraphSpace):
        self.space = space
        self.device = Device("graph-op-cost-sum", "simulated", {})

    def measure(self, task, candidates):
        out = []
        for c in candidates:
            try:
                cost = self.space.cost(c)
                out.append(Measurement(c, Status.OK, [cost], cost, meta={"predicted": True}))
            except UsageError as exc:
                out.append(Measurement(c, Status.INVALID, error=str(exc)))
        return out
