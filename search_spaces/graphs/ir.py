"""Immutable computation graph: nodes in topological order, shapes, weights, structural hash.

Tensors are named strings. A tensor is a *weight* when it is an initializer or is
computed only from weights by ops with a numpy reference: such a subgraph costs
nothing at run time and is folded ahead of time (:meth:`Graph.folded`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from autotune.errors import UsageError
from autotune.search_spaces.graphs import ops


@dataclass(frozen=True)
class TensorAttr:
    """A tensor-valued attribute (ConstantOfShape's ``value``), kept as a tensor so that it is written back as
    one; hashable, as every attribute value is."""

    dtype: str
    shape: tuple[int, ...]
    values: tuple

    @staticmethod
    def of(array) -> TensorAttr:
        a = np.asarray(array)
        return TensorAttr(str(a.dtype), tuple(a.shape), tuple(a.ravel().tolist()))

    def array(self) -> np.ndarray:
        return np.array(self.values, dtype=self.dtype).reshape(self.shape)


def freeze(value):
    if isinstance(value, (list, tuple, np.ndarray)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


@dataclass(frozen=True)
class Node:
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: tuple = ()  # sorted (name, value) pairs, values frozen to tuples
    fixed: tuple = ()  # opaque ops: ((shape, dtype), ...) of the outputs, from import
    domain: str = field(default="", compare=False)

    @staticmethod
    def make(op, inputs, outputs, attrs=None, fixed=()):
        return Node(op, tuple(inputs), tuple(outputs), tuple(sorted((k, freeze(v)) for k, v in (attrs or {}).items())),
                    tuple(fixed))

    @property
    def a(self) -> dict:
        return dict(self.attrs)


class Graph:
    """An immutable DAG. Build a changed copy with :meth:`replace`."""

    def __init__(self, nodes, inputs: dict, outputs, weights: dict, name: str = "graph", parent: Graph | None = None,
                 opset: int | None = None, domains: dict[str, int] | None = None):
        self.name = name
        self.opset = opset if opset is not None else parent.opset if parent is not None else None  # of the source
        # other operator sets the source's nodes use (com.microsoft: onnxruntime's contrib ops), with versions
        self.domains = dict(domains if domains is not None else parent.domains if parent is not None else {})
        self.inputs = dict(inputs)  # name -> (shape, dtype)
        self.outputs = tuple(outputs)
        self.weights = weights  # name -> ndarray, shared between graphs, never mutated
        self.nodes = self._toposort(list(nodes))
        self.producer: dict[str, tuple[Node, int]] = {}
        self.consumers: dict[str, list[Node]] = {}
        self.by_op: dict[str, list[Node]] = {}
        self.order: dict[str, int] = {}
        for i, n in enumerate(self.nodes):
            self.by_op.setdefault(n.op, []).append(n)
            self.order[n.outputs[0]] = i
            for j, t in enumerate(n.outputs):
                self.producer[t] = (n, j)
            for t in n.inputs:
                if t:  # "": an absent optional input
                    self.consumers.setdefault(t, []).append(n)
        self._infer(parent)
        self._hash: str | None = None

    # -- construction ---------------------------------------------------------
    def _toposort(self, nodes: list[Node]) -> tuple[Node, ...]:
        prod = {}
        for n in nodes:
            for t in n.outputs:
                if t in prod or t in self.inputs or t in self.weights:
                    raise UsageError(f"tensor {t!r} is produced twice (node {n.op})")
                prod[t] = n
        live, stack = set(), [prod[t] for t in self.outputs if t in prod]
        for t in self.outputs:
            if t not in prod and t not in self.inputs and t not in self.weights:
                raise UsageError(f"graph output {t!r} is produced by no node")
        while stack:  # dead-code elimination: keep what the outputs need
            n = stack.pop()
            if id(n) in live:
                continue
            live.add(id(n))
            stack.extend(prod[t] for t in n.inputs if t in prod)
        nodes = [n for n in nodes if id(n) in live]
        indeg = {id(n): sum(1 for t in n.inputs if t in prod) for n in nodes}
        users: dict[str, list[Node]] = {}
        for n in nodes:
            for t in n.inputs:
                if t in prod:
                    users.setdefault(t, []).append(n)
                elif t and t not in self.inputs and t not in self.weights:
                    raise UsageError(f"node {n.op} ({n.outputs[0]}) reads {t!r}, which nothing produces")
        ready = [n for n in nodes if indeg[id(n)] == 0]
        order = []
        while ready:
            n = ready.pop()
            order.append(n)
            for t in n.outputs:
                for u in users.get(t, ()):
                    indeg[id(u)] -= 1
                    if indeg[id(u)] == 0:
                        ready.append(u)
        if len(order) != len(nodes):
            bad = next(n for n in nodes if indeg[id(n)] > 0)
            raise UsageError(f"graph has a cycle through node {bad.op} ({bad.outputs[0]})")
        return tuple(order)

    def _infer(self, parent):
        if parent is not None and parent.weights is self.weights and parent.inputs == self.inputs:
            self.shape, self.dtype, self.is_weight = dict(parent.shape), dict(parent.dtype), dict(parent.is_weight)
        else:
            self.shape: dict[str, tuple] = {k: tuple(v[0]) for k, v in self.inputs.items()}
            self.dtype: dict[str, str] = {k: v[1] for k, v in self.inputs.items()}
            self.is_weight: dict[str, bool] = dict.fromkeys(self.inputs, False)
            for k, w in self.weights.items():
                self.shape[k], self.dtype[k], self.is_weight[k] = tuple(w.shape), str(w.dtype), True
        for n in self.nodes:
            if parent is not None and n.outputs[0] in parent.producer and parent.producer[n.outputs[0]][0] is n:
                continue
            ins = [t for t in n.inputs if t]
            wonly = all(self.is_weight[t] for t in ins) and ops.is_known(n.op) and ops.OPS[n.op].ref is not None
            if n.fixed:
                outs = [(tuple(s), d) for s, d in n.fixed]
            else:
                if not ops.is_known(n.op):
                    raise UsageError(f"op {n.op} is unknown and has no recorded output shapes")
                vals = [self.weights.get(t) for t in n.inputs]
                try:
                    shapes = ops.infer(n.op, [self.shape[t] for t in ins], n.a, vals)
                except Exception as exc:  # noqa: BLE001 - reported with the node
                    raise UsageError(f"shape inference failed at node {n.op} ({n.outputs[0]}): {exc}") from None
                d = self.dtype[ins[0]] if ins else "float32"
                outs = [(tuple(int(v) for v in s), d) for s in shapes]
            for t, (s, d) in zip(n.outputs, outs):
                self.shape[t], self.dtype[t], self.is_weight[t] = s, d, wonly

    # -- queries --------------------------------------------------------------
    def structural_hash(self) -> str:
        """Name-independent hash of the computation (activations by structure, weights by name)."""
        if self._hash is None:
            h: dict[str, str] = {k: "in:" + k for k in self.inputs}
            h.update({k: "w:" + k for k in self.weights})
            for n in self.nodes:
                d = hashlib.sha1(repr((n.op, n.attrs, tuple(h.get(t, "") for t in n.inputs))).encode()).hexdigest()
                for i, t in enumerate(n.outputs):
                    h[t] = f"{d}:{i}"
            self._hash = hashlib.sha1(repr(tuple(h[t] for t in self.outputs)).encode()).hexdigest()[:16]
        return self._hash

    def content_hash(self) -> str:
        """Hash of the computation and of the weights' values (rules may test weights, e.g. an all-zero bias)."""
        h = hashlib.sha1(self.structural_hash().encode())
        for k in sorted(self.weights):
            w = np.ascontiguousarray(self.weights[k])
            h.update(repr((k, str(w.dtype), w.shape)).encode())
            h.update(w.tobytes())
        return h.hexdigest()[:16]

    def runtime_nodes(self) -> list[Node]:
        """Nodes that run at inference time (not folded weight computations)."""
        return [n for n in self.nodes if not self.is_weight[n.outputs[0]]]

    def op_key(self, n: Node) -> tuple:
        ins = tuple((self.shape[t], self.dtype[t], self.is_weight[t]) if t else None for t in n.inputs)
        return (n.op, n.attrs, ins, tuple(self.shape[t] for t in n.outputs))

    def fresh(self, base: str) -> str:
        name, i = base, 0
        while name in self.shape:
            i += 1
            name = f"{base}_{i}"
        return name

    # -- rewriting ------------------------------------------------------------
    def replace(self, remove: list[Node], add: list[Node], rename: dict[str, str] | None = None,
                new_weights: dict | None = None) -> Graph:
        """A new graph without ``remove``, with ``add``, and reads of ``rename`` keys redirected."""
        gone = {id(n) for n in remove}
        nodes = [n for n in self.nodes if id(n) not in gone]
        outputs = list(self.outputs)
        if rename:
            nodes = [n if not any(t in rename for t in n.inputs) else
                     Node(n.op, tuple(rename.get(t, t) for t in n.inputs), n.outputs, n.attrs, n.fixed, n.domain)
                     for n in nodes]
            for i, t in enumerate(outputs):
                if t in rename:  # a graph output keeps its name: copy it
                    nodes.append(Node.make("Identity", [rename[t]], [t]))
        weights = self.weights if not new_weights else {**self.weights, **new_weights}
        return Graph(nodes + list(add), self.inputs, outputs, weights, self.name, parent=self)

    def folded(self) -> Graph:
        """Evaluate every weight-only node with its numpy reference; the result has no such nodes."""
        vals = dict(self.weights)
        keep = []
        for n in self.nodes:
            if self.is_weight[n.outputs[0]]:
                outs = ops.evaluate(n.op, [vals[t] for t in n.inputs if t], n.a)
                for t, v in zip(n.outputs, outs):
                    vals[t] = np.ascontiguousarray(v.astype(self.dtype[t], copy=False))
            else:
                keep.append(n)
        used = {t for n in keep for t in n.inputs} | set(self.outputs)
        return Graph(keep, self.inputs, self.outputs, {k: v for k, v in vals.items() if k in used}, self.name,
                     opset=self.opset, domains=self.domains)

    def __len__(self) -> int:
        return len(self.runtime_nodes())

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, {len(self.nodes)} nodes, hash={self.structural_hash()})"
