"""Op registry: shape function, numpy reference, ONNX mapping and cost key of each op.

Ops whose name starts with ``_`` are internal weight transforms created by rules
(BatchNormalization folding, kernel padding...). They only ever see weights, so
they are folded ahead of time and never reach ONNX. An op the registry does not
know is kept as an opaque node: its output shapes come from ONNX shape inference
at import and its cost is measured like any other op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

Shape = tuple[int, ...]


@dataclass(frozen=True)
class OpDef:
    name: str
    shape: Callable[[list[Shape], dict, list], list[Shape]]  # (input shapes, attrs, weight values or None)
    ref: Callable[..., list[np.ndarray]] | None = None  # numpy reference: (inputs, attrs) -> outputs
    onnx: str | None = None  # ONNX op type ("" for internal ops)
    linear: bool = False  # linear in each activation input (for the z3 proof)
    domain: str = ""  # the ONNX operator set of ``onnx`` ("": the standard one)
    #: the ONNX input lists (names, "" for absent) this op stands for at import (None: any); a contrib node
    #: using inputs the registered op does not model stays opaque
    accepts: Callable[[list[str]], bool] | None = None


OPS: dict[str, OpDef] = {}
#: operator sets other than the standard one that registered ops are written in, with the version written
DOMAIN_VERSIONS = {"com.microsoft": 1}


def register(name, shape, ref=None, onnx=None, linear=False, domain="", accepts=None):
    OPS[name] = OpDef(name, shape, ref, name if onnx is None else onnx, linear, domain, accepts)


def onnx_type(op: str, domain: str = "") -> tuple[str, str]:
    """(ONNX op type, operator set) an IR op is written as: a registered op's, else its own name and ``domain``."""
    d = OPS.get(op)
    return (d.onnx or op, d.domain) if d is not None and not domain else (op, domain)


def registered_as(op_type: str, domain: str, inputs: list[str]) -> str | None:
    """The registered op written as ``op_type`` in operator set ``domain`` (not the standard one) with these
    ONNX ``inputs`` (names, "" for absent), if any: a node using inputs the registered op does not model
    (``OpDef.accepts``) is none."""
    return next((d.name for d in OPS.values() if domain and d.domain == domain and d.onnx == op_type
                 and (d.accepts is None or d.accepts(inputs))), None)


def _gelu(x):
    from scipy.special import erf

    return (0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))).astype(x.dtype)


def _gelu_tanh(x):
    return (0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))).astype(x.dtype)


def _bcast(shapes, attrs, vals):
    return [tuple(np.broadcast_shapes(*shapes))]


def _same(shapes, attrs, vals):
    return [tuple(shapes[0])]


def _conv_out(n, k, s, d, p0, p1):
    return (n + p0 + p1 - d * (k - 1) - 1) // s + 1


def _conv_shape(shapes, a, vals):
    x, w = shapes[0], shapes[1]
    sp = len(x) - 2
    k = a.get("kernel_shape", w[2:])
    s, d = a.get("strides", (1,) * sp), a.get("dilations", (1,) * sp)
    p = a.get("pads", (0,) * (2 * sp))
    return [(x[0], w[0]) + tuple(_conv_out(x[2 + i], k[i], s[i], d[i], p[i], p[sp + i]) for i in range(sp))]


def _pool_shape(shapes, a, vals):
    x = shapes[0]
    sp = len(x) - 2
    k = a["kernel_shape"]
    s, p = a.get("strides", (1,) * sp), a.get("pads", (0,) * (2 * sp))
    if a.get("ceil_mode", 0):
        dims = tuple(-(-(x[2 + i] + p[i] + p[sp + i] - k[i]) // s[i]) + 1 for i in range(sp))
    else:
        dims = tuple(_conv_out(x[2 + i], k[i], s[i], 1, p[i], p[sp + i]) for i in range(sp))
    return [(x[0], x[1]) + dims]


def _matmul_shape(shapes, a, vals):
    x, w = shapes
    if len(w) == 1:
        return [tuple(x[:-1])]
    if len(x) == 1:
        return [tuple(w[:-2]) + (w[-1],)]
    return [tuple(np.broadcast_shapes(tuple(x[:-2]), tuple(w[:-2]))) + (x[-2], w[-1])]


def _gemm_shape(shapes, a, vals):
    x, w = shapes[0], shapes[1]
    m = x[1] if a.get("transA", 0) else x[0]
    n = w[0] if a.get("transB", 0) else w[1]
    return [(m, n)]


def _concat_shape(shapes, a, vals):
    ax = a["axis"] % len(shapes[0])
    out = list(shapes[0])
    out[ax] = sum(s[ax] for s in shapes)
    return [tuple(out)]


def _split_shape(shapes, a, vals):
    x = shapes[0]
    ax = a["axis"] % len(x)
    return [tuple(x[:ax]) + (n,) + tuple(x[ax + 1:]) for n in a["split"]]


def _transpose_shape(shapes, a, vals):
    perm = a.get("perm") or tuple(reversed(range(len(shapes[0]))))
    return [tuple(shapes[0][p] for p in perm)]


def _reshape_target(x, spec):
    spec = [int(v) for v in spec]
    out = [x[i] if v == 0 else v for i, v in enumerate(spec)]
    if -1 in out:
        known = int(np.prod([v for v in out if v != -1]))
        out[out.index(-1)] = int(np.prod(x)) // known
    return tuple(out)


def _reshape_shape(shapes, a, vals):
    if vals[1] is None:
        raise ValueError("Reshape needs a constant shape input")
    return [_reshape_target(shapes[0], vals[1])]


def _flatten_shape(shapes, a, vals):
    x, ax = shapes[0], a.get("axis", 1)
    return [(int(np.prod(x[:ax])), int(np.prod(x[ax:])))]


def _global_pool_shape(shapes, a, vals):
    return [tuple(shapes[0][:2]) + (1,) * (len(shapes[0]) - 2)]


def _pad_kernel_shape(shapes, a, vals):
    w = shapes[0]
    return [tuple(w[:2]) + tuple(a["size"])]


# ---- numpy references -------------------------------------------------------

def conv_ref(x, w, b=None, *, strides=None, pads=None, dilations=None, group=1, **_):
    sp = x.ndim - 2
    strides, dilations = strides or (1,) * sp, dilations or (1,) * sp
    pads = pads or (0,) * (2 * sp)
    x = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[sp + i]) for i in range(sp)])
    m, cg = w.shape[:2]
    outs = []
    for g in range(group):
        xg = x[:, g * cg:(g + 1) * cg]
        wg = w[g * (m // group):(g + 1) * (m // group)]
        k = tuple((wg.shape[2 + i] - 1) * dilations[i] + 1 for i in range(sp))
        win = sliding_window_view(xg, k, axis=tuple(range(2, 2 + sp)))
        win = win[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)]
        win = win[(Ellipsis,) + tuple(slice(None, None, d) for d in dilations)]
        outs.append(np.einsum("nchwij,mcij->nmhw", win, wg) if sp == 2 else
                    np.einsum("nclk,mck->nml", win, wg))
    y = np.concatenate(outs, axis=1)
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * sp)
    return y


def _pool_ref(x, a, fn):
    sp = x.ndim - 2
    k, s = a["kernel_shape"], a.get("strides", (1,) * sp)
    p = a.get("pads", (0,) * (2 * sp))
    fill = -np.inf if fn is np.max else 0.0
    pad = [(0, 0), (0, 0)] + [(p[i], p[sp + i]) for i in range(sp)]

    def windows(t):
        win = sliding_window_view(np.pad(t, pad, constant_values=fill), tuple(k), axis=tuple(range(2, 2 + sp)))
        return win[(slice(None), slice(None)) + tuple(slice(None, None, st) for st in s)]

    if fn is np.mean and not a.get("count_include_pad", 0) and any(p):  # ONNX: padding is not counted
        axes = tuple(range(-sp, 0))
        return (windows(x).sum(axis=axes) / windows(np.ones_like(x)).sum(axis=axes)).astype(x.dtype)
    return fn(windows(x), axis=tuple(range(-sp, 0)))


def _split_ref(x, a):
    idx = np.cumsum(a["split"])[:-1]
    return list(np.split(x, idx, axis=a["axis"]))


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _attention(ins, a):
    """onnxruntime's MultiHeadAttention on (query [B, S, H*D], key [B, L, H*D], value [B, L, H*Dv][,
    attention_bias [B|1, H|1, S, L]]): softmax(q k^T * scale + bias) v per head, heads merged back."""
    q, k, v = ins[:3]
    (b, s, _), n, ln = q.shape, a["num_heads"], k.shape[1]
    qh = q.reshape(b, s, n, -1).transpose(0, 2, 1, 3)
    scores = qh @ k.reshape(b, ln, n, -1).transpose(0, 2, 3, 1) * a.get("scale", qh.shape[-1] ** -0.5)
    if len(ins) > 3:
        scores = scores + ins[3]
    out = _softmax(scores) @ v.reshape(b, ln, n, -1).transpose(0, 2, 1, 3)
    return [out.transpose(0, 2, 1, 3).reshape(b, s, -1).astype(q.dtype)]


def _attention_inputs(names: list[str]) -> bool:  # query, key, value[, "", "", attention_bias]: no packing
    return len(names) in (3, 6) and all(names[:3]) and (len(names) == 3 or not names[3] and not names[4])


def _bn_ref(x, s, b, m, v, epsilon=1e-5, **_):
    sh = (1, -1) + (1,) * (x.ndim - 2)
    return (x - m.reshape(sh)) / np.sqrt(v.reshape(sh) + epsilon) * s.reshape(sh) + b.reshape(sh)


def _one(fn):
    return lambda ins, a: [fn(*ins)]


register("Add", _bcast, _one(np.add), linear=True)
register("Sub", _bcast, _one(np.subtract), linear=True)
register("Mul", _bcast, _one(np.multiply))
register("Div", _bcast, _one(np.divide))
register("Sqrt", _same, _one(np.sqrt))
register("Relu", _same, _one(lambda x: np.maximum(x, 0)))
register("Sigmoid", _same, _one(lambda x: 1 / (1 + np.exp(-x))))
register("Tanh", _same, _one(np.tanh))
register("Identity", _same, _one(lambda x: x), linear=True)
register("MatMul", _matmul_shape, _one(np.matmul), linear=True)
register("Gemm", _gemm_shape, lambda ins, a: [
    a.get("alpha", 1.0) * ((ins[0].T if a.get("transA") else ins[0]) @ (ins[1].T if a.get("transB") else ins[1]))
    + (a.get("beta", 1.0) * ins[2] if len(ins) > 2 else 0)])
register("Conv", _conv_shape, lambda ins, a: [conv_ref(*ins, **a)], linear=True)
register("BatchNormalization", _same, lambda ins, a: [_bn_ref(*ins, **a)])
register("MaxPool", _pool_shape, lambda ins, a: [_pool_ref(ins[0], a, np.max)])
register("AveragePool", _pool_shape, lambda ins, a: [_pool_ref(ins[0], a, np.mean)], linear=True)
register("GlobalAveragePool", _global_pool_shape, _one(lambda x: x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)),
         linear=True)
register("Softmax", _same, lambda ins, a: [_softmax(ins[0], a.get("axis", -1))])
register("Concat", _concat_shape, lambda ins, a: [np.concatenate(ins, axis=a["axis"])], linear=True)
register("Split", _split_shape, lambda ins, a: _split_ref(ins[0], a), linear=True)
register("Transpose", _transpose_shape, lambda ins, a: [np.transpose(ins[0], a.get("perm"))], linear=True)
register("Reshape", _reshape_shape, lambda ins, a: [ins[0].reshape(_reshape_target(ins[0].shape, ins[1]))],
         linear=True)
register("Flatten", _flatten_shape, lambda ins, a: [ins[0].reshape(_flatten_shape([ins[0].shape], a, None)[0])],
         linear=True)
# onnxruntime's contrib kernels (operator set com.microsoft), written by rules that target them
register("FusedGelu", _same, _one(_gelu), onnx="Gelu", domain="com.microsoft")
register("FusedFastGelu", _same, _one(_gelu_tanh), onnx="FastGelu", domain="com.microsoft",
         accepts=lambda names: len(names) == 1)  # no bias input
register("MultiHeadAttention", lambda s, a, v: [tuple(s[0][:-1]) + (s[2][-1],)], _attention, domain="com.microsoft",
         accepts=_attention_inputs)
# internal weight transforms (always folded; never exported)
register("_BNScale", lambda s, a, v: [s[0]], lambda ins, a: [ins[0] / np.sqrt(ins[1] + a["epsilon"])], onnx="")
register("_BNBias", lambda s, a, v: [s[0]], lambda ins, a: [(ins[0] - ins[2]) * ins[1] + ins[3]], onnx="")
register("_ScaleRows", lambda s, a, v: [s[0]],
         lambda ins, a: [ins[0] * np.reshape(ins[1], (-1,) + (1,) * (ins[0].ndim - 1))], onnx="")
register("_ScaleCols", lambda s, a, v: [s[0]], lambda ins, a: [ins[0] * np.reshape(ins[1], (-1,))], onnx="")
register("_AddVec", lambda s, a, v: [s[0]], lambda ins, a: [ins[0] + np.reshape(ins[1], (-1,))], onnx="")
register("_Reshape", lambda s, a, v: [tuple(a["shape"])], lambda ins, a: [ins[0].reshape(a["shape"])], onnx="")
register("_PadKernel", _pad_kernel_shape, lambda ins, a: [np.pad(ins[0], [(0, 0), (0, 0)] + [
    ((t - k) // 2, (t - k) // 2) for t, k in zip(a["size"], ins[0].shape[2:])])], onnx="")

ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Sqrt", "Identity"}


def is_known(op: str) -> bool:
    return op in OPS


def infer(op: str, shapes: list[Shape], attrs: dict, values: list) -> list[Shape]:
    return OPS[op].shape(shapes, attrs, values)


def evaluate(op: str, inputs: list[np.ndarray], attrs: dict) -> list[np.ndarray]:
    ref = OPS[op].ref
    if ref is None:
        raise KeyError(f"op {op} has no numpy reference")
    return [np.asarray(o) for o in ref(inputs, attrs)]


def flops(op: str, in_shapes: list[Shape], out_shapes: list[Shape], attrs: dict) -> float:
    """Analytic multiply-add count, used for ops not measured yet."""
    out = sum(int(np.prod(s)) for s in out_shapes)
    if op == "Conv":
        w = in_shapes[1]
        return 2.0 * out * int(np.prod(w[1:]))
    if op in ("MatMul", "Gemm"):
        k = in_shapes[0][-1] if not attrs.get("transA") else in_shapes[0][0]
        return 2.0 * out * k
    return float(out)


def bytes_moved(in_shapes: list[Shape], out_shapes: list[Shape], itemsize: int = 4) -> float:
    return float(itemsize * (sum(int(np.prod(s)) for s in in_shapes) + sum(int(np.prod(s)) for s in out_shapes)))
