"""parallelize(): search the strategy space of a model on a cluster with any registered algorithm.

Every evaluation is a Measurement from :class:`SimulatorRunner`, run as an engine
:class:`Campaign` (so the search is logged and resumable). The baselines are measured
first and recorded as the campaign's first trials, which the algorithm gets as history
(data parallelism first, so MCMC starts from it as FlexFlow does); the result is the best
of the search and the baselines, so it is never worse than the best valid baseline.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np
from autotune.runners.simulator import SimulatorRunner
from autotune.search_spaces.parallel.clusters import Cluster, get_cluster
from autotune.search_spaces.parallel.graph import Graph
from autotune.search_spaces.parallel.models import DEFAULT_BATCH, get_model
from autotune.search_spaces.parallel.space import StrategySpace

from autotune.campaign import Campaign
from autotune.db import open_database
from autotune.errors import UsageError
from autotune.algorithms.registry import make_algorithm
from autotune.types import Measurement


@dataclass
class ParallelizeResult:
    model: Graph
    cluster: Cluster
    space: StrategySpace
    runner: SimulatorRunner
    best: Measurement
    best_source: str  # "search" or a baseline name
    baselines: dict[str, Measurement]
    search_s: float
    simulations: int
    trace: list[float] = field(default_factory=list)  # best cost after each evaluation
    campaign: str = ""

    def summary(self, m: Measurement) -> dict:
        return {"iteration_s": m.cost, "status": m.status.value,
                "throughput": m.meta.get("throughput") if m.ok else None,
                "peak_memory_bytes": m.meta.get("peak_memory_bytes"), "error": m.error or None}

    def to_json(self) -> dict:
        return {"model": self.model.name, "cluster": self.cluster.name, "devices": self.cluster.devices,
                "batch": self.model.batch * self.runner.microbatches, "microbatches": self.runner.microbatches,
                "best": {**self.summary(self.best), "source": self.best_source, "strategy": self.best.candidate.payload},
                "baselines": {n: self.summary(m) for n, m in self.baselines.items()},
                "search_s": self.search_s, "simulations": self.simulations, "campaign": self.campaign}


def micro_batch(model: str, batch: int | None, microbatches: int) -> int | None:
    """The batch of one micro-batch (a file model's own batch is taken as one micro-batch)."""
    if microbatches < 1:
        raise UsageError(f"--microbatches must be >= 1, got {microbatches}")
    if batch is None:
        batch = DEFAULT_BATCH.get(model)
        if batch is None:
            return None
    if batch % microbatches:
        raise UsageError(f"batch {batch} does not split into {microbatches} equal micro-batches")
    return batch // microbatches


def parallelize(model: str | Graph, cluster: str | Cluster, batch: int | None = None, algorithm: str = "mcmc",
                budget: int = 1000, seed: int = 0, time_limit: float | None = None,
                options: dict | None = None, db=None, campaign: str | None = None,
                progress: bool = False, microbatches: int = 1) -> ParallelizeResult:
    """Search as a campaign of the engine: every simulated strategy is a trial in ``db`` (a
    throw-away SQLite file when None), so a named campaign resumes and `autotune trials` shows it."""
    graph = model if isinstance(model, Graph) else get_model(model, micro_batch(model, batch, microbatches))
    cl = cluster if isinstance(cluster, Cluster) else get_cluster(cluster)
    t0 = time.perf_counter()
    space = StrategySpace(graph, cl, microbatches=microbatches)
    runner = SimulatorRunner(graph, cl, space, microbatches)
    with tempfile.TemporaryDirectory(prefix="autotune-parallelize-") as tmp:
        database = db or open_database(f"sqlite:///{os.path.join(tmp, 'search.db')}")
        try:
            return _search(graph, cl, space, runner, database, algorithm, budget, seed, time_limit, options,
                           campaign or f"parallelize-{space.task.name}-b{space.task.params['batch']}"
                           f"{f'-m{microbatches}' if microbatches > 1 else ''}-{algorithm}-s{seed}-{runner.device.key[:6]}",
                           progress, t0)
        finally:
            if db is None:
                database.close()


def _search(graph, cl, space, runner, db, algorithm, budget, seed, time_limit, options, name, progress, t0):
    baselines = {n: runner.measure_one(c) for n, c in space.baselines().items()}
    algo = make_algorithm(algorithm, **(options or {}))
    row, _ = db.open_campaign(name, space.task, runner.device, algo.name or algorithm, {})
    tid, did = db.task_id(space.task), db.device_id(runner.device)
    if not db.campaign_history(row.id):  # the baselines open the campaign (MCMC starts from data parallelism)
        known = db.lookup(tid, did, [m.candidate.key for m in baselines.values()])
        db.record_batch(tid, did, row.id, [m for m in baselines.values() if m.candidate.key not in known],
                        [known[m.candidate.key] for m in baselines.values() if m.candidate.key in known])
    step = 1 if algorithm in ("mcmc", "annealing") else 8
    left = None if time_limit is None else max(time_limit - (time.perf_counter() - t0), 1e-3)
    Campaign(name, space, algo, runner, db, trials=budget + len(baselines), time_budget=left, batch=step,
             seed=seed, progress=progress).run()
    history = [m for m, _ in db.campaign_history(row.id)]
    best, source, trace = None, "", []
    names = {m.candidate.key: n for n, m in baselines.items()}
    for m in history:
        if m.ok and (best is None or m.objective < best.objective):
            best, source = m, names.get(m.candidate.key, "search")
        trace.append(best.objective if best else float("inf"))
    best = best or min(baselines.values(), key=lambda m: m.objective)
    return ParallelizeResult(graph, cl, space, runner, best, source or "search", baselines,
                             time.perf_counter() - t0, runner.sim.simulations, trace[len(baselines):], name)
