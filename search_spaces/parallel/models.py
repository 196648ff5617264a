"""Built-in training graphs: transformers (GPT, BERT, Llama, mixtures of experts), and the registry of every
built-in model, FlexFlow's and Unity's benchmarks (:mod:`.flexflow_models`) among them.

``get_model(name, batch)`` returns a :class:`Graph`; names are listed in ``MODELS``.
A ``.json`` path loads a graph saved with ``Graph.save``.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from autotune.errors import UsageError, argument
from autotune.search_spaces.parallel.flexflow_models import dlrm, inception_v3, mlp, nmt, resnet101, rnnlm
from autotune.search_spaces.parallel.graph import Builder, Graph

# Megatron-LM's mixed precision with Adam: fp16 weight and gradient, fp32 main weight and main gradient, two fp32
# Adam moments (its distributed-optimizer documentation: 20 bytes, 4 + 16/d sharded over d data-parallel ranks)
MIXED_ADAM_STATE = 20
# what ZeRO stage 1 leaves whole of that state, by the framework's optimizer (Simulator's whole_grad_bytes):
# Megatron-LM's distributed optimizer shards all 16 bytes beyond the weight and gradient (4 + 16/d per parameter);
# DeepSpeed's BF16 optimizer keeps its 4-byte fp32 gradients whole on every replica (8 + 12/d)
OPTIMIZERS = {"megatron": 0.0, "deepspeed-bf16": 4.0}
DEFAULT_OPTIMIZER = "megatron"


def optimizer_layout(name: str) -> float:
    """Bytes per parameter ZeRO stage 1 keeps whole under optimizer ``name`` (a key of OPTIMIZERS)."""
    if name not in OPTIMIZERS:
        raise UsageError(f"the optimizer must be one of {', '.join(OPTIMIZERS)}, not {name!r}")
    return OPTIMIZERS[name]


RECOMPUTE = ("none", "selective", "full")
# What a transformer layer's elementwise work costs besides its GEMMs, by implementation (forward, per layer):
#   attention: [s, s]-sized passes over the scores, [b, s, h]-sized copies (head transposes), kernel launches;
#   residual: elements per [b, s, h] element moved by the dropout + residual add after each projection;
#   and launches of the bias-GELU after fc1 (read and written: 2 passes over fc1's output in both).
# "fused": Megatron-LM since 2020 (fused scale-mask-softmax, fused bias-dropout-add, fused bias-GELU,
#   strided batched GEMMs on the heads, one copy of the context back to [s, b, h]).
# "eager": Megatron-LM 2019 (PyTorch ops: scores divided, masked by a multiply and a subtract, softmax,
#   dropout, each its own pass; query, key, value and context permuted by copies; dropout and residual
#   add as two kernels; GELU scripted by the JIT fuser).
# "flash": the attention core as one FlashAttention kernel reading the projections in place (no [s, s] pass in
#   memory, no head transposes; its dropout regenerated, not stored), the rest as "fused" (MPT, Llama,
#   Megatron-core since 2023).
# The "dropout_" figures are what a model trained without dropout (Llama) does not move: the attention dropout's
# read, write and byte mask of the scores; at the residual, the mask (fused) or the whole dropout kernel (eager).
KERNELS = {
    "fused": {"score_passes": 6.5, "attention_copies": 2.0, "attention_kernels": 5, "residual": 3.5, "residual_kernels": 1,
              "dropout_score_passes": 2.5, "dropout_residual": 0.5, "dropout_residual_kernels": 0},
    "eager": {"score_passes": 12.5, "attention_copies": 8.0, "attention_kernels": 11, "residual": 5.5,
              "residual_kernels": 2, "dropout_score_passes": 2.5, "dropout_residual": 2.5, "dropout_residual_kernels": 1},
    "flash": {"score_passes": 0.0, "attention_copies": 0.0, "attention_kernels": 1, "residual": 3.5, "residual_kernels": 1,
              "dropout_score_passes": 0.0, "dropout_residual": 0.5, "dropout_residual_kernels": 0, "flash": True},
}


def recompute_mode(recompute: bool | str) -> str:
    """``recompute`` as one of RECOMPUTE (True: full, False: none)."""
    mode = {True: "full", False: "none"}.get(recompute, recompute) if isinstance(recompute, bool) else recompute
    if mode not in RECOMPUTE:
        raise UsageError(f"recomputation must be one of {', '.join(RECOMPUTE)}, not {recompute!r}")
    return mode


def transformer(name: str, batch: int, layers: int, hidden: int, heads: int, seq: int, vocab: int,
                causal_lm: bool = True, recompute: bool | str = False, kernels: str = "fused",
                experts: int = 0, top_k: int = 1, capacity: float = 1.0, kv_heads: int | None = None,
                ffn: int | None = None, gated: bool = False, tied: bool = True, dropout: bool = True) -> Graph:
    """A GPT/BERT stack in mixed precision with Megatron's tensor-parallel split points marked; with
    ``kv_heads``, ``ffn``, ``gated`` and ``tied`` also a Llama-style one.

    ``recompute``: "full" (or True) keeps only each layer's input for the backward and recomputes the rest;
    "selective" recomputes only the attention core (its [s, s] softmax and dropout are not stored;
    Korthikanti et al. 2022); "none" (False) stores every activation. ``kernels``: the implementation's
    elementwise kernels, one of KERNELS. ``experts`` > 0: every other layer's feed-forward block is a
    mixture of that many experts, ``top_k`` per token, each taking up to ``capacity`` times its even share
    of tokens (GShard, Switch, DeepSpeed-MoE). ``kv_heads``: heads of the keys and values (grouped-query
    attention; default ``heads``), which must divide ``heads``; ``ffn``: the feed-forward width (default
    4 ``hidden``); ``gated``: a gated feed-forward block (SwiGLU: two projections to ``ffn``, one weight, their
    product projected back); ``tied``: the head shares the embedding's table (GPT's), or has its own (Llama's),
    whose gradient is the whole table; ``dropout``: GPT's dropouts (on the attention scores and before each
    residual add), which Llama trains without."""
    mode = recompute_mode(recompute)
    if kernels not in KERNELS:
        raise UsageError(f"kernels must be one of {', '.join(KERNELS)}, not {kernels!r}")
    kv = heads if kv_heads is None else kv_heads
    ffn = 4 * hidden if ffn is None else ffn
    if not (heads >= 1 and 1 <= kv <= heads and heads % kv == 0 and ffn >= 1):
        raise UsageError(f"a transformer needs kv_heads dividing heads ({heads}) and a positive ffn; got kv_heads "
                         f"{kv}, ffn {ffn}")
    if experts and gated:
        raise UsageError("a mixture of experts of gated (SwiGLU) feed-forward blocks is not modelled; give gated=false")
    if experts and not 1 <= top_k <= experts:
        raise UsageError(f"a mixture of experts needs top_k between 1 and experts ({experts}), got {top_k}")
    gates = 2 if gated else 1
    k = dict(KERNELS[kernels])
    if not dropout:
        k["score_passes"] -= k["dropout_score_passes"]
        k["residual"] -= k["dropout_residual"]
        k["residual_kernels"] -= k["dropout_residual_kernels"]
    g = Builder(name, batch, dtype_bytes=2)
    ids = g.input("tokens", {"b": batch, "s": seq}, {"b": "sample", "s": "attribute"})
    x = g.embedding(ids, vocab, hidden, "embed")
    for i in range(layers):
        first = len(g.ops)
        h = g.elementwise(x, f"l{i}.ln1", "layernorm", 8.0, frozen=(2,))
        qkv = g.linear(h, hidden + 2 * hidden * kv // heads, f"l{i}.qkv", tp="o")
        a = g.attention(qkv, heads, f"l{i}.attn", k["score_passes"], width=hidden, dropout=dropout,
                        flash=k.get("flash", False))
        p = g.linear(a, hidden, f"l{i}.proj", tp="i")
        x = g.elementwise([x, p], f"l{i}.add1", "add")
        h = g.elementwise(x, f"l{i}.ln2", "layernorm", 8.0, frozen=(2,))
        if experts and i % 2:
            f = g.moe(h, experts, ffn, f"l{i}.moe", top_k, capacity)
        else:  # + the activation (GELU, or SwiGLU's SiLU and product), a few FLOPs per element
            f = g.linear(h, ffn, f"l{i}.fc1", tp="o", extra_flops=8.0 * batch * seq * ffn, gates=gates)
            fc1 = g.by_name[f]
            # the activation kernel reads the projections and writes fc2's input; the backward keeps both
            fc1.post_elems, fc1.kernels = (gates + 1.0) * batch * seq * ffn, 2
            fc1.stash_bytes = g.dtype_bytes * batch * seq * ffn * gates
            f = g.linear(f, hidden, f"l{i}.fc2", tp="i")
        x = g.elementwise([x, f], f"l{i}.add2", "add")
        # what the backward keeps (Korthikanti et al. 2022, 34 s b h + 5 a s^2 b bytes per layer without
        # recomputation): the dropouts before the residual adds keep a byte mask, not their input
        g.by_name[p].stores_output = g.by_name[f].stores_output = False
        for n in (f"l{i}.add1", f"l{i}.add2"):
            add = g.by_name[n]
            add.stash_bytes = 0.0 if mode == "full" or not dropout else batch * seq * hidden  # the dropout's mask
            add.mem_elems, add.kernels = k["residual"] * batch * seq * hidden, k["residual_kernels"]
        g.by_name[f"l{i}.add1"].keep = mode != "full"  # full recomputation keeps only the layer's input
        attn = g.by_name[f"l{i}.attn"]
        attn.post_elems, attn.kernels = k["attention_copies"] * batch * seq * hidden, k["attention_kernels"]
        for n in (f"l{i}.qkv", f"l{i}.attn", f"l{i}.proj", f"l{i}.fc1", f"l{i}.fc2", f"l{i}.moe", f"l{i}.ln1",
                  f"l{i}.ln2"):
            if n in g.by_name:
                # selective recomputation recomputes the attention core, but not a flash one (Megatron-LM skips
                # it with FlashAttention): that keeps no [s, s] tensor to spare, and computes its scores again anyway
                g.by_name[n].keep = mode == "selective" and (n != f"l{i}.attn" or bool(k.get("flash")))
        for op in g.ops[first:]:
            op.layer = i
    x = g.elementwise(x, "ln_f", "layernorm", 8.0, frozen=(2,))
    x = g.linear(x, vocab, "lm_head" if causal_lm else "mlm_head", tp="o")
    if tied:
        g.by_name["embed"].weight_elems = 0  # tied with the head: its (dense) gradient and state are the head's
    else:
        g.by_name["embed"].dense_grad = True  # Megatron's embedding gradient is the whole table
    g.loss(x)
    graph = g.build(state_bytes_per_param=MIXED_ADAM_STATE, recompute=mode != "none")
    llama = {"kv_heads": kv, "ffn": ffn, "gated": gated, "tied": tied, "dropout": dropout}
    graph.meta.update(layers=layers, hidden=hidden, heads=heads, seq=seq, vocab=vocab, causal_lm=causal_lm,
                      recompute=mode, kernels=kernels, **({"experts": experts, "top_k": top_k, "capacity": capacity}
                                                          if experts else {}),
                      **({} if llama == {"kv_heads": heads, "ffn": 4 * hidden, "gated": False, "tied": True, "dropout": True}
                         else llama))
    return graph


GPT = {  # (layers, hidden, heads, seq) as in Alpa's and Megatron-LM's GPT-3 tables, vocab 51200
    "gpt-350m": (24, 1024, 16, 1024), "gpt-1.3b": (24, 2048, 32, 1024), "gpt-2.6b": (32, 2560, 32, 1024),
    "gpt-6.7b": (32, 4096, 32, 1024), "gpt-15b": (48, 5120, 40, 1024), "gpt-39b": (48, 8192, 64, 1024),
    "gpt-175b": (96, 12288, 96, 2048),  # GPT-3 175B as Megatron-LM trains it (sequence 2048)
}


def rebuild(graph: Graph, recompute: bool | str | None = None):
    """A function ``(batch, recompute=None) -> Graph`` building ``graph``'s model for another (micro-)batch
    size and recomputation mode (default: ``recompute`` when given, else the graph's own), for the
    transformer stacks (their shape is in ``graph.meta``); None for other graphs."""
    m = graph.meta
    if not {"layers", "hidden", "heads", "seq", "vocab"} <= set(m):
        return None
    default = m.get("recompute", "full" if graph.recompute else "none") if recompute is None else recompute

    def build(batch: int, recompute: bool | str | None = None) -> Graph:
        return from_shape(graph.name, batch, m, default if recompute is None else recompute)
    return build


# the arguments of ``transformer`` that make a stack's shape, each recorded in its graph's meta when it differs from
# the default (GPT's)
SHAPE_ARGS = ("layers", "hidden", "heads", "seq", "vocab", "causal_lm", "kernels", "experts", "top_k", "capacity",
              "kv_heads", "ffn", "gated", "tied", "dropout")


def from_shape(name: str, batch: int, shape: dict, recompute: bool | str = False) -> Graph:
    """``transformer`` of the shape in ``shape`` (a graph's meta, or keys of SHAPE_ARGS; the rest ignored)."""
    return transformer(name, batch, recompute=recompute, **{k: shape[k] for k in SHAPE_ARGS if k in shape})


LLAMA = {  # (layers, hidden, heads, kv_heads, ffn, seq, vocab) as Meta published them: SwiGLU, no biases, untied
    # head, no dropout, memory-efficient (flash) attention
    "llama-2-7b": (32, 4096, 32, 32, 11008, 4096, 32000), "llama-2-13b": (40, 5120, 40, 40, 13824, 4096, 32000),
    "llama-2-70b": (80, 8192, 64, 8, 28672, 4096, 32000), "llama-3-8b": (32, 4096, 32, 8, 14336, 8192, 128256),
    "llama-3-70b": (80, 8192, 64, 8, 28672, 8192, 128256), "llama-3-405b": (126, 16384, 128, 8, 53248, 8192, 128256),
}


def llama(name: str, batch: int, recompute: bool | str = False) -> Graph:
    layers, hidden, heads, kv, ffn, seq, vocab = LLAMA[name]
    return transformer(name, batch, layers, hidden, heads, seq, vocab, recompute=recompute, kv_heads=kv, ffn=ffn,
                       gated=True, tied=False, dropout=False, kernels="flash")


# (base GPT, experts): DeepSpeed-MoE's "1.3B+MoE-128" and "350M+MoE-128" (Rajbhandari et al. 2022), top-1
MOE = {"gpt-moe-350m-128": ("gpt-350m", 128), "gpt-moe-1.3b-128": ("gpt-1.3b", 128)}

DEFAULT_BATCH = {"mlp-unity": 64, "bert-large": 32, "resnet101": 64, "inception-v3": 64, "dlrm": 2048,
                 "rnnlm": 64, "nmt": 64, **{k: 32 for k in GPT}, **{k: 32 for k in MOE}, **{k: 32 for k in LLAMA}}

MODELS = {
    "mlp-unity": mlp,
    "bert-large": lambda b: transformer("bert-large", b, 24, 1024, 16, 512, 30522, causal_lm=False),
    **{k: (lambda b, k=k: transformer(k, b, *GPT[k][:3], seq=GPT[k][3], vocab=51200)) for k in GPT},
    **{k: (lambda b, k=k, base=base, e=e: transformer(k, b, *GPT[base][:3], seq=GPT[base][3], vocab=51200, experts=e))
       for k, (base, e) in MOE.items()},
    **{k: (lambda b, k=k: llama(k, b)) for k in LLAMA},
    "resnet101": resnet101,
    "inception-v3": inception_v3,
    "dlrm": dlrm,
    "rnnlm": rnnlm,
    "nmt": nmt,
}


TRANSFORMERS = ["bert-large", *GPT, *MOE, *LLAMA]  # the built-in models a shape may start from
# a transformer's shape as ``--model BASE:key=value,...`` sets it: each key's type
SHAPE = {"layers": int, "hidden": int, "heads": int, "seq": int, "vocab": int, "kv_heads": int, "ffn": int,
         "gated": bool, "tied": bool, "dropout": bool, "experts": int, "top_k": int, "causal_lm": bool,
         "kernels": str}
SHAPE_REQUIRED = ("layers", "hidden", "heads", "seq", "vocab")


def _shape_value(key: str, text: str):
    if SHAPE[key] is str:
        if text not in KERNELS:
            raise UsageError(f"model shape {key} must be one of {', '.join(KERNELS)}, not {text!r}")
        return text
    if SHAPE[key] is bool:
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise UsageError(f"model shape {key} must be true or false, not {text!r}")
    least = 0 if key == "experts" else 1
    if not (text.isascii() and text.isdigit()) or int(text) < least:
        raise UsageError(f"model shape {key} must be a whole number >= {least}, not {text!r}")
    return int(text)


def shaped(spec: str) -> Callable[[int], Graph]:
    """The builder (batch -> Graph) of ``BASE:key=value,...``: a built-in transformer (a GPT, Llama, MoE or
    BERT preset) with the keys given changed, or ``transformer`` with every shape key given (layers, hidden,
    heads, seq, vocab; kv_heads, ffn, gated, tied, experts, top_k and causal_lm as in :func:`transformer`).
    UsageError naming what is wrong, before anything is built."""
    base, _, rest = spec.partition(":")
    if base == "transformer":
        shape: dict = {}
    elif base in TRANSFORMERS:
        m = MODELS[base](1).meta
        shape = {k: m[k] for k in SHAPE_ARGS if k in m}
    else:
        raise UsageError(f"model {spec!r}: {base!r} is not a built-in transformer; give transformer:KEY=VALUE,... "
                         f"or one of {', '.join(TRANSFORMERS)}")
    mha = shape.get("kv_heads", shape.get("heads")) == shape.get("heads")  # keys and values follow the heads
    given: dict = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        key = key.strip()
        if key not in SHAPE or not eq:
            raise UsageError(f"model {spec!r}: {item!r} is not KEY=VALUE with a shape key ({', '.join(SHAPE)})")
        if key in given:
            raise UsageError(f"model {spec!r} gives {key} twice")
        given[key] = _shape_value(key, value.strip())
    shape.update(given)
    if mha and "kv_heads" not in given and "heads" in shape:
        shape["kv_heads"] = shape["heads"]
    missing = [k for k in SHAPE_REQUIRED if k not in shape]
    if missing:
        raise UsageError(f"model {spec!r} needs {', '.join(missing)}")
    if shape["hidden"] % shape["heads"]:
        raise UsageError(f"model {spec!r}: heads ({shape['heads']}) must divide hidden ({shape['hidden']})")
    if "top_k" in given and not shape.get("experts"):
        raise UsageError(f"model {spec!r}: top_k needs experts")
    from_shape(spec, 1, {**shape, "seq": 1, "vocab": 1})  # transformer's own checks, now, on a small build
    return lambda batch: from_shape(spec, batch, shape)


def default_batch(name: str) -> int | None:
    """The built-in batch of a model name (a shaped transformer's is its base's, 32 for ``transformer``)."""
    return DEFAULT_BATCH.get(name.partition(":")[0], 32) if ":" in name else DEFAULT_BATCH.get(name)


def file_kind(name: str) -> str | None:
    """"onnx" or "json" when ``name`` names a model file by its extension (any case: ``BERT.ONNX``), else None."""
    suffix = os.path.splitext(name)[1].lower()
    return suffix[1:] if suffix in (".onnx", ".json") else None


def get_model(name: str, batch: int | None = None, input_shapes: dict | None = None) -> Graph:
    """The training graph of a built-in model, a shaped transformer, an ONNX file or a JSON graph file, at
    ``batch`` (default: the model's); ``input_shapes``: static shapes of an ONNX model's dynamic inputs."""
    kind = file_kind(name)
    if input_shapes and kind != "onnx":
        raise UsageError(f"{argument('input_shapes', '--input-shape')} applies to ONNX models, not {name!r}")
    if ":" in name and kind is None:
        b = default_batch(name) if batch is None else int(batch)
        if b < 1:
            raise UsageError(f"batch must be positive, got {b}")
        return shaped(name)(b)
    if kind == "onnx":
        if not os.path.exists(name):
            raise UsageError(f"model file {name!r} does not exist")
        from autotune.search_spaces.parallel.onnx_import import load_onnx

        return load_onnx(name, batch, input_shapes)
    if kind == "json":
        if not os.path.exists(name):
            raise UsageError(f"model file {name!r} does not exist")
        import json

        try:
            with open(name) as f:
                d = json.load(f)
        except (OSError, ValueError) as exc:  # a folder, unreadable, not JSON (UnicodeDecodeError is a ValueError)
            raise UsageError(f"cannot read the JSON graph {name!r}: {exc}") from None
        try:
            g = Graph.from_json(d)
        except UsageError as exc:  # the file's fault, named with the file
            raise UsageError(f"the JSON graph {name!r} is not a model: {exc}") from None
        if batch is not None and int(batch) != g.batch:  # its ops' sizes are saved at its batch: not rescaled
            raise UsageError(f"the JSON graph {name!r} was saved at batch {g.batch}, and a JSON graph is not rescaled "
                             f"(built-in and ONNX models are): leave {argument('batch')} out or give {g.batch} (per "
                             f"micro-batch), or save the graph at batch {int(batch)}")
        g.meta = {**g.meta, "digest": g.digest()}  # part of the task: the model, not the name inside the file
        return g
    if name not in MODELS:
        raise UsageError(f"unknown model {name!r}; valid: {', '.join(MODELS)} or a .json graph file")
    b = DEFAULT_BATCH[name] if batch is None else int(batch)
    if b < 1:
        raise UsageError(f"batch must be positive, got {b}")
    return MODELS[name](b)
