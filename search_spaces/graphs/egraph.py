"""Equality saturation over a graph (Tensat): an e-graph of every rewrite, and the cheapest graph in it.

Tensors are e-classes and ops are e-nodes: an e-node reads e-classes and produces one
e-class per output (Split's outputs are several classes). Applying a rule never removes
anything: it adds the target's e-nodes and *unites* each source output's class with the
target tensor that replaces it, so every graph reachable by any order of rewrites is in
the e-graph at once. Identical e-nodes are stored once (a hash-cons), which is
common-subexpression elimination for free, and uniting classes re-merges the e-nodes that
become identical (congruence).

Rules are the JSON pattern rules of ``rules.py``, matched here against e-nodes instead of
nodes, with the same conditions (shape and weight predicates) and attribute functions; of the
code rules, those with an ``apply_egraph`` hook (the n-ary sibling merges, attention fusion) run
too, the others (CSE is the hash-cons itself) do not.
A rule whose outputs are consumed outside the match still applies (the e-graph keeps both
forms). Saturation stops at a fixed point, after ``max_iters`` rounds, at ``max_nodes``
e-nodes or after ``time_limit`` seconds.

:meth:`EGraph.extract` gives the cheapest graph held (``extraction.py``: an integer
program as in Tensat, a greedy pick when the solver runs out of time).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import numpy as np

from autotune.search_spaces.graphs import ops
from autotune.search_spaces.graphs.ir import Graph, Node
from autotune.search_spaces.graphs.rules import Rule, _zero_weight, bind_node, pattern_inputs

NONE = -1  # an absent optional input


class _ENode:
    __slots__ = ("attrs", "domain", "fixed", "inputs", "op", "outputs")

    def __init__(self, op, attrs, inputs, outputs, fixed=(), domain=""):
        self.op, self.attrs, self.inputs, self.outputs, self.fixed, self.domain = op, attrs, inputs, outputs, fixed, domain

    @property
    def a(self) -> dict:
        return dict(self.attrs)


class _View:
    """What rule conditions and attribute functions read of a graph (shape, weights, order), for e-classes
    named ``"c<id>"``; and the ``op_key`` an op cost is looked up by, and the opset its op is timed at."""

    def __init__(self, eg: EGraph):
        self.shape, self.dtype, self.is_weight, self.weights, self.order = {}, {}, {}, {}, {}
        self.opset = eg.graph.opset
        for c in eg.classes():
            t = eg.name(c)
            self.shape[t], self.dtype[t], self.is_weight[t] = eg.shape[c], eg.dtype[c], eg.is_weight[c]
            self.order[t] = c
            if c in eg.weight_of:
                self.weights[t] = eg.weights[eg.weight_of[c]]

    op_key = Graph.op_key


class EGraph:
    """The e-graph of ``graph``: :meth:`saturate` with rules, :meth:`extract` the cheapest graph."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.weights = graph.weights
        self.parent: list[int] = []
        self.shape: list[tuple] = []
        self.dtype: list[str] = []
        self.is_weight: list[bool] = []
        self.leaf: dict[int, str] = {}  # class -> the graph input or weight it is
        self.weight_of: dict[int, str] = {}
        self.tensor_class: dict[str, int] = {}  # the source graph's tensor names
        self.nodes: list[_ENode] = []
        self.memo: dict[tuple, int] = {}  # (op, attrs, canonical inputs) -> e-node index
        self.applied: set = set()
        self.dropped = 0  # unions refused because the two classes' shapes differ (a wrong rule)
        for t, (shape, dtype) in graph.inputs.items():
            c = self._new_class(tuple(shape), dtype, False)
            self.leaf[c], self.tensor_class[t] = t, c
        for t, w in graph.weights.items():
            c = self._new_class(tuple(w.shape), str(w.dtype), True)
            self.leaf[c], self.weight_of[c], self.tensor_class[t] = t, t, c
        for n in graph.nodes:
            ins = tuple(self.tensor_class[t] if t else NONE for t in n.inputs)
            outs = self._add(n.op, n.attrs, ins, n.fixed, n.domain,
                             [(graph.shape[t], graph.dtype[t], graph.is_weight[t]) for t in n.outputs])
            for t, c in zip(n.outputs, outs):
                self.tensor_class[t] = c
        self.outputs = [self.tensor_class[t] for t in graph.outputs]

    # -- union-find -------------------------------------------------------------------
    def _new_class(self, shape, dtype, weight) -> int:
        self.parent.append(len(self.parent))
        self.shape.append(shape)
        self.dtype.append(dtype)
        self.is_weight.append(weight)
        return len(self.parent) - 1

    def find(self, c: int) -> int:
        if c == NONE:
            return NONE
        root = c
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[c] != root:
            self.parent[c], c = root, self.parent[c]
        return root

    def union(self, a: int, b: int) -> bool:
        a, b = self.find(a), self.find(b)
        if a == b:
            return False
        if self.shape[a] != self.shape[b]:
            self.dropped += 1
            return False
        if b in self.leaf and a not in self.leaf:  # a graph input or weight stays its class's representative
            a, b = b, a
        self.parent[b] = a
        self.is_weight[a] = self.is_weight[a] or self.is_weight[b]
        return True

    def classes(self) -> list[int]:
        return [c for c in range(len(self.parent)) if self.parent[c] == c]

    def name(self, c: int) -> str:
        return f"c{self.find(c)}"

    # -- e-nodes ----------------------------------------------------------------------
    def _add(self, op, attrs, inputs, fixed, domain, outs) -> tuple[int, ...] | None:
        """The output classes of the e-node (op, attrs, inputs), added when new; ``outs`` gives the
        (shape, dtype, is_weight) of each output of a new one, or is a function computing them (called
        only for a new e-node; None from it: not added, None returned)."""
        key = (op, attrs, tuple(self.find(c) for c in inputs))
        if key in self.memo:
            return tuple(self.find(c) for c in self.nodes[self.memo[key]].outputs)
        if callable(outs):
            outs = outs()
            if outs is None:
                return None
        classes = tuple(self._new_class(*o) for o in outs)
        self.memo[key] = len(self.nodes)
        self.nodes.append(_ENode(op, attrs, key[2], classes, fixed, domain))
        return classes

    def add_op(self, op, attrs: dict, inputs) -> tuple[int, ...] | None:
        """The output classes of the e-node ``op(inputs)`` (classes), added with its output shapes inferred
        when new; None when inference fails (a rewrite that does not fit these shapes)."""
        frozen = Node.make(op, [], [], attrs).attrs

        def outputs():
            if not ops.is_known(op):
                return None
            real = [self.find(c) for c in inputs if c != NONE]
            vals = [self.weights.get(self.weight_of.get(c, "")) for c in real]
            try:
                shapes = ops.infer(op, [self.shape[c] for c in real], dict(frozen), vals)
            except Exception:  # noqa: BLE001 - a target that does not fit these shapes: no rewrite
                return None
            weight = all(self.is_weight[c] for c in real) and ops.OPS[op].ref is not None
            dtype = self.dtype[real[0]] if real else "float32"
            return [(tuple(int(v) for v in s), dtype, weight) for s in shapes]

        return self._add(op, frozen, inputs, (), "", outputs)

    def rebuild(self) -> None:
        """Restore the hash-cons after unions: e-nodes that became identical are one, their outputs united."""
        changed = True
        while changed:
            changed = False
            memo: dict[tuple, int] = {}
            for i, n in enumerate(self.nodes):
                n.inputs = tuple(self.find(c) for c in n.inputs)
                key = (n.op, n.attrs, n.inputs)
                j = memo.setdefault(key, i)
                if j != i:
                    for a, b in zip(self.nodes[j].outputs, n.outputs):
                        changed |= self.union(a, b)
            self.memo = memo

    def __len__(self) -> int:
        return len(self.nodes)

    # -- saturation -------------------------------------------------------------------
    def saturate(self, rules: Iterable, max_iters: int = 8, max_nodes: int = 20000, time_limit: float = 20.0,
                 multi_iters: int = 1) -> dict:
        """Apply every pattern rule at every match until nothing changes or a limit is reached. Pattern rules
        that replace several outputs at once (pairwise sibling merges) apply in the first ``multi_iters``
        rounds only, as in Tensat: applied to their own results they unite every subset of siblings,
        exponentially many. Code rules with an ``apply_egraph`` hook (the n-ary merges, one merge per group
        of siblings; attention fusion) run at the start of every round, so they also merge siblings that
        other rules rewrote."""
        rules = list(rules)
        code = [r for r in rules if hasattr(r, "apply_egraph")]
        rules = [r for r in rules if isinstance(r, Rule)]
        start, iters, reason = time.perf_counter(), 0, "saturated"
        while True:
            if iters >= max_iters:
                reason = "max_iters"
                break
            iters += 1
            multi = iters <= multi_iters
            before = (len(self.nodes), len(self.classes()))
            for r in code:
                r.apply_egraph(self)
            view = _View(self)
            by_op: dict[str, list[int]] = {}
            consumers: dict[int, list[int]] = {}
            producers: dict[int, list[int]] = {}
            for i, n in enumerate(self.nodes):
                by_op.setdefault(n.op, []).append(i)
                for c in n.inputs:
                    consumers.setdefault(self.find(c), []).append(i)
                for c in n.outputs:
                    producers.setdefault(self.find(c), []).append(i)
            index = (by_op, consumers, producers)
            matches = []
            for r in rules:
                if len(r.outputs) > 1 and not multi:
                    continue
                for bind, chosen in self._match(r, view, index, 0, {}, []):
                    sig = (r.name, tuple(sorted((k, v) for k, v in bind.items() if isinstance(v, int))),
                           tuple(chosen))
                    if sig not in self.applied:
                        self.applied.add(sig)
                        matches.append((r, bind))
                if time.perf_counter() - start > time_limit:
                    break
            for r, bind in matches:
                self._apply(r, view, bind)
                if len(self.nodes) >= max_nodes:
                    break
            self.rebuild()
            if len(self.nodes) >= max_nodes:
                reason = "max_nodes"
                break
            if time.perf_counter() - start > time_limit:
                reason = "time_limit"
                break
            if (len(self.nodes), len(self.classes())) == before:
                break
        return {"iterations": iters, "enodes": len(self.nodes), "eclasses": len(self.classes()), "stopped": reason,
                "seconds": round(time.perf_counter() - start, 3), "refused_unions": self.dropped}

    def _match(self, rule: Rule, view: _View, index, i, bind, chosen):
        """Bindings of the source pattern's variables (tensor vars to class ids, attrs vars to dicts)."""
        by_op, consumers, producers = index
        if i == len(rule.source):
            if rule.conditions_hold(view, {k: (f"c{v}" if isinstance(v, int) else v) for k, v in bind.items()}):
                yield dict(bind), list(chosen)
            return
        pn = rule.source[i]
        produced = [bind[v] for v in pn["out"] if v in bind]
        bound = [bind[v] for v in pn["in"] if v in bind and isinstance(bind[v], int) and not self.is_weight[bind[v]]]
        if produced:
            cands = producers.get(produced[0], [])
        elif bound:
            cands = consumers.get(bound[0], [])
        else:
            cands = by_op.get(pn["op"], [])
        for j in cands:
            n = self.nodes[j]
            if n.op != pn["op"] or len(n.outputs) != len(pn["out"]) or j in chosen:
                continue
            ins = pattern_inputs(pn, n.op, [self.find(c) for c in n.inputs],
                                 lambda c: c in self.weight_of and _zero_weight(self.graph, self.weight_of[c]))
            if ins is None or NONE in ins:
                continue
            new = bind_node(pn, bind, ins, [self.find(c) for c in n.outputs], n.a)
            if new is not None:
                yield from self._match(rule, view, index, i + 1, new, chosen + [j])

    def _apply(self, rule: Rule, view: _View, bind: dict) -> None:
        names = {k: (f"c{self.find(v)}" if isinstance(v, int) else v) for k, v in bind.items()}
        env = dict(bind)
        for tn in rule.target:
            try:
                attrs = rule._attrs(view, names, tn.get("attrs"))
            except (KeyError, IndexError, TypeError):
                return
            outs = self.add_op(tn["op"], attrs, tuple(env[v] for v in tn["in"]))
            if outs is None or len(outs) != len(tn["out"]):
                return
            for v, c in zip(tn["out"], outs):
                c = self.find(c)
                env[v], names[v] = c, f"c{c}"
                view.shape[names[v]], view.dtype[names[v]], view.is_weight[names[v]] = \
                    self.shape[c], self.dtype[c], self.is_weight[c]
        for s, t in rule.outputs.items():
            self.union(bind[s], env[t])

    # -- extraction -------------------------------------------------------------------
    def extract(self, op_cost: Callable[[object, Node], float], fusion: bool = True,
                time_limit: float = 30.0) -> tuple[Graph, dict]:
        """The cheapest graph in the e-graph by the sum of ``op_cost(view, node)`` over its run-time e-nodes;
        with ``fusion``, an op that onnxruntime fuses into its producer (``cost.fused_into_producer``: an
        activation after a Conv, a bias Add after a MatMul...) is free when that producer is picked and
        reads nothing else, as in the graph cost (the ILP only; the greedy pick ignores fusion)."""
        from autotune.search_spaces.graphs import extraction

        self.rebuild()
        view = _View(self)
        producers = self.producers()
        live = extraction.reachable(self, producers)
        costs = np.zeros(len(self.nodes))
        for c in live:
            for i in producers.get(c, []):
                n = self.nodes[i]
                if costs[i] == 0 and not self.is_weight_node(n):
                    costs[i] = op_cost(view, self.as_node(n))
        start = time.perf_counter()
        fused = extraction.fusable(self, producers, live) if fusion else []
        pick, how, objective = extraction.ilp(self, costs, producers, live, fused, time_limit)
        if pick is None:
            pick, how = extraction.greedy(self, costs), "greedy"
        g = extraction.build(self, pick)
        return g, {"extraction": how, "extraction_s": round(time.perf_counter() - start, 3), "enodes_costed":
                   int(np.count_nonzero(costs)), "objective_s": objective}

    def is_weight_node(self, n: _ENode) -> bool:
        return all(self.is_weight[self.find(c)] for c in n.outputs)

    def as_node(self, n: _ENode) -> Node:
        return Node(n.op, tuple(self.name(c) if c != NONE else "" for c in n.inputs),
                    tuple(self.name(c) for c in n.outputs), n.attrs, n.fixed, n.domain)

    def producers(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for i, n in enumerate(self.nodes):
            for c in n.outputs:
                out.setdefault(self.find(c), []).append(i)
        return out

