"""Memory per device of a parallel strategy: each op's weights with their gradient and optimizer state (as the
ZeRO stage shards them), the activations its pipeline stage keeps in flight, the weights ZeRO-3 gathers, and
under recomputation the activations of the one layer whose backward runs (its forward run again).

The :class:`~autotune.runners.simulator.engine.Simulator` computes each op's share once per (op, config) and
adds the shares up per device here; a strategy whose peak exceeds the device capacity does not fit.
"""

from __future__ import annotations

import numpy as np

from autotune.runners.simulator.costs import held
from autotune.search_spaces.parallel.graph import Graph, Op
from autotune.search_spaces.parallel.strategy import OpConfig, Strategy


def state_bytes(graph: Graph, zero: int, shard: int, whole_grad_bytes: float = 0.0) -> float:
    """Bytes per parameter of an op's weight shard on one device under ZeRO stage ``zero`` over ``shard``
    devices (the weight, its gradient, then the optimizer state: fp32 master weights and Adam moments).
    Stage 1 shards the optimizer state but ``whole_grad_bytes`` of it, which it keeps whole on every rank;
    stage 2 shards the gradient too, stage 3 everything."""
    total, w = float(graph.state_bytes_per_param), float(graph.dtype_bytes)
    optimizer = max(total - 2 * w, 0.0)
    if zero == 0 or shard == 1:
        return total
    whole = min(whole_grad_bytes, optimizer)
    return {1: 2 * w + whole + (optimizer - whole) / shard, 2: w + (w + optimizer) / shard, 3: total / shard}[zero]


def op_share(graph: Graph, op: Op, cfg: OpConfig, zero: int, whole_grad_bytes: float = 0.0) -> tuple[tuple, bool]:
    """Op ``op``'s memory on each device of its block under ``cfg`` (weights and optimizer state, stashed
    activations, the weights ZeRO-3 gathers, the activations its recomputed forward holds: ``device_memory``'s
    ``parts``), and whether it all-reduces partial outputs (a split dim its output does not span), which
    decides whether its stashed output may be reduce-scattered. Arithmetic on the op's shape alone, no times."""
    _, split, out_part, w_shard, wrep, group = held(op, cfg)
    shard = group if zero and w_shard else 1
    redone = graph.recompute and not op.keep  # forward run again before the backward; outputs not stashed
    act = (out_part * graph.dtype_bytes if op.stores_output else 0.0) + op.stash_bytes / cfg.parts
    mem = (w_shard * state_bytes(graph, zero, shard, whole_grad_bytes), 0.0 if redone else act,
           w_shard * graph.dtype_bytes if zero == 3 and wrep else 0.0, act if redone else 0.0)
    return mem, out_part > 0 and any(d not in op.out and d != op.routed for d in split)


def virtual_stages(graph: Graph, strategy: Strategy) -> int:
    """Pipeline chunks per device block: the fewest separate runs of consecutive layers (ops with weights, in
    graph order) that any block holds; 1 unless every block holds several (interleaved)."""
    runs: dict[tuple[int, int], int] = {}
    prev = None
    for op, cfg in zip(graph.ops, strategy):
        if not op.weight_elems:
            continue
        block = (cfg.start, cfg.span)
        if block != prev:
            runs[block] = runs.get(block, 0) + 1
            prev = block
    return min(runs.values()) if len(runs) > 1 else 1


def in_flight(stages: int, microbatches: int, virtual: int) -> list[float]:
    """Micro-batches' worth of activations each pipeline stage holds at its peak. Under 1F1B stage k stashes
    up to min(S - k, M) micro-batches at once; interleaved over v chunks per stage (Megatron-LM's schedule),
    stage k runs 2 (S - k - 1) + (v - 1) S chunk forwards before its first backward, so it holds that many
    plus one chunks of 1/v of its layers (stage 0: 1 + (S - 1) / (S v) times the layers' worth, Korthikanti
    et al. 2022)."""
    S, M, v = stages, microbatches, virtual
    if v == 1:
        return [float(min(M, S - k)) for k in range(S)]
    return [min(M * v, 2 * (S - k - 1) + (v - 1) * S + 1) / v for k in range(S)]


def device_memory(graph: Graph, strategy: Strategy, parts: list[tuple[float, float, float, float]],
                  act_scale: list[float], devices: int, microbatches: int, prefetch: bool = False) -> np.ndarray:
    """Bytes per device: ``parts[i]`` is op i's (weights and optimizer state, stashed activations, weights
    ZeRO-3 gathers, activations its recomputed forward holds) on each device of its block, ``act_scale[i]``
    the share of its activations a device keeps (less than 1 where the output is reduce-scattered). Pipeline
    stages are the device blocks, in the order the model reaches them; under ZeRO-3 the largest op's gathered
    weights are held, twice with ``prefetch`` (the op computing and the next one gathered during it). A
    recomputing device runs one layer's backward at a time, and holds that layer's recomputed activations
    then (the largest layer's) beside the stashed ones."""
    weights, acts, gathered = np.zeros(devices), np.zeros(devices), np.zeros(devices)
    redone: dict[int | None, np.ndarray] = {}  # layer -> its recomputed bytes on each device
    stages: dict[tuple[int, int], int] = {}
    for cfg in strategy:
        stages.setdefault((cfg.start, cfg.span), len(stages))
    held = in_flight(len(stages), microbatches, virtual_stages(graph, strategy) if microbatches > 1 else 1)
    for op, cfg, (w, a, full, r), scale in zip(graph.ops, strategy, parts, act_scale):
        block = slice(cfg.start, cfg.start + cfg.span)
        weights[block] += w
        acts[block] += a * scale * held[stages[(cfg.start, cfg.span)]]
        if full:
            gathered[block] = np.maximum(gathered[block], full)
        if r:
            redone.setdefault(op.layer, np.zeros(devices))[block] += r * scale
    working = np.max(list(redone.values()), axis=0) if redone else 0.0
    return weights + acts + (2 if prefetch else 1) * gathered + working
