"""SimulatorRunner: 'measures' a parallelization strategy with the execution simulator.

cost = simulated iteration time (seconds); INVALID when the strategy is not valid
or a device's memory exceeds its capacity; meta carries peak memory and throughput.
A candidate that splits the iteration into another number of micro-batches than the
space's default, shards with ZeRO (prefetching ZeRO-3's gathers or not), recomputes activations in another
mode or overlaps its gradient all-reduces otherwise, runs on a simulator of its own (one per micro-batch count,
ZeRO stage and prefetch, recomputation mode and overlap, each with its delta caches).
"""

from __future__ import annotations

import time

from autotune.errors import UsageError
from autotune.runners.base import Runner
from autotune.runners.simulator.engine import Simulator
from autotune.search_spaces.parallel.clusters import Cluster, DeviceSpec, preset
from autotune.search_spaces.parallel.graph import Graph
from autotune.search_spaces.parallel.space import StrategySpace
from autotune.types import Candidate, Device, Measurement, Status, Task, text_key


def cluster_device(cluster: Cluster, whole_grad_bytes: float = 0.0) -> Device:
    """The simulated cluster as the device its trials are logged on. Its properties (and so its key) hold the
    figures a user or a calibration changes on a preset: the device, its hardware and GEMM efficiency, the links,
    NCCL's figures and how many times were measured; a cluster that is not a preset as it stands (a cluster file,
    a preset with measured times) also holds a digest of all its figures, measured times included; the
    optimizer state that ZeRO stage 1 keeps whole (``whole_grad_bytes``, when not 0); and what a process holds
    beyond its tensors (the device's context and allocator slack, when not 0) and its cost per kernel (when not
    the default). Two clusters or optimizers
    that differ in any of them log their trials apart, so a trial of one is never looked up for the other."""
    d = cluster.device
    props = {"cluster": cluster.name, "nodes": cluster.nodes, "per_node": cluster.per_node, "device": d.name,
             "hardware": d.hardware_name, "gemm_efficiency": d.gemm_efficiency, "intra_bw": cluster.intra_bw,
             "inter_bw": cluster.inter_bw, "link": cluster.link, "bus_efficiency": cluster.bus_efficiency,
             "latency_scale": cluster.latency_scale, "net_efficiency": cluster.net_efficiency,
             "measured_ops": len(cluster.op_times), "measured_collectives": len(cluster.collectives)}
    try:
        same = cluster == preset(cluster.name)
    except UsageError:  # a name of a preset larger than is modelled
        same = False
    if not same:
        props["figures"] = text_key(repr(cluster))  # every field, infinite ones too (a Python caller's)
    if whole_grad_bytes:
        props["whole_grad_bytes"] = float(whole_grad_bytes)
    if d.context_bytes or d.allocator_slack:  # what fits depends on them (a device without them keeps its key)
        props.update(context_bytes=float(d.context_bytes), allocator_slack=float(d.allocator_slack))
    if d.launch_s != DeviceSpec.launch_s:  # a stack's calibrated cost per kernel (the default keeps the key)
        props["launch_s"] = float(d.launch_s)
    return Device(f"{cluster.name} ({cluster.devices} x {d.name})", "simulated", props)


class SimulatorRunner(Runner):
    def __init__(self, model: Graph, cluster: Cluster, space: StrategySpace | None = None, microbatches: int = 1,
                 whole_grad_bytes: float = 0.0):
        """``model`` is one micro-batch; an iteration runs ``microbatches`` of them; ``whole_grad_bytes`` as in
        :class:`Simulator` (the optimizer state per parameter that ZeRO stage 1 leaves whole)."""
        self.model, self.cluster, self.microbatches = model, cluster, microbatches
        self.whole_grad_bytes = float(whole_grad_bytes)
        self.space = space or StrategySpace(model, cluster, microbatches=microbatches)
        self.sim = Simulator(model, cluster, microbatches, whole_grad_bytes=self.whole_grad_bytes)
        self.sims = {(microbatches, 0, self.space.recompute, None, False): self.sim}
        self.device = cluster_device(cluster, self.whole_grad_bytes)

    @property
    def simulations(self) -> int:
        return sum(s.simulations for s in self.sims.values())

    def simulator(self, microbatches: int, zero: int = 0, recompute: str | None = None,
                  overlap: bool | None = None, prefetch: bool = False) -> Simulator:
        """The simulator of one micro-batch count, ZeRO stage, recomputation mode (default: the model's),
        gradient overlap (default: the simulator's) and ZeRO-3 prefetch; each keeps its own cost caches."""
        key = (microbatches, zero, recompute or self.space.recompute, overlap, prefetch)
        if key not in self.sims:
            self.sims[key] = Simulator(self.space.graph_for(microbatches, key[2]), self.cluster, microbatches,
                                       overlap=overlap, zero=zero, whole_grad_bytes=self.whole_grad_bytes,
                                       zero_prefetch=prefetch)
        return self.sims[key]

    def measure(self, task: Task, candidates: list[Candidate]) -> list[Measurement]:
        return [self.measure_one(c) for c in candidates]

    def measure_one(self, c: Candidate, timeline: bool = False) -> Measurement:
        t0 = time.perf_counter()
        try:
            m, z, rc = self.space.microbatches_of(c), self.space.zero_of(c), self.space.recompute_of(c)
            ov, pf = self.space.overlap_of(c), self.space.prefetch_of(c)
            strategy = self.space.strategy(c)
        except (UsageError, TypeError, ValueError, AttributeError, KeyError) as exc:
            return Measurement(c, Status.INVALID, error=f"not a valid strategy: {exc}")
        r = self.simulator(m, z, rc, ov, pf).simulate(strategy, timeline=timeline, time_if_full=timeline)
        run_s = time.perf_counter() - t0
        meta = {"peak_memory_bytes": r.peak_memory, "capacity_bytes": r.capacity, "microbatches": m,
                **({"recompute": rc} if rc is not None else {}),
                "throughput": self.space.batch / r.iteration_s if 0 < r.iteration_s < float("inf") else None}
        if timeline:
            meta["timeline"] = r.timeline
        if not r.fits:
            worst = int(r.memory.argmax())
            return Measurement(c, Status.INVALID, run_s=run_s, meta=meta,
                               error=f"device {worst} needs {r.peak_memory / 2**30:.2f} GiB, "
                                     f"capacity {r.capacity / 2**30:.2f} GiB")
        return Measurement(c, Status.OK, times=[r.iteration_s], cost=r.iteration_s, run_s=run_s, meta=meta)
