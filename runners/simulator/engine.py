"""FlexFlow's execution simulator for one training iteration.

Task graph (fixed per model; a strategy sets durations and resources):
  per op: F (forward of its partitions on its block), AO (all-reduce of partial
  outputs when a dim missing from the output is split), B (backward), AI_k
  (all-reduce of partial input gradients when input k is replicated across
  partitions), GS (weight-gradient all-reduce across weight replicas; an embedding
  table's gradient is sparse, so only the rows the replicas looked up), U (optimizer),
  and under ZeRO-3 WF and WB (its weights all-gathered before its forward and before its backward);
  per edge: X (forward transfer of the needed sub-rectangles) and XB (its gradient).
The partitions of an op are one gang task on its block of devices (they are equal).
An event-driven run (``schedule.py``) takes tasks in order of readiness; each task waits for its
dependencies and for every resource (device compute queue, device link port, node
network port) it uses. Delta simulation: task costs are cached per (op, config) and
(edge, configs), so a proposal that changes one op recomputes only that op's tasks
and its edges; the schedule pass is then rerun on the cached costs.
Memory per device (``memory.py``): weights with gradient and optimizer state, plus stashed
activations, with the device's allocator slack and context on top (``DeviceSpec``); exceeding the device
capacity makes the strategy invalid. Memory is arithmetic on each op's
share alone (no task cost), so a search's check of a strategy that does not fit sets no task cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from autotune.runners.simulator import costs, schedule
from autotune.runners.simulator import memory as memory_model
from autotune.runners.simulator import zero as zero_gathers
from autotune.search_spaces.parallel.clusters import Cluster
from autotune.search_spaces.parallel.graph import Graph
from autotune.search_spaces.parallel.strategy import ZERO_STAGES, OpConfig, Strategy, overlapped


@dataclass
class SimResult:
    iteration_s: float
    memory: np.ndarray  # bytes per device
    capacity: float
    timeline: list[tuple[int, float, float, str]] = field(default_factory=list)  # (resource, start, end, label)

    @property
    def peak_memory(self) -> float:
        return float(self.memory.max())

    @property
    def fits(self) -> bool:
        return self.peak_memory <= self.capacity


class Simulator:
    """``graph`` is one micro-batch; ``microbatches`` of them make an iteration (gradient accumulation, and a
    pipeline where ops sit on different device blocks). ``overlap``: the weight-gradient all-reduces start as
    soon as their op's backward (of the last micro-batch) ends, overlapping the rest of that backward (PyTorch
    DDP; Megatron-LM's ``--overlap-grad-reduce``, DeepSpeed's ``overlap_comm``); off, they run after the
    whole backward (Megatron-LM 2019; Megatron-LM's default with several micro-batches). None (the default):
    overlapped with one micro-batch, not with several. Either way the optimizer's updates run after the
    backward and its all-reduces (an optimizer step clips by the global gradient norm and checks the loss
    scale first), so they never fill a gap the backward leaves.

    ``zero``: ZeRO stage (DeepSpeed; stage 3 is PyTorch FSDP's full sharding) over each op's data-parallel group
    (the partitions holding the same weight shard): 1 shards the optimizer state (the bytes per parameter beyond
    the weight and its gradient), 2 the gradients too, 3 the weights too; the update then touches a shard. Stages
    1 and 2 move what an all-reduce moves (a reduce-scatter of the gradients, an all-gather of the updated
    weights); stage 3 gathers the weights before each micro-batch's forward and backward (rings whose latency
    grows with the group) and reduce-scatters each micro-batch's gradients, an embedding table's whole (as FSDP
    does). ``zero_prefetch``: each gather runs during the weighted op before it (FSDP's prefetch); off (the
    default), the compute waits for it (DeepSpeed's ZeRO-3 hooks; :mod:`.zero`); ``zero_rank_copies``:
    :func:`.zero.gather`'s copies per rank. ``whole_grad_bytes``: bytes per parameter of that optimizer state
    which stage 1 keeps whole on every rank (DeepSpeed's BF16 optimizer accumulates full fp32 gradients, 4, and
    shards only the fp32 weights and Adam moments); at stage 0 or 1 (that optimizer's) each micro-batch's
    gradients are added in. ``tp_overlap`` (on by default): each input-gradient all-reduce (or reduce-scatter) of a
    weighted op runs beside that op's weight-gradient GEMM, which follows the input gradient it reduces
    (Megatron-LM's code of 2022 on: the asynchronous tensor-parallel all-reduce, and sequence parallelism's
    reduce-scatter); off, it follows the whole backward (Megatron-LM before it, and the forks of that code)."""

    def __init__(self, graph: Graph, cluster: Cluster, microbatches: int = 1, overlap: bool | None = None,
                 zero: int = 0, whole_grad_bytes: float = 0.0, zero_prefetch: bool = False, zero_rank_copies=False,
                 tp_overlap: bool = True):
        if microbatches < 1:
            raise ValueError(f"microbatches must be >= 1, got {microbatches}")
        if zero not in ZERO_STAGES:
            raise ValueError(f"zero must be a ZeRO stage 0-3, got {zero}")
        if (zero_prefetch or zero_rank_copies) and zero != 3:
            raise ValueError("zero_prefetch and zero_rank_copies need zero=3: only ZeRO-3 gathers weights")
        self.g, self.c, self.microbatches, self.overlap, self.zero = graph, cluster, int(microbatches), overlap, zero
        self.whole_grad_bytes, self.zero_prefetch = float(whole_grad_bytes), bool(zero_prefetch)
        self.zero_rank_copies, self.tp_overlap = bool(zero_rank_copies), bool(tp_overlap)
        self.D = cluster.devices
        self.op_cache: dict[tuple, tuple] = {}
        self.edge_cache: dict[tuple, tuple] = {}
        self.simulations = 0
        self._build()
        self.current: Strategy | None = None

    # -- structure -----------------------------------------------------------------
    def _build(self) -> None:
        names: list[str] = []
        succ: list[list[int]] = []

        def task(name: str) -> int:
            names.append(name)
            succ.append([])
            return len(names) - 1

        def dep(a: int, b: int) -> None:
            succ[a].append(b)

        ops = self.g.ops
        self.F = [task(f"F {o.name}") for o in ops]
        self.AO = [task(f"AO {o.name}") for o in ops]
        self.B = [task(f"B {o.name}") for o in ops]
        self.AI = [[task(f"AI{k} {o.name}") for k in range(len(o.inputs))] for o in ops]
        self.GS = [task(f"GS {o.name}") for o in ops]
        self.U = [task(f"U {o.name}") for o in ops]
        gathers = self.zero == 3  # only ZeRO-3 gathers weights: no such tasks otherwise
        self.WF, self.WB = ([task(f"{w} {o.name}") for o in ops] if gathers else [] for w in ("WF", "WB"))
        self.prefetched = set(self.WF + self.WB) if self.zero_prefetch else set()
        self.X = [task(f"X {ops[p].name}->{ops[c].name}") for p, c, _ in self.g.edges]
        self.XB = [task(f"XB {ops[c].name}->{ops[p].name}") for p, c, _ in self.g.edges]
        consumers: list[list[int]] = [[] for _ in ops]
        self.in_edges: list[list[int]] = [[] for _ in ops]
        producers: list[list[int]] = [[] for _ in ops]
        for e, (p, c, k) in enumerate(self.g.edges):
            consumers[p].append(e)
            producers[c].append(p)
            self.in_edges[c].append(e)
            dep(self.AO[p], self.X[e])
            dep(self.X[e], self.F[c])
            dep(self.AI[c][k], self.XB[e])
            dep(self.XB[e], self.B[p])
        for i in range(len(ops)):
            dep(self.F[i], self.AO[i])
            dep(self.AO[i], self.B[i])
            for t in self.AI[i]:
                dep(self.B[i], t)
            dep(self.B[i], self.GS[i])
            dep(self.GS[i], self.U[i])
        if gathers:
            zero_gathers.gather_deps(self, producers, consumers, dep)
        self.consumers = consumers
        # tasks repeated for every micro-batch (all but the once-per-iteration gradient sync and update)
        once = set(self.GS) | set(self.U)
        self.per_microbatch = [t for t in range(len(names)) if t not in once]
        self.once = sorted(once)
        self.names = names
        self.succ = succ
        self.indeg = np.zeros(len(names), dtype=np.int64)
        for s in succ:
            for v in s:
                self.indeg[v] += 1
        self.sources = [t for t in range(len(names)) if self.indeg[t] == 0]
        # ops (and edges) with equal cost signatures share cached costs: identical layers cost alike
        sig_ids: dict[tuple, int] = {}
        self.op_sig = [sig_ids.setdefault(self._signature(i), len(sig_ids)) for i in range(len(ops))]
        self.edge_sig = [(self.op_sig[p], self.op_sig[c], ops[c].inputs[k][1]) for p, c, k in self.g.edges]
        self.dur = [0.0] * len(names)
        self.res: list[np.ndarray] = [costs.EMPTY] * len(names)
        self.share_cache: dict[tuple, tuple] = {}  # each op's memory share per config (``_op_share``)

    def _signature(self, i: int) -> tuple:
        op = self.g.ops[i]
        producers = tuple((self.g.ops[self.g.index[src]].type == "input", self.g.ops[self.g.index[src]].out_elems)
                          for src, _ in op.inputs)
        return (op.type, tuple(op.dims.items()), tuple(op.roles.items()), op.out,
                tuple(axes for _, axes in op.inputs), producers, op.weight, op.weight_elems, op.flops, op.bwd_flops,
                op.mem_elems, op.post_elems, op.kernels, op.keep, op.routed, op.route_share, op.stash_bytes,
                op.stores_output)

    # -- costs ---------------------------------------------------------------------
    def _op_costs(self, i: int, cfg: OpConfig) -> tuple:
        key = (self.op_sig[i], cfg)
        hit = self.op_cache.get(key)
        if hit is not None:
            return hit
        op, g, c = self.g.ops[i], self.g, self.c
        deg, split, out_part, w_shard, wrep, group = costs.held(op, cfg)
        devs = cfg.start + np.arange(cfg.span)
        first = cfg.start + np.arange(cfg.parts) * cfg.replicas  # each partition's first copy

        def members(varying: list[str]) -> np.ndarray:  # collective groups; every copy has its own
            rows = first[costs.groups(op, cfg, varying)]
            return np.concatenate([rows + k for k in range(cfg.replicas)]) if cfg.replicas > 1 else rows
        redone = g.recompute and not op.keep  # forward run again before the backward; outputs not stashed
        f, b = costs.compute_times(op, cfg, c, g.dtype_bytes, redone)
        # all-reduce of partial outputs (a split dim the output does not span)
        red = [d for d in split if d not in op.out and d != op.routed]  # routed experts combine by transfers
        ao = costs.allreduce(c, members(red), out_part * g.dtype_bytes) if red else (0.0, costs.EMPTY)
        if redone:  # the recomputed forward repeats the all-reduce before the backward
            b += ao[0]
        ai = []
        for src, axes in op.inputs:
            rep = [d for d in split if d not in axes and d != op.routed]
            producer = g.ops[g.index[src]]
            if not rep or producer.type == "input":
                ai.append((0.0, costs.EMPTY))
                continue
            frac = math.prod(1 / deg.get(a, 1) for a in axes if a is not None)
            ai.append(costs.allreduce(c, members(rep), producer.out_elems * frac * g.dtype_bytes))
        synced = w_shard
        if op.type == "embedding" and wrep and not op.dense_grad:  # sparse gradients: the rows the group looked up
            synced = min(w_shard, out_part * group)
        gs = (costs.allreduce(c, members(wrep), synced * g.dtype_bytes, costs.GRADIENT_BUCKET)
              if w_shard and wrep else (0.0, costs.EMPTY))
        shard = group if self.zero and w_shard else 1
        wf = wb = (0.0, costs.EMPTY)
        if self.zero == 3 and w_shard and wrep:  # gathers per micro-batch, a reduce-scatter of each one's gradients
            wf = zero_gathers.gather(self, members(wrep), w_shard)
            wb = (wf[0] * (2 if redone else 1), wf[1])
            gs = (self.microbatches * wf[0], wf[1])
        upd = w_shard * g.state_bytes_per_param * 2 / shard / c.device.mem_bandwidth + c.device.launch_s if w_shard else 0.0
        if w_shard and self.zero < 2 and self.whole_grad_bytes > g.dtype_bytes:  # each micro-batch's gradient, cast
            # to a copy and added in: read it, write the copy, read it and the accumulator, write that (2 kernels)
            b += w_shard * (g.dtype_bytes + 4 * self.whole_grad_bytes) / c.device.mem_bandwidth + 2 * c.device.launch_s
        # the weight gradient's time, which an input-gradient reduction runs beside (tp_overlap)
        hidden = costs.weight_grad_time(op, cfg, c, g.dtype_bytes) if self.tp_overlap and any(v[0] for v in ai) else 0.0
        hit = (f, b, ao, ai, gs, upd, devs, wf, wb, hidden)
        self.op_cache[key] = hit
        return hit

    def _op_share(self, i: int, cfg: OpConfig) -> tuple[tuple, bool]:
        """Op i's memory parts and whether it all-reduces partial outputs (:func:`.memory.op_share`), cached."""
        key = (self.op_sig[i], cfg)
        hit = self.share_cache.get(key)
        if hit is None:
            hit = self.share_cache[key] = memory_model.op_share(self.g, self.g.ops[i], cfg, self.zero,
                                                                 self.whole_grad_bytes)
        return hit

    def _edge_costs(self, e: int, scfg: OpConfig, dcfg: OpConfig) -> tuple:
        key = (self.edge_sig[e], scfg, dcfg)
        hit = self.edge_cache.get(key)
        if hit is None:
            p, c, k = self.g.edges[e]
            hit = costs.transfer(self.g.ops[p], scfg, self.g.ops[c], dcfg, self.g.ops[c].inputs[k][1], self.c,
                                 self.g.dtype_bytes)
            self.edge_cache[key] = hit
        return hit

    def _set_op(self, i: int, cfg: OpConfig) -> None:
        f, b, ao, ai, gs, upd, devs, wf, wb, _ = self._op_costs(i, cfg)
        if self.WF:
            self.dur[self.WF[i]], self.res[self.WF[i]] = wf
            self.dur[self.WB[i]], self.res[self.WB[i]] = wb
        self.dur[self.F[i]], self.res[self.F[i]] = f, devs
        self.dur[self.B[i]], self.res[self.B[i]] = b, devs
        self.dur[self.U[i]], self.res[self.U[i]] = upd, devs
        self.dur[self.AO[i]], self.res[self.AO[i]] = ao
        self.dur[self.GS[i]], self.res[self.GS[i]] = gs
        for t, v in zip(self.AI[i], ai):
            self.dur[t], self.res[t] = v

    @staticmethod
    def _scattered(cfg: OpConfig, other: OpConfig) -> bool:
        """Whether an op in config ``other``, on the devices of the op in ``cfg``, holds the tensor they share
        in as many slices as the op has partitions: a reduction over the op's partial results then only has
        to leave each device its slice (a reduce-scatter, half an all-reduce's traffic)."""
        return other.start == cfg.start and other.span == cfg.span and other.replicas == 1 and other.parts >= cfg.parts

    def _output_scattered(self, i: int, strategy: Strategy) -> bool:
        """Whether every consumer of op i holds its output in slices (:meth:`_scattered`)."""
        return bool(self.consumers[i]) and all(self._scattered(strategy[i], strategy[self.g.edges[e][1]])
                                               for e in self.consumers[i])

    def _kept(self, i: int, strategy: Strategy, reduced: bool) -> float:
        """The share of op i's stashed output a device keeps: its slice where its partial outputs are
        (``reduced``, :func:`.memory.op_share`) reduce-scattered to consumers that hold slices, else all of it."""
        cfg, op = strategy[i], self.g.ops[i]
        if not reduced or not self._output_scattered(i, strategy):
            return 1.0
        return math.prod(costs.degree(op, cfg).get(d, 1) for d in op.out) / cfg.parts

    def _set_reductions(self, i: int, strategy: Strategy) -> None:
        """Op ``i``'s output all-reduce (AO) and input-gradient all-reduces (AI): reduce-scatters where the
        ops on the other side hold only a slice (sequence parallelism), all-reduces otherwise."""
        cfg = strategy[i]
        _, _, ao, ai, *_, hidden = self._op_costs(i, cfg)
        if ao[0] > 0:
            self.dur[self.AO[i]] = ao[0] / 2 if self._output_scattered(i, strategy) else ao[0]
        for k, (src, _) in enumerate(self.g.ops[i].inputs):
            if ai[k][0] > 0:
                half = self._scattered(cfg, strategy[self.g.index[src]])
                self.dur[self.AI[i][k]] = max(0.0, (ai[k][0] / 2 if half else ai[k][0]) - hidden)

    def _set_edge(self, e: int, strategy: Strategy) -> None:
        p, c, _ = self.g.edges[e]
        t, res, _ = self._edge_costs(e, strategy[p], strategy[c])
        self.dur[self.X[e]], self.res[self.X[e]] = t, res
        if self.g.ops[p].type != "input":  # inputs take no gradient
            self.dur[self.XB[e]], self.res[self.XB[e]] = t, res

    def load(self, strategy: Strategy) -> int:
        """Set task costs for ``strategy``; only changed ops and their edges are recomputed. Returns #changed."""
        if self.current is None:
            changed = list(range(len(self.g.ops)))
        else:
            changed = [i for i, (a, b) in enumerate(zip(self.current, strategy)) if a != b]
        edges: set[int] = set()
        for i in changed:
            self._set_op(i, strategy[i])
            edges.update(self.consumers[i])
            edges.update(self.in_edges[i])
        for e in edges:
            self._set_edge(e, strategy)
        for i in {self.g.edges[e][0] for e in edges} | {self.g.edges[e][1] for e in edges} | set(changed):
            self._set_reductions(i, strategy)
        self.current = list(strategy)
        return len(changed)

    # -- run -----------------------------------------------------------------------
    def memory(self, strategy: Strategy) -> np.ndarray:
        """Bytes per device of ``strategy`` as nvidia-smi counts them: the tensors (:func:`.memory.device_memory`,
        from each op's share alone: no task cost needs to be set), the allocator's slack on them and the context."""
        shares = [self._op_share(i, cfg) for i, cfg in enumerate(strategy)]
        tensors = memory_model.device_memory(self.g, strategy, [mem for mem, _ in shares],
                                             [self._kept(i, strategy, reduced) for i, (_, reduced) in enumerate(shares)],
                                             self.D, self.microbatches, self.zero_prefetch)
        return self.c.device.held(tensors)

    def virtual_stages(self, strategy: Strategy) -> int:
        """Pipeline chunks per device block (:func:`~autotune.runners.simulator.memory.virtual_stages`)."""
        return memory_model.virtual_stages(self.g, strategy)

    def busiest(self, tasks: list[int]) -> float:
        """The most work ``tasks`` give one device (its compute queue plus its link port: transfers and
        collectives it waits for; prefetched ZeRO-3 gathers run beside its compute) or one node's network port."""
        D = self.D
        busy, beside = np.zeros(2 * D + self.c.nodes), np.zeros(D)
        for t in tasks:
            if self.dur[t] > 0 and len(self.res[t]):
                if t in self.prefetched:
                    r = self.res[t]
                    beside[r[(r >= D) & (r < 2 * D)] - D] += self.dur[t]
                    busy[r[r >= 2 * D]] += self.dur[t]
                else:
                    busy[self.res[t]] += self.dur[t]
        return float(max((np.maximum(busy[:D], beside) + busy[D:2 * D]).max(), busy[2 * D:].max(initial=0.0)))

    def simulate(self, strategy: Strategy, timeline: bool = False, time_if_full: bool = True) -> SimResult:
        """The iteration time and memory per device of ``strategy``; with ``time_if_full`` False a strategy
        that does not fit in memory is not timed (iteration_s is infinite), which a search that discards it
        anyway does not need: its memory is added up from the ops' shares alone, and no task cost is set."""
        self.simulations += 1
        mem = self.memory(strategy)
        if not time_if_full and mem.max() > self.c.device.memory_bytes:
            return SimResult(float("inf"), mem, self.c.device.memory_bytes)
        self.load(strategy)
        overlap = overlapped(self.overlap, self.microbatches)
        if overlap:  # the syncs during the backward; the updates after both
            synced = list(self.dur)
            for t in self.U:
                synced[t] = 0.0
        if self.microbatches == 1 and overlap:
            end_all, tl = self._run(synced, timeline)
            return SimResult(end_all + self.busiest(self.U), mem, self.c.device.memory_bytes, tl)
        alone = list(self.dur)  # the first micro-batch's forward and backward without the syncs and updates
        for t in self.once:
            alone[t] = 0.0
        if self.microbatches == 1:
            end_all, tl = self._run(alone, timeline)
            return SimResult(end_all + self.busiest(self.once), mem, self.c.device.memory_bytes, tl)
        # the other micro-batches stream behind the first at the busiest device's rate (1F1B): M steady steps
        # plus the first micro-batch's fill and drain, which v virtual stages per device (interleaved 1F1B) cut
        # v-fold; then the weight-gradient syncs and updates, after the last backward or, overlapped, during it
        # (what they add to one micro-batch's schedule)
        end_all, tl = self._run(alone, timeline)
        step = self.busiest(self.per_microbatch)
        v = self.virtual_stages(strategy)
        tail = self._run(synced, False)[0] - end_all + self.busiest(self.U) if overlap else self.busiest(self.once)
        return SimResult(self.microbatches * step + (end_all - step) / v + tail, mem,
                         self.c.device.memory_bytes, tl)

    def _run(self, dur: list[float], timeline: bool) -> tuple[float, list]:
        """One event-driven pass over the task graph with these durations (:func:`.schedule.run`)."""
        return schedule.run(dur, self.res, self.succ, self.indeg, self.sources, self.names,
                            2 * self.D + self.c.nodes, timeline)
