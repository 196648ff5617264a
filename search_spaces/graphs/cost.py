"""What the graph cost is made of, independent of how ops are timed.

The cost of a graph is the sum of its run-time ops' costs (weight-only ops are folded
ahead of time, so free). With ``fusion`` on, ops that onnxruntime fuses into their
producer (an activation or BatchNormalization after a Conv, a bias Add after a
MatMul...) count as free, so that the search neither chases gains the runtime already
has nor breaks its fusions. :func:`op_features` are the rows the op-cost model
(``autotune.cost_models.graph_ops``) learns from; the runner that times ops and sums
them is ``autotune.runners.graph``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from autotune.search_spaces.graphs import ops
from autotune.search_spaces.graphs.ir import Graph, Node

#: added per counted op, so that of two graphs with equal op costs the one with fewer ops is cheaper
TIE_BREAK_S = 1e-9
OP_IDS = {op: i for i, op in enumerate(sorted(ops.OPS))}
FUSING_PRODUCERS = {"Conv", "Gemm", "MatMul"}
FUSED_ACTIVATIONS = {"Relu", "Sigmoid", "Tanh"}
OP_FEATURES = ["op_id", "log2_flops", "log2_bytes", "log2_output_elements", "kernel_area", "stride_area", "groups"]


def op_features(g: Graph, n: Node) -> list[float]:
    """Cost-model row of one op: its type, log2 FLOPs, bytes and output size, kernel area, stride, groups."""
    ins = [g.shape[t] for t in n.inputs if t]
    outs = [g.shape[t] for t in n.outputs]
    kernel = n.a.get("kernel_shape") or (ins[1][2:] if n.op == "Conv" and len(ins) > 1 else [1])
    return [float(OP_IDS.get(n.op, len(OP_IDS))), np.log2(1 + ops.flops(n.op, ins, outs, n.a)),
            np.log2(1 + ops.bytes_moved(ins, outs)), np.log2(1 + sum(int(np.prod(o)) for o in outs)),
            float(np.prod(kernel)), float(np.prod(n.a.get("strides") or [1])), float(n.a.get("group", 1))]


def flops_and_bytes(g: Graph, n: Node) -> tuple[float, float]:
    ins = [g.shape[t] for t in n.inputs if t]
    outs = [g.shape[t] for t in n.outputs]
    return float(ops.flops(n.op, ins, outs, n.a)), float(ops.bytes_moved(ins, outs))


#: an op's cost before any op was timed: a fixed overhead plus FLOPs or bytes at about one core's rates
OP_OVERHEAD_S, NOMINAL_FLOP_RATE, NOMINAL_BYTE_RATE = 2e-6, 2e10, 5e9


def roofline_cost(g: Graph, n: Node, rates: tuple[float, float] = (NOMINAL_FLOP_RATE, NOMINAL_BYTE_RATE)) -> float:
    """Seconds of one op: :data:`OP_OVERHEAD_S` plus the slower of its FLOPs and its bytes at ``rates``."""
    f, b = flops_and_bytes(g, n)
    return OP_OVERHEAD_S + max(f / rates[0], b / rates[1])


def counted_nodes(g: Graph, fusion: bool = True) -> list[Node]:
    """The run-time ops a graph's cost sums over (without those fused into their producer when ``fusion``)."""
    return [n for n in g.runtime_nodes() if not (fusion and fused_into_producer(g, n))]


def graph_cost(g: Graph, op_cost: Callable[[Graph, Node], float], fusion: bool = True) -> float:
    """Sum of ``op_cost`` over the counted ops, plus :data:`TIE_BREAK_S` per op."""
    return float(sum(op_cost(g, n) + TIE_BREAK_S for n in counted_nodes(g, fusion)))


def fuses_into(op: str, producer: str) -> bool:
    """Whether onnxruntime fuses an ``op`` into the ``producer`` of its input, by op types alone (the other
    inputs must be weights: see :func:`fused_into_producer`)."""
    if op in FUSED_ACTIVATIONS:
        return producer in ("Conv", "Gemm")
    if op == "BatchNormalization":
        return producer == "Conv"
    return op in ("Add", "Mul") and (producer == "Conv" or producer == "MatMul" and op == "Add")


def fused_into_producer(g: Graph, n: Node, depth: int = 0) -> bool:
    """Whether onnxruntime's own graph optimisations fuse ``n`` into the op producing its input
    (Conv/Gemm + activation, Conv + BatchNormalization, Conv + Mul/Add by a constant, MatMul + bias Add)."""
    src = n.inputs[0] if n.inputs else ""
    if n.op in ("Add", "Mul") and len(n.inputs) == 2 and g.is_weight.get(n.inputs[0]):
        src = n.inputs[1]
    prod = g.producer.get(src)
    if prod is None or src in g.outputs or len(g.consumers.get(src, ())) != 1:
        return False
    if prod[0].op not in FUSING_PRODUCERS:  # look through a node that is itself fused (Conv -> BN -> Relu)
        if n.op not in FUSED_ACTIVATIONS or depth > 0 or not fused_into_producer(g, prod[0], depth + 1):
            return False
        src = prod[0].inputs[0] if not g.is_weight.get(prod[0].inputs[0]) else prod[0].inputs[1]
        prod = g.producer.get(src)
    if not fuses_into(n.op, prod[0].op):
        return False
    if n.op == "BatchNormalization":
        return all(g.is_weight[t] for t in n.inputs[1:])
    if n.op in ("Add", "Mul"):
        return g.is_weight[n.inputs[1] if src == n.inputs[0] else n.inputs[0]]
    return True  # an activation
