"""GraphSpace: candidates are rule applications from the input graph, keyed by the result's structural hash."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator

import numpy as np

from autotune.errors import UsageError
from autotune.search_spaces.base import Space
from autotune.search_spaces.graphs import ops
from autotune.search_spaces.graphs.builtin_rules import builtin_rules
from autotune.search_spaces.graphs.cost import roofline_cost
from autotune.search_spaces.graphs.ir import Graph, Node, TensorAttr
from autotune.types import Candidate, Task, stable_key

FEATURE_OPS = sorted(o for o in ops.OPS if not o.startswith("_")) + ["<opaque>"]


class GraphSpace(Space):
    """Payload: ``[[rule_name, [matched tensor names...]], ...]`` applied in order to the input graph.

    The key of a candidate is the structural hash of the graph it produces, so rewrite
    orders that give the same graph are one point. ``children`` = all applications of all
    rules at all matches; ``neighbor`` = one random application; ``crossover`` replays the
    other parent's applications that still apply; ``sample`` = a short random walk from
    the input graph. The task is kind "graph", named ``name`` (default: the graph's), with
    the graph's content hash and the rule set's hash as parameters. Costs come from a
    runner (``autotune.runners.graph.GraphCostRunner``).
    """

    def __init__(self, graph: Graph, rules=None, max_walk: int = 6, cache_size: int = 4096, name: str | None = None):
        self.root = graph
        self.rules = list(rules) if rules is not None else builtin_rules()
        self.by_name = {r.name: r for r in self.rules}
        if len(self.by_name) != len(self.rules):
            twice = sorted({r.name for r in self.rules if sum(q.name == r.name for q in self.rules) > 1})
            raise UsageError(f"graph rule names must be unique (they identify rewrites); given twice: {', '.join(twice)}")
        self.max_walk = max_walk
        #: op cost (graph view, node) -> seconds and whether fused ops are free, for ``saturate``'s extraction
        self.op_cost, self.fusion = None, True
        self.saturation: dict = {}
        self.graphs: OrderedDict[str, Graph] = OrderedDict()
        self.cache_size = cache_size
        self._apps: dict[str, list] = {}
        rules_key = stable_key([[r.name, getattr(r, "key", "")] for r in self.rules])  # pattern rules: content
        # the input shapes and types too: the same model at another batch (an --input-shape, a re-export) is
        # another measurement, not the campaign of the first resumed
        inputs = {k: [[d if d is None or isinstance(d, str) else int(d) for d in shape], str(dtype)]
                  for k, (shape, dtype) in sorted(graph.inputs.items())}
        self.task = Task("graph", name or graph.name, {"graph": graph.content_hash(), "inputs": inputs,
                                                       "rules": rules_key, "n_rules": len(self.rules)})
        self._remember(self._path([]), graph)

    # -- graphs -------------------------------------------------------------------
    # Graphs are cached by rewrite sequence, not by structural hash: two sequences reaching one
    # structure may name their tensors differently, and a step appended to a sequence must match
    # the tensor names of that sequence's own graph.
    @staticmethod
    def _path(payload) -> str:
        return stable_key(payload)

    def _remember(self, path: str, g: Graph) -> None:
        self.graphs[path] = g
        self.graphs.move_to_end(path)
        while len(self.graphs) > self.cache_size:
            old, _ = self.graphs.popitem(last=False)
            self._apps.pop(old, None)

    def graph(self, c: Candidate | None) -> Graph:
        """The graph a candidate's rewrite sequence produces (replayed when not cached)."""
        if c is None:
            return self.root
        path = self._path(c.payload)
        g = self.graphs.get(path)
        if g is None:
            g = self.replay(c.payload)
            self._remember(path, g)
        else:
            self.graphs.move_to_end(path)
        return g

    def replay(self, payload) -> Graph:
        g = self.root
        if payload and isinstance(payload[0], dict):  # a graph given whole (an e-graph's extraction)
            g, payload = graph_from_json(self.root, payload[0]), payload[1:]
        for step in payload:
            name, match = step[0], tuple(step[1])
            if name not in self.by_name:
                raise UsageError(f"unknown rule {name!r} in a graph candidate; known: {', '.join(self.by_name)}")
            g2 = self.by_name[name].apply(g, match)
            if g2 is None:
                raise UsageError(f"rule {name!r} does not apply at {list(match)} in this graph")
            g = g2
        return g

    def _applications(self, c: Candidate, g: Graph) -> list[tuple[str, tuple]]:
        path = self._path(c.payload)
        if path not in self._apps:
            self._apps[path] = [(r.name, m) for r in self.rules for m in r.matches(g)]
        return self._apps[path]

    def _apply(self, c: Candidate, g: Graph, app) -> Candidate | None:
        g2 = self.by_name[app[0]].apply(g, app[1])
        if g2 is None:
            return None
        payload = list(c.payload) + [[app[0], list(app[1])]]
        self._remember(self._path(payload), g2)
        return Candidate(payload, g2.structural_hash())

    # -- Space moves -----------------------------------------------------------
    def initial(self) -> Candidate:
        return Candidate([], self.root.structural_hash())

    def candidate(self, config) -> Candidate:
        try:
            g = self.replay(config)
        except (TypeError, IndexError) as exc:
            raise UsageError(f"a graph candidate is a list of [rule, [tensors]] steps: {exc}") from None
        self._remember(self._path(list(config)), g)
        return Candidate(list(config), g.structural_hash())

    def contains(self, c: Candidate) -> bool:
        try:
            return self.graph(c).structural_hash() == c.key
        except (UsageError, TypeError, IndexError, ValueError):
            return False

    def children(self, c: Candidate | None) -> Iterator[Candidate]:
        c = c if c is not None else self.initial()
        g = self.graph(c)
        for app in self._applications(c, g):
            child = self._apply(c, g, app)
            if child is not None:
                yield child

    def neighbor(self, c: Candidate, rng: np.random.Generator) -> Candidate:
        g = self.graph(c)
        apps = list(self._applications(c, g))
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
            if isinstance(step, list) and rng.random() < 0.5:
                child = self._apply(c, g, (step[0], tuple(step[1])))
                if child is not None:
                    c, g = child, self.graph(child)
        return c

    def saturate(self, max_iters: int = 8, max_nodes: int = 20000, time_limit: float = 20.0,
                 multi_iters: int = 1) -> list[Candidate]:
        """The cheapest graph of the e-graph of every rule application (``egraph.EGraph``: saturation
        limits as there), by ``op_cost`` (the driver sets the op costs it measures; default
        ``cost.roofline_cost``: FLOPs and bytes at nominal rates) with ``fusion``. Its payload is the
        whole graph (``graph_to_json``). The saturation's and extraction's figures are in
        ``self.saturation``."""
        from autotune.search_spaces.graphs.egraph import EGraph

        eg = EGraph(self.root)
        info = eg.saturate(self.rules, max_iters=max_iters, max_nodes=max_nodes, time_limit=time_limit,
                           multi_iters=multi_iters)
        g, more = eg.extract(self.op_cost or roofline_cost, fusion=self.fusion, time_limit=time_limit)
        self.saturation = {**info, **more}
        payload = [graph_to_json(g)]
        self._remember(self._path(payload), g)
        return [Candidate(payload, g.structural_hash())]

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


def _attr_to_json(v):
    if isinstance(v, TensorAttr):
        return {"tensor": [v.dtype, list(v.shape), list(v.values)]}
    if isinstance(v, tuple):
        return [_attr_to_json(x) for x in v]
    return v


def _attr_from_json(v):
    if isinstance(v, dict) and "tensor" in v:
        dtype, shape, values = v["tensor"]
        return TensorAttr(dtype, tuple(shape), tuple(values))
    if isinstance(v, list):
        return tuple(_attr_from_json(x) for x in v)
    return v


def graph_to_json(g: Graph) -> dict:
    """A graph's nodes as JSON (inputs, outputs and weights are the space's root graph's)."""
    return {"graph": [[n.op, list(n.inputs), list(n.outputs), {k: _attr_to_json(v) for k, v in n.attrs},
                       [[list(s), d] for s, d in n.fixed], n.domain] for n in g.nodes]}


def graph_from_json(root: Graph, d: dict) -> Graph:
    """The graph of :func:`graph_to_json`'s nodes on ``root``'s inputs, outputs and weights."""
    try:
        nodes = [Node(op, tuple(ins), tuple(outs), tuple(sorted((k, _attr_from_json(v)) for k, v in attrs.items())),
                      tuple((tuple(s), dt) for s, dt in fixed), domain)
                 for op, ins, outs, attrs, fixed, domain in d["graph"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"a whole-graph candidate is {{'graph': [[op, inputs, outputs, attrs, fixed, domain], ...]}}: "
                         f"{exc}") from None
    return Graph(nodes, root.inputs, root.outputs, root.weights, root.name, opset=root.opset, domains=root.domains)
