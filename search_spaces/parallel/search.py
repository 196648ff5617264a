"""parallelize(): search the strategy space of a model on a cluster with any registered algorithm.

Every evaluation is a Measurement from :class:`SimulatorRunner`. The baselines are
measured first and told to the algorithm as history (data parallelism first, so
MCMC starts from it as FlexFlow does); the result is the best of the search and
the baselines, so it is never worse than the best valid baseline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from autotune.runners.simulator import SimulatorRunner
from autotune.search_spaces.parallel.clusters import Cluster, get_cluster
from autotune.search_spaces.parallel.graph import Graph
from autotune.search_spaces.parallel.models import get_model
from autotune.search_spaces.parallel.space import StrategySpace

from autotune.registry import make_algorithm
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

    def summary(self, m: Measurement) -> dict:
        return {"iteration_s": m.cost, "status": m.status.value,
                "throughput": m.meta.get("throughput") if m.ok else None,
                "peak_memory_bytes": m.meta.get("peak_memory_bytes"), "error": m.error or None}

    def to_json(self) -> dict:
        return {"model": self.model.name, "cluster": self.cluster.name, "devices": self.cluster.devices,
                "batch": self.model.batch,
                "best": {**self.summary(self.best), "source": self.best_source, "strategy": self.best.candidate.payload},
                "baselines": {n: self.summary(m) for n, m in self.baselines.items()},
                "search_s": self.search_s, "simulations": self.simulations}


def parallelize(model: str | Graph, cluster: str | Cluster, batch: int | None = None, algorithm: str = "mcmc",
                budget: int = 1000, seed: int = 0, time_limit: float | None = None,
                options: dict | None = None) -> ParallelizeResult:
    graph = model if isinstance(model, Graph) else get_model(model, batch)
    cl = cluster if isinstance(cluster, Cluster) else get_cluster(cluster)
    t0 = time.perf_counter()
    space = StrategySpace(graph, cl)
    runner = SimulatorRunner(graph, cl, space)
    baselines = {name: runner.measure_one(c) for name, c in space.baselines().items()}
    algo = make_algorithm(algorithm, **(options or {}))
    algo.bind(space, np.random.default_rng(seed), history=list(baselines.values()))
    best, source = None, ""
    for name, m in baselines.items():
        if best is None or m.objective < best.objective:
            best, source = m, name
    trace: list[float] = []
    step = 1 if algorithm in ("mcmc", "annealing") else 8
    done = 0
    while done < budget and (time_limit is None or time.perf_counter() - t0 < time_limit):
        batch_c = algo.ask(min(step, budget - done))
        if not batch_c:
            break
        ms = runner.measure(space.task, batch_c)
        algo.tell(ms)
        done += len(ms)
        for m in ms:
            if m.objective < best.objective:
                best, source = m, "search"
            trace.append(best.objective)
    return ParallelizeResult(graph, cl, space, runner, best, source, baselines, time.perf_counter() - t0,
                             runner.sim.simulations, trace)
