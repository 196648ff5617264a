"""parallelize(): search the strategy space of a model on a cluster with any registered algorithm.

Every evaluation is a Measurement from :class:`SimulatorRunner`, run as an engine
:class:`Campaign` (so the search is logged and resumable). The baselines are the campaign's
warm-up: its first batch, measured and logged like any trial and told to the algorithm (data
parallelism first, so MCMC starts from it as FlexFlow does); the result is the best trial of
the campaign, so it is never worse than the best valid baseline.

Measured op and collective times (trials of task kinds ``parallel-op`` and ``collective`` in
another database, see :mod:`autotune.db.calibration`) replace the simulator's estimates when
``measured_db`` is given.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field

from autotune.algorithms.registry import make_algorithm
from autotune.campaign import Campaign
from autotune.db import open_database
from autotune.db.calibration import measured
from autotune.errors import UsageError
from autotune.runners.simulator import SimulatorRunner
from autotune.runners.simulator.calibration import calibrated
from autotune.search_spaces.parallel.clusters import Cluster, get_cluster
from autotune.search_spaces.parallel.graph import Graph
from autotune.search_spaces.parallel.models import DEFAULT_BATCH, get_model
from autotune.search_spaces.parallel.space import StrategySpace
from autotune.types import Measurement

#: simulations of the search (after the baselines) when no budget is given
DEFAULT_TRIALS = 1000


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
    simulations: int  # simulations run by this call (a resumed campaign's earlier ones are logged)
    trace: list[float] = field(default_factory=list)  # best cost after each evaluation of the search
    campaign: str = ""
    measured: dict | None = None  # op times and collective points read from measured_db, when given

    def summary(self, m: Measurement) -> dict:
        return {"iteration_s": m.cost, "status": m.status.value,
                "throughput": m.meta.get("throughput") if m.ok else None,
                "peak_memory_bytes": m.meta.get("peak_memory_bytes"), "error": m.error or None}

    def to_json(self) -> dict:
        out = {"model": self.model.name, "cluster": self.cluster.name, "devices": self.cluster.devices,
               "batch": self.model.batch * self.runner.microbatches, "microbatches": self.runner.microbatches,
               "best": {**self.summary(self.best), "source": self.best_source,
                        "strategy": self.best.candidate.payload},
               "baselines": {n: self.summary(m) for n, m in self.baselines.items()},
               "search_s": self.search_s, "simulations": self.simulations, "campaign": self.campaign}
        if self.measured is not None:
            out["measured"] = self.measured
        return out


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


def calibrate(cluster: Cluster, db, device: str | None = None) -> tuple[Cluster, dict]:
    """``cluster`` with the op and collective times measured in ``db`` (a Database or URL) on devices
    whose name contains ``device`` (default: the cluster's device name, e.g. A100); and the counts read."""
    database = open_database(db, create=False) if isinstance(db, str) else db
    try:
        ops, coll = measured(database, device or cluster.device.name)
    finally:
        if database is not db:
            database.close()
    return calibrated(cluster, ops, coll), {"op_times": len(ops), "collectives": len(coll)}


def parallelize(model: str | Graph, cluster: str | Cluster, batch: int | None = None, algorithm: str = "mcmc",
                trials: int | None = None, seed: int = 0, time_budget: float | None = None,
                options: dict | None = None, db=None, campaign: str | None = None, progress: bool = False,
                microbatches: int = 1, measured_db=None, measured_device: str | None = None) -> ParallelizeResult:
    """Search a parallelization strategy for training ``model`` on ``cluster``, as a campaign.

    ``trials``: simulations of the search after the baselines, over every run of the campaign
    (``DEFAULT_TRIALS`` when neither it nor ``time_budget``, wall seconds of this call, is given).
    Every simulated strategy is a trial in ``db`` (a Database or URL; a throw-away SQLite file when
    None), so a named ``campaign`` resumes and `autotune trials` shows it. ``measured_db`` (a
    Database or URL) supplies measured op and collective times (see :func:`calibrate`)."""
    if trials is not None and trials < 0:
        raise UsageError(f"the trial budget must be >= 0 simulations after the baselines, not {trials}")
    if time_budget is not None and not time_budget > 0:
        raise UsageError(f"the time budget must be a positive number of seconds, not {time_budget}")
    if trials is None and time_budget is None:
        trials = DEFAULT_TRIALS
    algo = make_algorithm(algorithm, **(options or {}))  # an unknown name fails before anything is built
    t0 = time.perf_counter()
    graph = model if isinstance(model, Graph) else get_model(model, micro_batch(model, batch, microbatches))
    cl = cluster if isinstance(cluster, Cluster) else get_cluster(cluster)
    counts = None
    if measured_db is not None:
        cl, counts = calibrate(cl, measured_db, measured_device)
    space = StrategySpace(graph, cl, microbatches=microbatches)
    runner = SimulatorRunner(graph, cl, space, microbatches)
    name = campaign or (f"parallelize-{space.task.name}-b{space.task.params['batch']}"
                        f"{f'-m{microbatches}' if microbatches > 1 else ''}-{algorithm}-s{seed}-{runner.device.key[:6]}")
    with tempfile.TemporaryDirectory(prefix="autotune-parallelize-") as tmp:
        if db is None:
            database = open_database(f"sqlite:///{os.path.join(tmp, 'search.db')}")
        else:
            database = open_database(db) if isinstance(db, str) else db
        try:
            recipe = None
            if isinstance(model, str) and isinstance(cluster, str) and measured_db is None:
                recipe = {"kind": "parallel", "args": {
                    "model": model, "cluster": cluster, "batch": batch, "algorithm": algorithm, "trials": trials,
                    "seed": seed, "time_budget": time_budget, "options": options, "microbatches": microbatches}}
            result = _search(space, runner, database, algo, trials, seed, time_budget, name, progress, t0, recipe)
        finally:
            if database is not db:
                database.close()
    result.measured = counts
    return result


def _search(space: StrategySpace, runner: SimulatorRunner, db, algo, trials: int | None, seed: int,
            time_budget: float | None, name: str, progress: bool, t0: float, recipe: dict | None = None
            ) -> ParallelizeResult:
    baselines = space.baselines()
    step = 1 if algo.name == "mcmc" else 8  # MCMC's chain moves after every result
    left = None if time_budget is None else max(time_budget - (time.perf_counter() - t0), 1e-3)
    Campaign(name, space, algo, runner, db, trials=None if trials is None else trials + len(baselines),
             time_budget=left, batch=step, seed=seed, progress=progress, warmup=list(baselines.values()),
             recipe=recipe).run()
    history = [m for m, _ in db.campaign_history(db.campaign(name).id)]
    by_key = {m.candidate.key: m for m in history}
    measured = {n: by_key[c.key] for n, c in baselines.items()}
    names = {c.key: n for n, c in baselines.items()}
    best, source, trace = None, "", []
    for m in history:
        if m.ok and (best is None or m.objective < best.objective):
            best, source = m, names.get(m.candidate.key, "search")
        trace.append(best.objective if best else float("inf"))
    if best is None:  # nothing fits in memory: report the first baseline's failure
        source, best = next(iter(measured.items()))
    return ParallelizeResult(space.graph, space.cluster, space, runner, best, source, measured,
                             time.perf_counter() - t0, runner.sim.simulations, trace[len(baselines):], name)
