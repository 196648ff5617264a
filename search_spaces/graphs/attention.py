"""Scaled dot-product attention, as any exporter spells it, to onnxruntime's MultiHeadAttention kernel.

PyTorch's exporters write attention as a dozen layout ops around two MatMuls and a Softmax,
and each exporter (and each transformers model) lays them out differently: the TorchScript
exporter scales query and key separately and transposes the key in one step, the dynamo
exporter transposes the key through a rank-3 reshape and guards the softmax with
``Where(IsNaN(p), 0, p)``, GPT-2 splits one packed projection and adds a causal mask. A
fixed pattern per form would miss the next exporter's, so :class:`FuseAttention` matches
the computation instead:

* from each ``Softmax`` over the last axis, back through scalar ``Mul``/``Div`` and at most
  one additive bias to ``MatMul(q', k')``, and forward (through the optional NaN guard) to
  ``MatMul(p, v')``;
* from ``q'``, ``k'`` and ``v'`` back through layout ops (Reshape, Transpose, Identity, a
  one-input Concat, scalar Mul/Div) to rank-3 ``[batch, sequence, heads*size]`` tensors, and
  from ``MatMul(p, v')`` forward through layout ops to a rank-3 result;
* each chain is then *run* on a probe tensor (numbered elements) and must equal the canonical
  head split (``reshape(B, S, H, D)`` then ``transpose(0, 2, 1, 3)``; the key to
  ``(0, 2, 3, 1)``) or, for the result, the head merge, so any order of reshapes and
  transposes that computes the same layout matches and nothing else does.

The scalars along the query, key and score paths multiply into the kernel's ``scale``; a bias
that is all zeros is dropped, any other is passed as ``attention_bias`` (reshaped to rank 4).
Dropping the NaN guard is a partially equivalent rewrite (PET): it differs only where a whole
softmax row is NaN, which cannot happen unless the scores themselves overflow, so it is done
only when the bias is absent or a weight with a finite entry in every row (a causal mask).

Verified numerically: the kernel against the numpy reference and onnxruntime, and the rule on
small models from both exporters against the original model (tests/search_spaces/test_attention.py).
"""

from __future__ import annotations

import numpy as np

from autotune.search_spaces.graphs.ir import Graph, Node
from autotune.search_spaces.graphs.rules import CodeRule

OP = "MultiHeadAttention"
_LAYOUT = ("Reshape", "Transpose", "Identity", "Concat")


class _Graph:
    """What the matcher reads of a graph: producers and consumers of a tensor, shapes, weight values."""

    def __init__(self, g: Graph):
        self.g = g

    def producers(self, t):
        p = self.g.producer.get(t)
        return [p[0]] if p is not None and p[1] == 0 else []

    def consumers(self, t):
        return self.g.consumers.get(t, [])

    def shape(self, t):
        return self.g.shape[t]

    def value(self, t):
        return self.g.weights.get(t)

    def is_weight(self, t):
        return self.g.is_weight[t]


class _Op:
    __slots__ = ("a", "inputs", "op", "outputs")

    def __init__(self, op, a, inputs, outputs):
        self.op, self.a, self.inputs, self.outputs = op, a, inputs, outputs


class _EGraph:
    """The same for an e-graph: tensors are classes; a class may have several producers (all equal)."""

    def __init__(self, eg):
        self.eg, self.prod, self.cons = eg, {}, {}
        for n in eg.nodes:
            op = _Op(n.op, n.a, tuple(eg.find(c) for c in n.inputs), tuple(eg.find(c) for c in n.outputs))
            if len(op.outputs) == 1:
                self.prod.setdefault(op.outputs[0], []).append(op)
            for c in set(op.inputs):
                self.cons.setdefault(c, []).append(op)

    def producers(self, t):
        return self.prod.get(t, [])

    def consumers(self, t):
        return self.cons.get(t, [])

    def shape(self, t):
        return self.eg.shape[t]

    def value(self, t):
        w = self.eg.weight_of.get(t)
        return None if w is None else self.eg.weights[w]

    def is_weight(self, t):
        return self.eg.is_weight[t]


def _scalar(acc, t):
    v = acc.value(t)
    return float(v.reshape(-1)[0]) if v is not None and v.size == 1 else None


def _scaled(acc, n):
    """(data input, factor) of a Mul or Div of an activation by a scalar weight, else None."""
    if n.op not in ("Mul", "Div") or len(n.inputs) != 2:
        return None
    for i in (0, 1) if n.op == "Mul" else (0,):
        c = _scalar(acc, n.inputs[1 - i])
        if c is not None and c != 0 and not acc.is_weight(n.inputs[i]):
            return n.inputs[i], c if n.op == "Mul" else 1.0 / c
    return None


def _layout(n) -> bool:
    return n.op in _LAYOUT and (n.op != "Concat" or len(n.inputs) == 1)


def _bases(acc, t, depth: int = 8):
    """Every (base, chain, scale) that ``t`` is computed from by layout ops and scalar factors, nearest first;
    ``chain`` lists (op, output) from the base to ``t``."""
    out, frontier, seen = [(t, [], 1.0)], [(t, [], 1.0)], {t}
    for _ in range(depth):
        nxt = []
        for u, chain, s in frontier:
            for n in acc.producers(u):
                step = (n.inputs[0], 1.0) if _layout(n) else _scaled(acc, n)
                if step is None or step[0] in seen:
                    continue
                seen.add(step[0])
                item = (step[0], [(n, u), *chain], s * step[1])
                out.append(item)
                nxt.append(item)
        frontier = nxt
    return out


def _run(acc, x: np.ndarray, chain) -> np.ndarray:
    for n, out in chain:
        if n.op == "Reshape":
            x = x.reshape(acc.shape(out))
        elif n.op == "Transpose":
            x = x.transpose(n.a.get("perm") or tuple(reversed(range(x.ndim))))
    return x


def _probe(shape) -> np.ndarray:
    size = int(np.prod(shape))
    return np.arange(size, dtype=np.int32 if size < 2**31 else np.int64).reshape(shape)


def _split_heads(acc, t, perm):
    """(base [B, S, H*D], scale) whose head split transposed by ``perm`` is ``t`` (rank 4), farthest base first."""
    end = acc.shape(t)
    if len(end) != 4:
        return None
    heads = end[1]
    for base, chain, s in reversed(_bases(acc, t)):
        shp = acc.shape(base)
        if len(shp) != 3 or shp[2] % heads:
            continue
        x = _probe(shp)
        want = x.reshape(shp[0], shp[1], heads, shp[2] // heads).transpose(perm)
        got = _run(acc, x, chain)
        if got.shape == want.shape and np.array_equal(got, want):
            return base, s
    return None


def _merged_heads(acc, o, depth: int = 6):
    """Tensors computed from ``o`` [B, H, S, D] by layout ops that equal its head merge [B, S, H*D], or that
    merge flattened to [B*S, H*D] (as a projection written as Gemm reads it): {tensor: rank}."""
    b, h, s, d = acc.shape(o)
    x = _probe((b, h, s, d))
    want = x.transpose(0, 2, 1, 3).reshape(b, s, h * d)
    ends, frontier, seen = {}, [(o, [])], {o}
    for _ in range(depth):
        nxt = []
        for u, chain in frontier:
            for n in acc.consumers(u):
                if not _layout(n) or n.inputs[0] != u or n.outputs[0] in seen:
                    continue
                seen.add(n.outputs[0])
                item = (n.outputs[0], [*chain, (n, n.outputs[0])])
                nxt.append(item)
                shp = tuple(acc.shape(item[0]))
                if shp in (want.shape, (b * s, h * d)) and np.array_equal(_run(acc, x, item[1]), want.reshape(shp)):
                    ends[item[0]] = len(shp)
        frontier = nxt
    return ends


def _scores(acc, t, depth: int = 4):
    """(QK MatMul, scale, bias or None) that the softmax input ``t`` is computed from."""
    if depth == 0:
        return None
    for n in acc.producers(t):
        if n.op == "MatMul":
            return n, 1.0, None
        sc = _scaled(acc, n)
        if sc is not None:
            found = _scores(acc, sc[0], depth - 1)
            if found is not None:
                return found[0], found[1] * sc[1], found[2]
        if n.op == "Add" and len(n.inputs) == 2:
            for i in (0, 1):
                x, bias = n.inputs[i], n.inputs[1 - i]
                if acc.is_weight(x) or acc.shape(x) != acc.shape(t):
                    continue
                found = _scores(acc, x, depth - 1)
                if found is not None and found[2] is None:
                    return found[0], found[1], bias
    return None


def _bias_shape(acc, bias, b, h, s, l):
    """The rank-4 shape the bias is passed to the kernel in, None when it is all zeros; False: not usable."""
    shp = tuple(acc.shape(bias))
    if len(shp) > 4:
        return False
    full = (1,) * (4 - len(shp)) + shp
    if full[2:] != (s, l) or full[0] not in (1, b) or full[1] not in (1, h):
        return False
    v = acc.value(bias)
    if v is not None and not np.any(v):
        return None
    if v is None and (len(shp) != 4 or acc.is_weight(bias)):  # a computed weight: unknown values
        return False
    return full


def find(acc, softmax) -> dict | None:
    """The attention around ``softmax`` (an op of ``acc``): its kernel inputs, attributes and the tensors its
    output replaces, or None."""
    p = softmax.outputs[0]
    shp = acc.shape(p)
    if len(shp) != 4 or softmax.a.get("axis", -1) not in (-1, 3):
        return None
    qk = _scores(acc, softmax.inputs[0])
    if qk is None:
        return None
    mm, scale, bias = qk
    guarded = [(n, False) for n in acc.consumers(p) if n.op == "MatMul" and n.inputs[0] == p]
    for w in acc.consumers(p):  # Where(IsNaN(p), 0, p)
        if w.op == "Where" and len(w.inputs) == 3 and w.inputs[2] == p and _scalar(acc, w.inputs[1]) == 0 and \
                any(c.op == "IsNaN" and c.inputs[0] == p for c in acc.producers(w.inputs[0])):
            guarded += [(n, True) for n in acc.consumers(w.outputs[0]) if n.op == "MatMul" and n.inputs[0] ==
                        w.outputs[0]]
    b, h, s, l = shp
    q = _split_heads(acc, mm.inputs[0], (0, 2, 1, 3))
    k = _split_heads(acc, mm.inputs[1], (0, 2, 3, 1))
    if q is None or k is None or acc.shape(q[0])[:2] != (b, s) or acc.shape(k[0])[:2] != (b, l):
        return None
    bias_shape = _bias_shape(acc, bias, b, h, s, l) if bias is not None else None
    if bias_shape is False:
        return None
    bv = acc.value(bias) if bias is not None else None  # every softmax row keeps a finite score: never NaN
    finite = bias is None or bias_shape is None or bv is not None and np.isfinite(bv).any(axis=-1).all()
    for pv, guard in guarded:
        if guard and not finite:
            continue
        v = _split_heads(acc, pv.inputs[1], (0, 2, 1, 3))
        if v is None or acc.shape(v[0])[:2] != (b, l) or v[1] != 1.0:
            continue
        ends = _merged_heads(acc, pv.outputs[0])
        if ends:
            return {"q": q[0], "k": k[0], "v": v[0], "bias": bias if bias_shape else None, "bias_shape": bias_shape,
                    "attrs": {"num_heads": h, "scale": float(scale * q[1] * k[1])}, "ends": ends}
    return None


class FuseAttention(CodeRule):
    """Attention in any exporter's layout -> onnxruntime's MultiHeadAttention (see the module docstring)."""

    name = "fuse_attention"
    status = "tested"

    def matches(self, g: Graph):
        acc = _Graph(g)
        for n in g.by_op.get("Softmax", []):
            if find(acc, n) is not None:
                yield (n.outputs[0],)

    def apply(self, g: Graph, match):
        n = g.producer.get(match[0], (None,))[0]
        m = find(_Graph(g), n) if n is not None and n.op == "Softmax" else None
        if m is None:
            return None
        add, ins = [], [m["q"], m["k"], m["v"]]
        if m["bias"] is not None:
            ins += ["", "", g.fresh(f"{m['bias']}_rank4")]
            add.append(Node.make("_Reshape", [m["bias"]], [ins[-1]], {"shape": m["bias_shape"]}))
        y = g.fresh(f"{match[0]}_attention")
        add.append(Node.make(OP, ins, [y], m["attrs"]))
        if 2 in m["ends"].values():
            add.append(Node.make("Flatten", [y], [f"{y}_2d"], {"axis": 2}))
        return g.replace([], add, rename={t: y if r == 3 else f"{y}_2d" for t, r in m["ends"].items()})

    def apply_egraph(self, eg) -> None:
        from autotune.search_spaces.graphs.egraph import NONE

        acc = _EGraph(eg)
        for n in [n for ops in acc.prod.values() for n in ops if n.op == "Softmax"]:
            m = find(acc, n)
            if m is None:
                continue
            ins = [m["q"], m["k"], m["v"]]
            if m["bias"] is not None:
                ins += [NONE, NONE, eg.add_op("_Reshape", {"shape": m["bias_shape"]}, [m["bias"]])[0]]
            out = eg.add_op(OP, m["attrs"], ins)
            flat = eg.add_op("Flatten", {"axis": 2}, [out[0]]) if out and 2 in m["ends"].values() else None
            for end, rank in m["ends"].items() if out else ():
                eg.union(end, out[0] if rank == 3 else flat[0])
