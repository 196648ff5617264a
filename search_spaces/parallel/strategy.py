"""Parallelization strategies: for each op a degree per partitionable dim and a block of devices.

An op with degrees (k1, k2, ...) has P = k1*k2*... partitions, partition index row-major
over the op's dims, each computed by ``replicas`` R devices (the same work on each copy);
partition j's copies run on devices ``start + j*R .. start + j*R + R-1`` of the aligned
block ``start .. start+P*R-1`` (``start`` a multiple of P*R, P*R divides the device
count). Baselines: ``data-parallel``, ``megatron`` (tensor parallel inside a node on each
op's marked dim, data parallel across nodes; layer norms and residual additions replicated
on the tensor-parallel group, as Megatron-LM does; optionally cut into pipeline stages of whole layers) and
``model-parallel`` (every op whole on one device, layers spread
over the devices in FLOP-balanced contiguous chunks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from autotune.errors import UsageError
from autotune.search_spaces.parallel.clusters import Cluster
from autotune.search_spaces.parallel.graph import Graph, Op


@dataclass(frozen=True)
class OpConfig:
    degrees: tuple[int, ...]  # aligned with op.parallel_dims
    start: int = 0
    replicas: int = 1  # copies of each partition, on consecutive devices

    @property
    def parts(self) -> int:
        return math.prod(self.degrees)

    @property
    def span(self) -> int:
        """Devices the op occupies."""
        return self.parts * self.replicas


Strategy = list[OpConfig]  # aligned with graph.ops
ZERO_STAGES = (0, 1, 2, 3)  # none; sharded optimizer state; + gradients; + weights (FSDP)


def overlapped(overlap: bool | None, microbatches: int) -> bool:
    """Whether weight-gradient all-reduces overlap the backward: as given, or by default (None) with one
    micro-batch (PyTorch DDP) and not with several (Megatron-LM)."""
    return microbatches == 1 if overlap is None else overlap


@lru_cache(maxsize=4096)
def divisors(n: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


@lru_cache(maxsize=4096)
def _choices(sizes: tuple[int, ...], devices: int) -> tuple[tuple[int, ...], ...]:
    out: list[tuple[int, ...]] = []

    def rec(i: int, acc: tuple[int, ...], prod: int) -> None:
        if i == len(sizes):
            out.append(acc)
            return
        for k in divisors(math.gcd(sizes[i], devices)):
            if devices % (prod * k) == 0:
                rec(i + 1, acc + (k,), prod * k)

    rec(0, (), 1)
    return tuple(out)


def degree_choices(op: Op, devices: int) -> tuple[tuple[int, ...], ...]:
    """Every valid degree tuple of ``op``: each degree divides its dim, the product divides ``devices``."""
    return _choices(tuple(op.dims[d] for d in op.parallel_dims), devices)


def check_config(op: Op, cfg: OpConfig, devices: int) -> str | None:
    """Why ``cfg`` is invalid for ``op`` on ``devices`` devices, or None."""
    dims = op.parallel_dims
    if len(cfg.degrees) != len(dims):
        return f"op {op.name!r} takes {len(dims)} degrees ({', '.join(dims) or 'none'})"
    for d, k in zip(dims, cfg.degrees):
        if k < 1 or op.dims[d] % k:
            return f"op {op.name!r}: degree {k} does not divide dim {d}={op.dims[d]}"
    if cfg.replicas < 1:
        return f"op {op.name!r}: replicas must be >= 1, got {cfg.replicas}"
    p = cfg.span
    if devices % p:
        return f"op {op.name!r}: {p} partition copies do not divide {devices} devices"
    if cfg.start < 0 or cfg.start % p or cfg.start + p > devices:
        return f"op {op.name!r}: block start {cfg.start} is not an aligned block of {p} in {devices} devices"
    return None


def check_strategy(graph: Graph, strategy: Strategy, devices: int) -> str | None:
    if len(strategy) != len(graph.ops):
        return f"strategy has {len(strategy)} ops, model {graph.name!r} has {len(graph.ops)}"
    for op, cfg in zip(graph.ops, strategy):
        if (why := check_config(op, cfg, devices)) is not None:
            return why
    return None


def to_json(graph: Graph, strategy: Strategy, devices: int) -> dict:
    ops = {}
    for op, cfg in zip(graph.ops, strategy):
        degrees = {d: k for d, k in zip(op.parallel_dims, cfg.degrees) if k > 1}
        ops[op.name] = {"degrees": degrees, "start": cfg.start}
        if cfg.replicas > 1:
            ops[op.name]["replicas"] = cfg.replicas
    return {"model": graph.name, "devices": devices, "ops": ops}


def from_json(graph: Graph, d: dict, devices: int) -> Strategy:
    """Parse and validate; ops missing from the JSON run whole on device 0."""
    if not isinstance(d, dict) or not isinstance(d.get("ops", {}), dict):
        raise UsageError("a strategy is a JSON object with an 'ops' mapping")
    if int(d.get("devices", devices)) != devices:
        raise UsageError(f"strategy is for {d.get('devices')} devices, the cluster has {devices}")
    unknown = set(d.get("ops", {})) - set(graph.index)
    if unknown:
        raise UsageError(f"strategy names ops not in model {graph.name!r}: {', '.join(sorted(unknown)[:5])}")
    out: Strategy = []
    for op in graph.ops:
        e = d.get("ops", {}).get(op.name, {})
        extra = set(e.get("degrees", {})) - set(op.parallel_dims)
        if extra:
            raise UsageError(f"op {op.name!r} has no partitionable dim(s) {', '.join(sorted(extra))}")
        cfg = OpConfig(tuple(int(e.get("degrees", {}).get(dim, 1)) for dim in op.parallel_dims), int(e.get("start", 0)),
                       int(e.get("replicas", 1)))
        if (why := check_config(op, cfg, devices)) is not None:
            raise UsageError(why)
        out.append(cfg)
    return out


@lru_cache(maxsize=65536)  # called for every op of every layout: a 530B seed list asks it a million times
def _largest_degree(size: int, limit: int, devices: int) -> int:
    return max(k for k in divisors(math.gcd(size, limit)) if devices % k == 0)


def _config(op: Op, want: dict[str, int], replicas: int = 1, start: int = 0) -> OpConfig:
    return OpConfig(tuple(want.get(d, 1) for d in op.parallel_dims), start, replicas)


REPLICATED_IN_TP = ("layernorm", "add")  # Megatron-LM (2021) runs these whole on every tensor-parallel rank


def _vocab_parallel_loss(graph: Graph, op: Op, t: int) -> bool:
    """A softmax loss over logits a tensor-parallel op splits on its output (the head's vocabulary): Megatron-LM
    computes it vocab-parallel, each replica's loss on that replica's own tensor-parallel group, each rank over its
    slice of the vocabulary (all-reducing only per-token maxima and sums). Placed as such only where its sequence
    can be shared out over the ``t`` ranks; a loss over whole samples (a classifier's) is not."""
    if op.type != "softmax_loss" or not op.inputs or graph.ops[graph.index[op.inputs[0][0]]].tp != "o":
        return False
    q = _sequence_dim(op)
    return q is not None and op.dims[q] % t == 0


def _sample_dim(op: Op) -> str | None:
    return next((d for d in op.parallel_dims if op.roles[d] == "sample"), None)


def _batch_degree(graph: Graph, op: Op, s: str, devices: int) -> int:
    """The most of ``devices`` that split ``op``'s sample dim ``s`` into whole samples of the batch: a sample dim
    that merges the batch with other axes (an ONNX model's [batch x seq, hidden]) is split no finer than the batch."""
    return _largest_degree(math.gcd(op.dims[s], graph.batch), devices, devices)


def data_parallel(graph: Graph, cluster: Cluster) -> Strategy:
    D = cluster.devices
    out = []
    for op in graph.ops:
        s = _sample_dim(op)
        out.append(_config(op, {s: _batch_degree(graph, op, s, D)} if s else {}))
    return out


def _sequence_dim(op: Op) -> str | None:
    return next((d for d in op.parallel_dims if op.roles[d] == "attribute"), None)


def _flop_balanced(graph: Graph, parts: int) -> list[int]:
    """Each op's part of ``parts`` contiguous runs of ops with about equal forward FLOPs (an op goes where its
    middle falls)."""
    total = sum(op.flops for op in graph.ops) or 1.0
    out, acc = [], 0.0
    for op in graph.ops:
        out.append(min(parts - 1, int(parts * (acc + op.flops / 2) / total)))
        acc += op.flops
    return out


def _chunks(graph: Graph, chunks: int) -> list[int]:
    """Each op's pipeline chunk: as Megatron-LM cuts a model, the same number of layers per chunk (the ops
    before the first layer go with the first chunk, those after the last with the last) where the graph
    marks its layers and has at least one per chunk; otherwise FLOP-balanced cuts between any two ops."""
    layers = sorted({op.layer for op in graph.ops if op.layer is not None})
    if len(layers) >= chunks:
        rank = {layer: i for i, layer in enumerate(layers)}
        out, chunk = [], 0
        for op in graph.ops:
            if op.layer is not None:
                chunk = rank[op.layer] * chunks // len(layers)
            out.append(chunk)
        return out
    return _flop_balanced(graph, chunks)


def megatron(graph: Graph, cluster: Cluster, tensor: int | None = None, pipeline: int = 1,
             virtual: int = 1, sequence: bool = False, expert: int | None = None) -> Strategy:
    """Tensor parallelism of degree ``tensor`` (default: a node) on each op's marked dim, data parallel on the
    rest; with ``pipeline`` > 1 the layers are cut into that many stages of as many layers each, each on its own block
    of devices (run with micro-batches: ``Simulator(..., microbatches=M)``); with ``virtual`` > 1 into
    ``pipeline * virtual`` chunks placed round-robin on the stages (Megatron-LM's interleaved 1F1B).
    ``sequence``: sequence parallelism (Korthikanti et al. 2022): the layer norms and residual additions are
    split along the sequence over the tensor-parallel group instead of run whole on every rank, so the
    all-reduces around them become a reduce-scatter and an all-gather. A softmax loss over a head split on its
    vocabulary runs on each replica's own group, 1/t of its sequence per rank (Megatron-LM's vocab-parallel
    cross-entropy); a loss with no sequence to share out that way (a classifier's) is split over its samples.
    ``expert``: the expert-parallel degree of mixture-of-experts ops (default: the tensor degree; DeepSpeed-MoE's
    expert groups): each op's experts split that many ways, its tokens over the rest of the stage's devices."""
    D, t_max = cluster.devices, tensor or cluster.per_node
    if pipeline < 1 or D % pipeline:
        raise UsageError(f"pipeline degree {pipeline} does not divide {D} devices")
    if virtual < 1:
        raise UsageError(f"virtual stages must be >= 1, got {virtual}")
    block, chunks = D // pipeline, pipeline * virtual
    out = []
    for op, chunk in zip(graph.ops, _chunks(graph, chunks)):
        stage = chunk % pipeline
        s = _sample_dim(op)
        vocab = _vocab_parallel_loss(graph, op, t_max)
        want: dict[str, int] = {}
        replicas = 1
        if op.routed in op.parallel_dims:
            want[op.routed] = ep = _largest_degree(op.dims[op.routed], expert or t_max, block)
            if s:
                want[s] = _batch_degree(graph, op, s, block // ep)
            replicas = block // math.prod(want.values())
        elif op.tp in op.parallel_dims:
            want[op.tp] = t = _largest_degree(op.dims[op.tp], t_max, block)
            if s:
                want[s] = _batch_degree(graph, op, s, block // t)
        elif (op.type in REPLICATED_IN_TP or vocab) and t_max > 1 and block % t_max == 0:
            # data parallel over the replicas of the stage, whole on every tensor-parallel rank (or split
            # along the sequence over it); a sample dimension of size 1 (one sequence per micro-batch) is no
            # partitionable dim, so no degree. The vocab-parallel loss: on its replica's group too (not on the
            # stage's first devices, whose port would then take in every replica's logits), a 1/t share of it
            # per rank, here of the sequence (the graph's loss keeps the vocabulary whole), so its logits are
            # exchanged inside the group, which Megatron-LM does not need to do
            if s:
                want[s] = _batch_degree(graph, op, s, block // t_max)
            q = _sequence_dim(op) if sequence or vocab else None
            if q and op.dims[q] % t_max == 0:
                want[q] = t_max
            replicas = block // math.prod(want.values())
        elif s:
            want[s] = _batch_degree(graph, op, s, block)
        else:  # nothing to split (a loss over one sequence): whole on every device of the stage, as Megatron
            replicas = block
        out.append(_config(op, want, replicas, stage * block))
    return out


def model_parallel(graph: Graph, cluster: Cluster) -> Strategy:
    return [OpConfig((1,) * len(op.parallel_dims), dev)
            for op, dev in zip(graph.ops, _flop_balanced(graph, cluster.devices))]


BASELINES = {"data-parallel": data_parallel, "megatron": megatron, "model-parallel": model_parallel}
