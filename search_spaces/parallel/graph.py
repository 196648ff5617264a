"""Training operator graphs for parallelization search (FlexFlow's SOAP view).

Every op has named iteration dimensions, each with a size and a role:
``sample`` (batch), ``attribute`` (sequence, height, width), ``parameter``
(output features, channels, heads), ``reduction`` (the contracted dimension: a
partition of it leaves partial sums that must be all-reduced) or ``None`` (not
partitionable). Tensors are described by the dims they span: an op's output
lists its dims, each input maps the producer's output axes onto the consumer's
dims (``None`` for an axis the consumer needs whole), and the weight lists the
dims it spans. Partitions are rectangles in fractional coordinates, so a strided
convolution maps its input axis onto its (smaller) output dim proportionally.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass, field, fields

from autotune.errors import UsageError
from autotune.types import stable_key

ROLES = ("sample", "attribute", "parameter", "reduction")
# [s, s] score-sized passes of unfused (2021, pre-FlashAttention) attention, forward: scores written,
# scale-mask-softmax read + written, dropout read + written + its byte mask, read by the context GEMM
SCORE_PASSES = 6.5


@dataclass
class Op:
    name: str
    type: str
    dims: dict[str, int]
    roles: dict[str, str | None]
    out: tuple[str, ...]
    inputs: list[tuple[str, tuple[str | None, ...]]] = field(default_factory=list)
    weight: tuple[str, ...] = ()
    weight_elems: int = 0
    flops: float = 0.0  # forward FLOPs of the whole op
    bwd_flops: float = 0.0
    mem_elems: float = 0.0  # elements read + written in the forward pass (memory-bound ops)
    tp: str | None = None  # the dim Megatron-style tensor parallelism splits
    keep: bool = True  # whether the output is stashed for backward under recomputation
    out_scale: int = 1  # elements per output index (attention: the head size along the heads dim)
    stash_bytes: float = 0.0  # forward internals kept for the backward besides the output (attention's softmax)
    stores_output: bool = True  # whether the backward needs the output (a dropout after it keeps only its mask)
    post_elems: float = 0.0  # elements read + written by separate elementwise kernels after the main one (forward)
    routed: str | None = None  # mixture of experts: the experts dim, which tokens reach by routing, not by slicing
    route_share: float = 0.0  # of every token slice, the share each expert partition of degree 1 receives (k x cf)
    kernels: int = 1  # forward kernel launches (the backward launches twice as many)
    layer: int | None = None  # the repeated block (transformer layer) it belongs to; pipeline cuts fall between
    dense_grad: bool = False  # an embedding whose gradient is the whole table (Megatron's), not the rows looked up

    @functools.cached_property
    def parallel_dims(self) -> tuple[str, ...]:
        """The partitionable dims (a role, size above 1); an op's dims and roles are fixed once it is built."""
        return tuple(d for d, r in self.roles.items() if r is not None and self.dims[d] > 1)

    @property
    def out_elems(self) -> int:
        return math.prod(self.dims[d] for d in self.out) * self.out_scale

@dataclass
class Graph:
    name: str
    ops: list[Op]
    batch: int
    dtype_bytes: int = 4
    state_bytes_per_param: int = 16  # weight + gradient + Adam moments (+ fp32 master copy in mixed precision)
    recompute: bool = False
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = {op.name: i for i, op in enumerate(self.ops)}
        if len(self.index) != len(self.ops):
            raise UsageError(f"model {self.name!r} has duplicate op names")
        if all(op.type == "input" for op in self.ops):  # nothing to time: every strategy would take no time
            raise UsageError(f"model {self.name!r} has no ops besides its inputs")
        self.edges: list[tuple[int, int, int]] = []  # (producer, consumer, input position)
        for j, op in enumerate(self.ops):
            for k, (src, axes) in enumerate(op.inputs):
                if src not in self.index:
                    raise UsageError(f"op {op.name!r} reads {src!r}, which is no op of the model")
                if self.index[src] >= j:  # the ops run in their order: a cycle has none
                    raise UsageError(f"op {op.name!r} reads {src!r}, which is not an earlier op (the ops must be "
                                     "in an order that runs each after the ops it reads, so without cycles)")
                if len(axes) != len(self.ops[self.index[src]].out):
                    raise UsageError(f"op {op.name!r}: input {src!r} has {len(self.ops[self.index[src]].out)} axes")
                self.edges.append((self.index[src], j, k))

    @property
    def parameters(self) -> int:
        return sum(op.weight_elems for op in self.ops)

    @property
    def flops(self) -> float:
        return sum(op.flops + op.bwd_flops for op in self.ops)

    def digest(self) -> str:
        """A digest of what a strategy search of the graph depends on: its ops (names, which strategies refer to,
        dims and roles, inputs, weights' sizes, FLOPs and memory), batch and byte sizes, not its ``meta``. The
        same model exported again with the same names and shapes has the same digest, whatever its weights'
        values; another model under the same name has another (file models carry it in their task)."""
        return stable_key({k: v for k, v in self.to_json().items() if k != "meta"})

    def to_json(self) -> dict:
        return {"name": self.name, "batch": self.batch, "dtype_bytes": self.dtype_bytes,
                "state_bytes_per_param": self.state_bytes_per_param, "recompute": self.recompute,
                "meta": self.meta, "ops": [asdict(op) for op in self.ops]}

    @classmethod
    def from_json(cls, d: dict) -> Graph:
        """The graph ``to_json`` describes. Every field is checked first (UsageError naming the op and the field),
        so a hand-written or edited file is refused in one line rather than failing inside the simulator."""
        if not isinstance(d, dict) or not {"name", "batch", "ops"} <= set(d):
            raise UsageError("a model JSON is an object with name, batch and ops, as Graph.save writes it")
        if unknown := sorted(map(str, set(d) - GRAPH_FIELDS)):
            raise UsageError(f"unknown key(s) {', '.join(map(repr, unknown))} in the model JSON; valid: "
                             f"{', '.join(sorted(GRAPH_FIELDS))}")
        if not isinstance(d["name"], str) or not d["name"]:
            raise UsageError(f"the model JSON's name must be a non-empty string, not {_shown(d['name'])}")
        for key, least in (("batch", 1), ("dtype_bytes", 1), ("state_bytes_per_param", 0)):
            if key in d and not _whole(d[key], least):
                raise UsageError(f"the model JSON's {key} must be a whole number >= {least}, not {_shown(d[key])}")
        if not isinstance(d.get("recompute", False), bool) or not isinstance(d.get("meta", {}), dict):
            raise UsageError("the model JSON's recompute must be true or false and its meta an object")
        if not isinstance(d["ops"], (list, tuple)) or not all(isinstance(o, dict) for o in d["ops"]):
            raise UsageError("the model JSON's ops must be a list of objects, one per op, as Graph.save writes them")
        for i, o in enumerate(d["ops"]):
            _check_op_json(o, i)
        ops = [Op(**{**o, "out": tuple(o["out"]), "weight": tuple(o.get("weight", ())),
                     "inputs": [(s, tuple(a)) for s, a in o.get("inputs", [])]}) for o in d["ops"]]
        return cls(d["name"], ops, d["batch"], d.get("dtype_bytes", 4), d.get("state_bytes_per_param", 16),
                   d.get("recompute", False), d.get("meta", {}))

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.to_json(), f)


GRAPH_FIELDS = frozenset({"name", "batch", "dtype_bytes", "state_bytes_per_param", "recompute", "meta", "ops"})
OP_FIELDS = tuple(f.name for f in fields(Op))
# an op's numeric fields in a model JSON: finite and >= 0, the whole-number ones with their least value
_OP_AMOUNTS = ("flops", "bwd_flops", "mem_elems", "stash_bytes", "post_elems", "route_share")
_OP_COUNTS = {"weight_elems": 0, "out_scale": 1, "kernels": 0}


def _whole(v, least: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= least


def _shown(v) -> str:
    return repr(v) if len(repr(v)) <= 40 else repr(v)[:39] + "…"


def _check_op_json(o: dict, i: int) -> None:
    """UsageError naming the op and the field when ``o`` (``ops[i]`` of a model JSON) is not an op as ``Op`` holds
    it: its dims sized, every dim given a role, its output, inputs, weight and split dims among its dims, its
    amounts finite and non-negative."""
    name = o.get("name")
    if not isinstance(name, str) or not name:
        raise UsageError(f"op {i} of the model JSON needs a name (a non-empty string), not {_shown(name)}")
    where = f"op {name!r}"
    if missing := [k for k in ("type", "dims", "roles", "out") if k not in o]:
        raise UsageError(f"{where} lacks {', '.join(missing)}")
    if unknown := sorted(map(str, set(o) - set(OP_FIELDS))):
        raise UsageError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}; valid: {', '.join(OP_FIELDS)}")
    if not isinstance(o["type"], str) or not o["type"]:
        raise UsageError(f"{where}: type must be a non-empty string, not {_shown(o['type'])}")
    dims, roles = o["dims"], o["roles"]
    if not isinstance(dims, dict) or not isinstance(roles, dict):
        raise UsageError(f"{where}: dims must map each dim to its size and roles each dim to its role")
    if bad := [d for d, n in dims.items() if not _whole(n, 1)]:
        raise UsageError(f"{where}: the size of dim {bad[0]!r} must be a whole number >= 1, not {_shown(dims[bad[0]])}")
    if extra := [d for d in roles if d not in dims]:
        raise UsageError(f"{where}: roles name dim {extra[0]!r}, which dims does not size")
    if missing := [d for d in dims if d not in roles]:
        raise UsageError(f"{where}: roles give dim {missing[0]!r} no role (null: not partitioned)")
    if bad := [r for r in roles.values() if r is not None and r not in ROLES]:
        raise UsageError(f"{where}: unknown role {bad[0]!r}; a dim's role is one of {', '.join(ROLES)} or null "
                         "(not partitioned)")

    def dim_list(key: str, value, none: bool = False) -> None:
        if not isinstance(value, (list, tuple)) or not all(a in dims or (none and a is None) for a in value):
            raise UsageError(f"{where}: {key} must be a list of its dims ({', '.join(dims)}"
                             f"{'; null: an axis needed whole' if none else ''}), not {_shown(value)}")

    dim_list("out", o["out"])
    dim_list("weight", o.get("weight", []))
    inputs = o.get("inputs", [])
    if not isinstance(inputs, (list, tuple)) or not all(isinstance(x, (list, tuple)) and len(x) == 2
                                                        and isinstance(x[0], str) for x in inputs):
        raise UsageError(f"{where}: inputs must be a list of [producer op, its output axes as this op's dims], "
                         f"not {_shown(inputs)}")
    for src, axes in inputs:
        dim_list(f"the axes of input {src!r}", axes, none=True)
    for key in ("tp", "routed"):
        if o.get(key) is not None and o[key] not in dims:
            raise UsageError(f"{where}: {key} must be one of its dims ({', '.join(dims)}) or null, not {_shown(o[key])}")
    for key in _OP_AMOUNTS:
        v = o.get(key, 0.0)
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0):
            raise UsageError(f"{where}: {key} must be a finite number >= 0, not {_shown(v)}")
    for key, least in _OP_COUNTS.items():
        if key in o and not _whole(o[key], least):
            raise UsageError(f"{where}: {key} must be a whole number >= {least}, not {_shown(o[key])}")
    if o.get("layer") is not None and not _whole(o["layer"], 0):
        raise UsageError(f"{where}: layer must be a whole number >= 0 or null, not {_shown(o['layer'])}")
    if bad := [k for k in ("keep", "stores_output", "dense_grad") if not isinstance(o.get(k, True), bool)]:
        raise UsageError(f"{where}: {bad[0]} must be true or false, not {_shown(o[bad[0]])}")


class Builder:
    """Adds ops layer by layer; each helper returns the new op's name."""

    def __init__(self, name: str, batch: int, dtype_bytes: int = 4):
        self.name, self.batch, self.dtype_bytes = name, batch, dtype_bytes
        self.ops: list[Op] = []
        self.by_name: dict[str, Op] = {}

    def add(self, op: Op) -> str:
        self.ops.append(op)
        self.by_name[op.name] = op
        return op.name

    def _uniq(self, base: str) -> str:
        name, i = base, 1
        while name in self.by_name:
            i += 1
            name = f"{base}_{i}"
        return name

    def shape(self, x: str) -> list[tuple[str, int, str | None]]:
        op = self.by_name[x]
        return [(d, op.dims[d], op.roles[d]) for d in op.out]

    def input(self, name: str, dims: dict[str, int], roles: dict[str, str | None]) -> str:
        return self.add(Op(self._uniq(name), "input", dict(dims), dict(roles), tuple(dims), mem_elems=0))

    def elementwise(self, xs: str | list[str], name: str, typ: str = "elementwise", flops_per: float = 1.0,
                    frozen: tuple[int, ...] = (), passes: float = 1.0) -> str:
        """Same shape in and out (relu, gelu, add, layernorm). ``frozen`` axes are not partitionable; ``passes``: its
        memory traffic in reads of the inputs and writes of the output (1: each once)."""
        xs = [xs] if isinstance(xs, str) else xs
        sh = self.shape(xs[0])
        dims = {f"a{i}": n for i, (_, n, _) in enumerate(sh)}
        roles = {f"a{i}": (None if i in frozen else r) for i, (_, _, r) in enumerate(sh)}
        axes = tuple(dims)
        n = math.prod(dims.values())
        return self.add(Op(self._uniq(name), typ, dims, roles, axes, [(x, axes) for x in xs],
                           flops=flops_per * n, bwd_flops=flops_per * n, mem_elems=passes * (len(xs) + 1) * n))

    def linear(self, x: str, n_out: int, name: str, tp: str | None = "o", extra_flops: float = 0.0,
               gates: int = 1) -> str:
        """y[..., o] = x[..., i] W[i, o]; leading axes keep their roles. ``gates`` > 1: a gated projection
        (SwiGLU's gate and up projections, one weight [i, gates o]) whose ``gates`` outputs are multiplied
        into one of width o."""
        sh = self.shape(x)
        dims = {f"a{i}": n for i, (_, n, _) in enumerate(sh[:-1])}
        roles = {f"a{i}": r for i, (_, _, r) in enumerate(sh[:-1])}
        n_in = sh[-1][1] * self.by_name[x].out_scale  # the heads of an attention output hold h/heads each
        dims.update(o=n_out, i=n_in)
        roles.update(o="parameter", i="reduction")
        lead = tuple(d for d in dims if d.startswith("a"))
        m = math.prod(dims[d] for d in lead)
        f = 2.0 * m * n_in * n_out * gates
        return self.add(Op(self._uniq(name), "linear", dims, roles, lead + ("o",), [(x, lead + ("i",))],
                           ("i", "o"), n_in * n_out * gates, f + extra_flops, 2 * f + extra_flops,
                           m * (n_in + n_out * gates) + n_in * n_out * gates, tp))

    def conv(self, x: str, c_out: int, k: int | tuple[int, int], name: str, stride: int = 1) -> str:
        """2-D convolution (+ fused batch norm and ReLU), NCHW, 'same' padding."""
        (_, b, _), (_, c_in, _), (_, h, _), (_, w, _) = self.shape(x)
        kh, kw = (k, k) if isinstance(k, int) else k
        ho, wo = -(-h // stride), -(-w // stride)
        dims = {"b": b, "o": c_out, "h": ho, "w": wo, "i": c_in}
        roles = {"b": "sample", "o": "parameter", "h": "attribute", "w": "attribute", "i": "reduction"}
        f = 2.0 * b * c_out * ho * wo * c_in * kh * kw
        return self.add(Op(self._uniq(name), "conv2d", dims, roles, ("b", "o", "h", "w"),
                           [(x, ("b", "i", "h", "w"))], ("i", "o"), c_in * c_out * kh * kw, f, 2 * f,
                           b * (c_in * h * w + c_out * ho * wo), tp="o"))

    def pool(self, x: str, name: str, stride: int = 2, k: int = 3, global_: bool = False) -> str:
        (_, b, _), (_, c, _), (_, h, _), (_, w, _) = self.shape(x)
        ho, wo = (1, 1) if global_ else (-(-h // stride), -(-w // stride))
        dims = {"b": b, "c": c, "h": ho, "w": wo}
        roles = {"b": "sample", "c": "attribute", "h": "attribute", "w": "attribute"}
        n = b * c * ho * wo * (h * w if global_ else k * k)
        return self.add(Op(self._uniq(name), "pool", dims, roles, ("b", "c", "h", "w"),
                           [(x, ("b", "c", "h", "w"))], flops=n, bwd_flops=n, mem_elems=b * c * (h * w + ho * wo)))

    def concat(self, xs: list[str], name: str) -> str:
        """Concatenate along axis 1 (channels or features); the concatenated axis is kept whole."""
        shapes = [self.shape(x) for x in xs]
        sh = shapes[0]
        dims = {f"a{i}": n for i, (_, n, _) in enumerate(sh)}
        roles = {f"a{i}": r for i, (_, _, r) in enumerate(sh)}
        dims["a1"], roles["a1"] = sum(s[1][1] for s in shapes), None
        axes = tuple(dims)
        amap = tuple(None if a == "a1" else a for a in axes)
        n = math.prod(dims.values())
        return self.add(Op(self._uniq(name), "concat", dims, roles, axes, [(x, amap) for x in xs],
                           flops=0, bwd_flops=0, mem_elems=2 * n))

    def embedding(self, ids: str, vocab: int, dim: int, name: str) -> str:
        """Lookup of [b, (s)] ids in a [vocab, dim] table; vocab partitions give partial sums."""
        sh = self.shape(ids)
        dims = {f"a{i}": n for i, (_, n, _) in enumerate(sh)}
        roles = {f"a{i}": r for i, (_, _, r) in enumerate(sh)}
        dims.update(e=dim, v=vocab)
        roles.update(e="parameter", v="reduction")
        lead = tuple(d for d in dims if d.startswith("a"))
        n = math.prod(dims[d] for d in lead) * dim
        return self.add(Op(self._uniq(name), "embedding", dims, roles, lead + ("e",), [(ids, lead)],
                           ("v", "e"), vocab * dim, n, n, 2 * n, tp="v"))

    def attention(self, qkv: str, heads: int, name: str, score_passes: float = SCORE_PASSES,
                  width: int | None = None, dropout: bool = True, flash: bool = False) -> str:
        """Scaled dot-product attention core on [b, s, 3h] (or, ``width`` = h, on queries of width h beside keys
        and values of fewer heads: grouped-query attention's [b, s, h + 2 kv_heads h / heads]): scores,
        softmax, (``dropout``) dropout, context, split by heads. ``flash``: one fused kernel (FlashAttention)
        whose scores never reach memory: it keeps each row's softmax normaliser (fp32) for the backward, which
        computes the scores again (five [s, s] GEMMs to the forward's two)."""
        (_, b, _), (_, s, _), (_, h3, _) = self.shape(qkv)
        h = width or h3 // 3
        dims = {"b": b, "s": s, "n": heads}
        roles = {"b": "sample", "s": None, "n": "parameter"}
        f = 4.0 * b * s * s * h
        # kept for the backward: the softmax output and the dropout's output and byte mask, each [b, heads, s, s]
        stash = ((2 * self.dtype_bytes + 1) if dropout else self.dtype_bytes) * b * heads * s * s
        if flash:
            stash, score_passes = 4.0 * b * heads * s, 0.0
        return self.add(Op(self._uniq(name), "attention", dims, roles, ("b", "s", "n"),
                           [(qkv, ("b", "s", "n"))], flops=f, bwd_flops=(2.5 if flash else 2) * f,
                           mem_elems=b * s * (h3 + h) + score_passes * b * heads * s * s, tp="n", keep=False,
                           out_scale=h // heads, stash_bytes=stash, kernels=3))

    def moe(self, x: str, experts: int, ffn: int, name: str, top_k: int = 1, capacity: float = 1.0) -> str:
        """A mixture-of-experts feed-forward block on [b, s, h] (GShard, Switch, DeepSpeed-MoE): a gate picks
        ``top_k`` of ``experts`` FFNs (h -> ffn -> h) per token, each expert taking up to ``capacity`` times
        its even share. Splitting the experts dim is expert parallelism: each device holds its experts'
        weights, and tokens reach them by an all-to-all (dispatch) and come back by another (combine), which
        the simulator charges as transfers of ``route_share`` of each token slice per expert partition."""
        (_, b, rb), (_, s, rs), (_, h, _) = self.shape(x)
        dims = {"a0": b, "a1": s, "e": experts, "h": h}
        roles = {"a0": rb, "a1": rs, "e": "parameter", "h": None}
        route = top_k * capacity
        f = 2.0 * b * s * route * 2 * h * ffn + 2.0 * b * s * h * experts  # experts' two GEMMs and the gate
        return self.add(Op(self._uniq(name), "moe", dims, roles, ("a0", "a1", "h"), [(x, ("a0", "a1", "h"))],
                           ("e", "h"), experts * (2 * h * ffn + h), f, 2 * f, b * s * h * (2 + 2 * route),
                           tp="e", routed="e", route_share=route, kernels=6))

    def lstm(self, x: str, hidden: int, name: str) -> str:
        """One LSTM layer over the whole sequence [b, t, i] -> [b, t, h].

        Only the batch is partitionable: the time steps are sequential, and splitting the
        hidden or input features would need a collective at every step (not modelled)."""
        (_, b, _), (_, t, _), (_, i, _) = self.shape(x)
        dims = {"b": b, "t": t, "o": hidden, "i": i}
        roles = {"b": "sample", "t": None, "o": None, "i": None}
        f = 2.0 * b * t * 4 * hidden * (i + hidden)
        return self.add(Op(self._uniq(name), "lstm", dims, roles, ("b", "t", "o"), [(x, ("b", "t", "i"))],
                           ("i", "o"), 4 * hidden * (i + hidden), f, 2 * f,
                           b * t * (i + 5 * hidden) + 4 * hidden * (i + hidden), tp="o"))

    def loss(self, x: str, name: str = "loss") -> str:
        """Softmax cross-entropy over the last axis (kept whole). It moves what Megatron-LM's vocab-parallel
        cross-entropy and PyTorch's move, about 48 bytes a logit forward and backward whatever the logits' type:
        max, subtract, exp, sum and divide, each a pass over fp32, and the gradient's passes (over half-precision
        logits, also the cast to fp32 and back). An elementwise op's traffic, one read and one write a logit forward
        and twice that backward, is 6 elements a logit: 8 / the type's bytes passes of it are 48 bytes (4 passes in a
        2-byte type, 2 in fp32)."""
        return self.elementwise(x, name, "softmax_loss", 5.0, frozen=(len(self.shape(x)) - 1,),
                                passes=8.0 / self.dtype_bytes)

    def build(self, **kw) -> Graph:
        return Graph(self.name, self.ops, self.batch, self.dtype_bytes, **kw)
