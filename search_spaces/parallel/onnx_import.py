"""Training graphs from ONNX models, through the graph space's importer (search_spaces/graphs).

Convolutions and MatMul/Gemm with a weight become SOAP ops with sample, parameter,
attribute and reduction dims; a MatMul of two activations (attention) splits along its
batch and head axes; elementwise ops, pools and normalisations keep the axes of their
output (the normalised axis whole); shape-changing ops (Reshape, Transpose, Gather...)
keep only the batch axis partitionable. ``batch`` rescales the model (the ONNX file's own batch is the
default). The file's batch is the first dimension of its first input that is not a scalar
(:func:`batch_input`); :func:`batch_axes` follows that dimension through the graph, op by op, and only the
axis of each tensor that carries it is rescaled (a tensor that does not carry it keeps its shape, whatever
its first dimension). That axis is each op's ``sample`` dim, the one data parallelism splits (axis 1 of a
sequence-first [seq, batch, hidden] tensor), and each input's batch axis maps onto it.
"""

from __future__ import annotations

import math
import re

from autotune.errors import UsageError
from autotune.search_spaces.parallel.graph import Builder, Graph, Op

ELEMENTWISE = {"Relu", "Add", "Sub", "Mul", "Div", "Sigmoid", "Tanh", "Erf", "Gelu", "Dropout", "Identity", "Clip",
               "LeakyRelu", "Sqrt", "Pow", "Cast", "Neg", "Exp", "BatchNormalization", "HardSigmoid", "Where"}
POOLS = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Resize", "Upsample"}
LAST_AXIS = {"Softmax", "LayerNormalization", "LogSoftmax", "ReduceMean", "ReduceSum"}


def batch_input(inputs: dict, path: str) -> tuple[str, int]:
    """(name, batch) of the input that carries a model's batch: the first input that is not a scalar, whose
    first dimension is the batch (scalar inputs, such as a temperature or a step, have none); UsageError
    when every input is a scalar or that dimension is 0."""
    name = next((k for k, (s, _) in inputs.items() if len(s) >= 1), None)
    if name is None:
        raise UsageError(f"cannot find the batch of ONNX model {path!r}: it has no input that is not a scalar "
                         f"(the batch is the first dimension of such an input)")
    b0 = int(inputs[name][0][0])
    if b0 < 1:
        raise UsageError(f"cannot find the batch of ONNX model {path!r}: the first dimension of its input "
                         f"{name!r} is {b0}")
    return name, b0


def load_onnx(path: str, batch: int | None = None, input_shapes: dict | None = None) -> Graph:
    """The training graph of the ONNX model at ``path`` at batch ``batch`` (default: the model's own, see
    :func:`batch_input`); ``input_shapes``: static shapes of inputs with dynamic axes, as ``tune graph``
    takes them (see :func:`autotune.search_spaces.graphs.onnx_prepare.with_input_shapes`)."""
    try:
        from autotune.search_spaces.graphs.onnx_io import from_onnx
    except ImportError as exc:  # pragma: no cover - depends on the graphs extra
        raise UsageError(f"ONNX models need the graphs extra (pip install 'autotune[graphs]'): {exc}") from None
    ig = from_onnx(path, input_shapes=input_shapes)
    if not ig.inputs:
        raise UsageError(f"ONNX model {path!r} has no inputs")
    first, b0 = batch_input(ig.inputs, path)
    B = b0 if batch is None else int(batch)
    if B < 1:
        raise UsageError(f"batch must be positive, got {B}")
    axes = batch_axes(ig, first, b0)

    def shape(t: str) -> tuple[int, ...]:
        s = tuple(int(v) for v in ig.shape[t])
        a = axes.get(t)
        if a is not None and B != b0 and s[a] % b0 == 0:  # the axis that carries the batch (and what it merged with)
            s = s[:a] + (s[a] // b0 * B,) + s[a + 1:]
        return s

    g = Builder(ig.name or "onnx", B, dtype_bytes=4)
    op_of: dict[str, str] = {}
    for name, (s, _) in ig.inputs.items():
        s = shape(name)
        dims = {f"a{j}": n for j, n in enumerate(s)}
        roles = {f"a{j}": ("sample" if j == axes.get(name) else "attribute" if len(s) != 4 or j != 1 else None)
                 for j in range(len(s))}
        op_of[name] = g.input(_clean(name), dims, roles)
    for n in ig.runtime_nodes():
        acts = [t for t in n.inputs if t and not ig.is_weight[t] and t in op_of]
        if not acts:
            continue
        ws = [t for t in n.inputs if t and ig.is_weight[t]]
        out = shape(n.outputs[0])
        name = g._uniq(_clean(n.outputs[0]))
        ob = axes.get(n.outputs[0])  # the output's batch axis: the dim data parallelism splits
        if n.op == "Conv" and len(out) == 4:
            op = _conv(g, n, name, acts[0], ws, out, shape(acts[0]), ig, ob)
        elif n.op in ("MatMul", "Gemm") and ws and len(acts) == 1 and len(ig.shape[ws[0]]) == 2:
            op = _linear(g, n, name, acts[0], ws, out, ig, ob)
        elif n.op == "MatMul" and len(acts) == 2:
            op = _batched_matmul(g, name, acts, out, shape, ob)
        else:
            op = _generic(g, n, name, acts, ws, out, shape, ig, ob)
        _map_batch(op, ob, axes, shape)
        g.add(op)
        for t in n.outputs:
            op_of[t] = name
    # inputs are given by tensor name above; translate to op names
    for op in g.ops:
        op.inputs = [(op_of[src], axes) for src, axes in op.inputs]
    _mark_layers(g.ops)
    graph = g.build()
    if input_shapes:  # part of the task: the same model at other shapes is another search
        graph.meta["input_shapes"] = {k: list(v) for k, v in sorted(input_shapes.items())}
    graph.meta["digest"] = graph.digest()  # part of the task: the model, not the name inside the file
    return graph


def batch_axes(ig, first: str, b0: int) -> dict[str, int]:
    """{tensor: the axis that carries the batch} of the imported graph ``ig``, whose input ``first`` has the batch
    ``b0`` in its first dimension: that input and every other input whose first dimension is ``b0`` carry it in
    axis 0, and each run-time op passes it on (:func:`_out_axis`); weights, and tensors the batch does not
    reach (a sequence-first transpose's leading axis, a reduction over the batch), have none."""
    axes = {t: 0 for t, (s, _) in ig.inputs.items() if len(s) >= 1 and (t == first or int(s[0]) == b0)}
    for n in ig.runtime_nodes():
        carried = [(t, axes[t]) for t in n.inputs if t in axes]
        if not carried:
            continue
        for t in n.outputs:
            if t and t in ig.shape:
                a = _out_axis(ig, n, carried, tuple(int(v) for v in ig.shape[t]), b0)
                if a is not None:
                    axes[t] = a
    return axes


def _out_axis(ig, n, carried: list[tuple[str, int]], out: tuple[int, ...], b0: int) -> int | None:
    """The axis of an output of node ``n`` that carries the batch, from the inputs that carry it (``carried``:
    (tensor, axis), in input order) and the op's semantics; None when the op takes it away."""
    if not out:
        return None
    src, a = carried[0]
    si = tuple(int(v) for v in ig.shape[src])
    pos = n.inputs.index(src)
    r = len(out)
    op, attrs = n.op, n.a
    if op == "Transpose":
        perm = list(attrs.get("perm") or reversed(range(len(si))))
        return perm.index(a) if a in perm else None
    if op in ("Reshape", "_Reshape", "Flatten", "Squeeze", "Unsqueeze"):
        return _reshaped_axis(si, a, out, b0)
    if op == "Gather":
        k = int(attrs.get("axis", 0)) % max(len(ig.shape[n.inputs[0]]), 1)
        if pos == 0:  # the data carries it: indexing another axis keeps it, indexing it loses it
            rank_idx = len(ig.shape[n.inputs[1]])
            if a == k:
                idx = [ax for t, ax in carried if t == n.inputs[1]]
                return k + idx[0] if idx else None
            return a if a < k else a - 1 + rank_idx
        return k + a  # the indices carry it (token ids into an embedding table)
    if op in ("MatMul", "Gemm"):
        ri = len(si)
        if op == "Gemm":
            trans = int(attrs.get("transA" if pos == 0 else "transB", 0))
            rows = a == (1 if trans else 0) if pos == 0 else a == (0 if trans else 1)
            return (0 if pos == 0 else 1) if rows else None
        if ri == 1:
            return None
        if pos == 0:  # [..., M, K]: the batch in the leading axes or in M; K is summed away
            return None if a == ri - 1 else a + (r - ri)
        if a == ri - 2:  # the second operand's K
            return None
        return r - 1 if a == ri - 1 else a + (r - ri)
    if op.startswith(("Reduce", "ArgMax", "ArgMin")) and "axes" in attrs:
        reduced = {int(x) % len(si) for x in attrs["axes"]}
        if a in reduced:
            return None
        return a if int(attrs.get("keepdims", 1)) else a - sum(1 for x in reduced if x < a)
    # elementwise, convolutions, pools, normalisations, softmax, concat, split, slice, opaque ops: the
    # inputs' axes line up from the right (broadcasting), and the batch keeps its axis
    o = a + (r - len(si))
    if 0 <= o < r and si[a] and out[o] % si[a] == 0:
        return o
    if math.prod(si) == math.prod(out):  # same elements, another shape: as a reshape
        return _reshaped_axis(si, a, out, b0)
    return None


def _reshaped_axis(si: tuple[int, ...], a: int, out: tuple[int, ...], b0: int) -> int | None:
    """The axis of a reshape's output ``out`` that holds input axis ``a`` (of ``si``, the batch): in the row-major
    layout the batch is the digit between the elements of the axes before it and those after it; the output
    axis that holds that whole digit (possibly merged with neighbours, as flattening [B, S, H] to [B*S, H]
    does) carries it; the first such axis where a batch of 1 fits several. None when the reshape splits it."""
    outer, inner = math.prod(si[:a]), math.prod(si[a + 1:])
    for j in range(len(out)):
        po, pi = math.prod(out[:j]), math.prod(out[j + 1:])
        if po and pi and outer % po == 0 and inner % pi == 0 and out[j] % b0 == 0:
            return j
    return None


# a repeated block in the tensor names exporters write: GPT-2's "/h.0/", BERT's "/layer.0/", Llama's
# "/layers.0/", ViT's "/blocks.0/", T5's "/encoder/block.0/"
_LAYER = re.compile(r"(?:^|[/._])(?:h|layers?|blocks?)[._](\d+)(?=[/._]|$)")


def _mark_layers(ops: list[Op]) -> None:
    """Each op whose name has a block index (``_LAYER``) gets its layer: the rank of its name's prefix up
    to that index in order of first appearance (so an encoder's and a decoder's block 0 are two layers),
    which Megatron's strategy cuts a pipeline between."""
    rank: dict[str, int] = {}
    for op in ops:
        m = _LAYER.search(op.name)
        if m:
            op.layer = rank.setdefault(op.name[:m.end(1)], len(rank))


def _clean(name: str) -> str:
    return name.replace(" ", "_") or "t"


def _lead_role(j: int, ob: int | None) -> str:
    """The role of a leading (row) axis ``j`` of an op whose output carries the batch in axis ``ob``."""
    return "sample" if j == ob else "attribute"


def _map_batch(op: Op, ob: int | None, axes: dict[str, int], shape) -> None:
    """Map each input's batch axis onto the op's batch dim where the op's own rule left it unmapped (a transpose
    or reshape moving the batch, the rows of a matmul), so that a data-parallel split of the two is one slice of the
    batch and moves no activations; only where both axes have the same extent (a merged axis is not one slice)."""
    if ob is None or op.roles[op.out[ob]] is None:
        return
    d = op.out[ob]
    for k, (t, amap) in enumerate(op.inputs):
        ib = axes.get(t)
        if ib is not None and amap[ib] is None and d not in amap and shape(t)[ib] == op.dims[d]:
            op.inputs[k] = (t, amap[:ib] + (d,) + amap[ib + 1:])


def _conv(g, n, name, x, ws, out, xs, ig, ob) -> Op:
    b, cout, ho, wo = out
    cin = xs[1]
    w = ig.shape[ws[0]]
    group = int(n.a.get("group", 1))
    kh, kw = int(w[2]), int(w[3])
    dims = {"b": b, "o": cout, "h": ho, "w": wo, "i": cin // group}
    roles = {"b": _lead_role(0, ob), "o": "parameter", "h": "attribute", "w": "attribute",
             "i": "reduction" if group == 1 else None}
    f = 2.0 * b * cout * ho * wo * (cin // group) * kh * kw
    amap = ("b", "i", "h", "w") if group == 1 else ("b", "o", "h", "w")
    welems = sum(math.prod(ig.shape[t]) for t in ws)
    return Op(name, "conv2d", dims, roles, ("b", "o", "h", "w"), [(x, amap)], ("i", "o") if group == 1 else ("o",),
              welems, f, 2 * f, b * (cin * xs[2] * xs[3] + cout * ho * wo), tp="o")


def _linear(g, n, name, x, ws, out, ig, ob) -> Op:
    w = ig.shape[ws[0]]
    k = int(w[1] if n.op == "Gemm" and n.a.get("transB") else w[0])
    lead = out[:-1]
    dims = {f"a{j}": s for j, s in enumerate(lead)}
    roles = {f"a{j}": _lead_role(j, ob) for j in range(len(lead))}
    dims.update(o=out[-1], i=k)
    roles.update(o="parameter", i="reduction")
    m = math.prod(lead)
    f = 2.0 * m * k * out[-1]
    welems = sum(math.prod(ig.shape[t]) for t in ws)
    axes = tuple(dims)[: len(lead)]
    return Op(name, "linear", dims, roles, axes + ("o",), [(x, axes + ("i",))], ("i", "o"), welems, f, 2 * f,
              m * (k + out[-1]) + k * out[-1], tp="o")


def _batched_matmul(g, name, acts, out, shape, ob) -> Op:
    r = len(out)
    k = shape(acts[0])[-1]
    dims = {f"a{j}": s for j, s in enumerate(out)}
    roles = {f"a{j}": ("sample" if j == ob else "attribute" if j == 0 else "parameter" if j < r - 2 else None)
             for j in range(r)}
    batch_axes = tuple(f"a{j}" for j in range(r - 2))
    ins = []
    for t in acts:
        rank = len(shape(t))
        ins.append((t, (batch_axes + (None, None))[-rank:] if rank == r else (None,) * rank))
    f = 2.0 * math.prod(out) * k
    return Op(name, "matmul", dims, roles, tuple(dims), ins, flops=f, bwd_flops=2 * f,
              mem_elems=sum(math.prod(shape(t)) for t in acts) + math.prod(out), tp="a1" if r > 3 else None)


def _kept_axes(n, rank: int, r: int) -> list[int | None]:
    """For each axis of an input of rank ``rank`` to node ``n`` that keeps its axes (output rank ``r``), the output
    axis it becomes: a reduction drops the axes it reduces (or keeps them, of size 1), other ops line the axes up
    from the right, as broadcasting does."""
    if n.op.startswith("Reduce") and "axes" in n.a and not int(n.a.get("keepdims", 1)):
        reduced = {int(x) % rank for x in n.a["axes"]}
        return [None if j in reduced else j - sum(1 for x in reduced if x < j) for j in range(rank)]
    return [j + r - rank if j + r - rank >= 0 else None for j in range(rank)]


def _generic(g, n, name, acts, ws, out, shape, ig, ob) -> Op:
    r = len(out)
    dims = {f"a{j}": s for j, s in enumerate(out)}
    keep_axes = n.op in ELEMENTWISE or n.op in POOLS or n.op in LAST_AXIS or n.op == "Concat"
    roles: dict[str, str | None] = {}
    for j in range(r):
        if (n.op in LAST_AXIS and j == r - 1) or n.op == "Concat" and j == int(n.a.get("axis", 1)) % r:
            roles[f"a{j}"] = None
        elif j == ob:
            roles[f"a{j}"] = "sample"
        else:
            roles[f"a{j}"] = "attribute" if keep_axes else None
    ins = []
    for t in acts:
        s = shape(t)
        if keep_axes:
            to = _kept_axes(n, len(s), r)
            amap = tuple(f"a{o}" if o is not None and (s[j] == out[o] or n.op in POOLS and len(s) == r)
                         and roles[f"a{o}"] is not None else None for j, o in enumerate(to))
        else:  # the batch axis alone (mapped by _map_batch)
            amap = (None,) * len(s)
        ins.append((t, amap))
    numel = math.prod(out) if out else 1
    per = 9.0 if n.op in POOLS else 1.0
    welems = sum(math.prod(ig.shape[t]) for t in ws)
    return Op(name, n.op.lower(), dims, roles, tuple(dims), ins, (), welems, per * numel, per * numel,
              sum(math.prod(shape(t)) for t in acts) + numel)
