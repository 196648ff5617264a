"""parallelize(): search the strategy space of a model on a cluster with any registered algorithm.

Every evaluation is a Measurement from :class:`SimulatorRunner`, run as an engine
:class:`Campaign` (so the search is logged and resumable). The baselines and the space's seed
layouts (Megatron-LM's strategy at every tensor x pipeline x data factorisation of the devices,
see :class:`StrategySpace`) are the campaign's warm-up: measured first and logged like any trial
and told to the algorithm (data parallelism first, so MCMC starts from it as FlexFlow does);
the result is the best trial of the campaign, so it is never worse than the best valid baseline
or seed layout. For transformer models the micro-batch count is searched with the layout.

Measured op and collective times (trials of task kinds ``parallel-op`` and ``collective`` in
another database, see :mod:`autotune.db.calibration`) replace the simulator's estimates when
``measured_db`` is given.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import tempfile
import time
from dataclasses import dataclass, field

from autotune.algorithms.registry import algorithm_class, check_options, make_algorithm
from autotune.campaign import Campaign, check_run
from autotune.campaign.resume import recipe_path
from autotune.db import open_database, open_existing_database
from autotune.db.calibration import measured
from autotune.errors import UsageError, argument, check_campaign_name, did_you_mean
from autotune.progress import Progress, make_progress
from autotune.runners.simulator import SimulatorRunner
from autotune.runners.simulator.calibration import calibrated
from autotune.search_spaces.parallel.clusters import Cluster, get_cluster, is_cluster_file, preset, preset_names
from autotune.search_spaces.parallel.graph import Graph
from autotune.search_spaces.parallel.models import (
    DEFAULT_OPTIMIZER,
    MODELS,
    RECOMPUTE,
    default_batch,
    file_kind,
    get_model,
    optimizer_layout,
    rebuild,
    recompute_mode,
    shaped,
)
from autotune.search_spaces.parallel.space import StrategySpace
from autotune.types import Candidate, Measurement

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
               "batch": self.space.batch, "microbatches": self.space.microbatches_of(self.best.candidate),
               **({"recompute": self.space.recompute_of(self.best.candidate)} if self.space.recompute else {}),
               "best": {**self.summary(self.best), "source": self.best_source,
                        "strategy": self.best.candidate.payload},
               "baselines": {n: self.summary(m) for n, m in self.baselines.items()},
               "data_parallel_devices": data_parallel_devices(self),
               "search_s": self.search_s, "simulations": self.simulations, "campaign": self.campaign}
        if self.measured is not None:
            out["measured"] = self.measured
        return out


def check_model(name: str) -> str:
    """``name`` when it is a built-in model or names a .onnx/.json file; else UsageError naming the built-in
    models and the closest ones (checked before anything is opened or built)."""
    if name in MODELS or file_kind(name):
        return name
    if ":" in name:
        shaped(name)  # UsageError naming what is wrong with the shape
        return name
    raise UsageError(f"unknown model {name!r}; valid: {', '.join(MODELS)} or a .onnx/.json graph file"
                     f"{did_you_mean(name, list(MODELS))}")


def check_algorithm(name: str) -> str:
    """``name`` when it is a registered algorithm or names a user's own ("module:Class"); else UsageError naming
    the registered ones and the closest."""
    algorithm_class(name)
    return name


def check_cluster(spec: str) -> str:
    """``spec`` when it is a cluster preset (a ``-xN`` preset with any N >= 1) or a .json/.yaml file; else
    UsageError naming the presets and the closest ones."""
    if is_cluster_file(spec) or preset(spec) is not None:  # a preset too large says so
        return spec
    # suggest concrete names: "dgx-a10-x2" is closer to "dgx-a100-x2" than to the pattern "dgx-a100-xN"
    m = re.fullmatch(r".*-x(\d+)", spec)
    n = m.group(1) if m and int(m.group(1)) >= 1 else "1"
    presets = preset_names()
    names = [p[:-1] + n if p.endswith("-xN") else p for p in presets]
    raise UsageError(f"unknown cluster {spec!r}; valid: {', '.join(presets)} (N = number of nodes) or a "
                     f".json/.yaml file{did_you_mean(spec, names)}")


def micro_batch(model: str, batch: int | None, microbatches: int) -> int | None:
    """The batch of one micro-batch (a file model's own batch is taken as one micro-batch)."""
    if microbatches < 1:
        raise UsageError(f"{argument('microbatches')} must be >= 1, got {microbatches}")
    if batch is not None and batch < 1:  # 0 is no batch: not the model's own
        raise UsageError(f"{argument('batch')} must be >= 1, got {batch}")
    if batch is None:
        batch = default_batch(model)
        if batch is None:
            return None
    if batch % microbatches:
        raise UsageError(f"batch {batch} does not split into {microbatches} equal micro-batches")
    return batch // microbatches


def calibrate(cluster: Cluster, db, device: str | None = None) -> tuple[Cluster, dict]:
    """``cluster`` with the op and collective times measured in ``db`` (a Database or URL) on devices
    whose name contains ``device`` (default: the hardware name of the cluster's device, e.g. A100, also for
    the A100-DeepSpeed, whose measured times are an A100's); and the counts read.
    A ``device`` given that matches no device with measurements is a UsageError naming those devices."""
    database = open_existing_database(db, argument("measured_db")) if isinstance(db, str) else db
    try:
        ops, coll = measured(database, device or cluster.device.hardware_name)
        if device is not None and not ops and not coll:
            names = _measured_devices(database)
            raise UsageError(f"no measured op or collective times on a device whose name contains {device!r}; "
                             f"devices with measurements: {', '.join(names) or 'none'}{did_you_mean(device, names)}")
    finally:
        if database is not db:
            database.close()
    return calibrated(cluster, ops, coll), {"op_times": len(ops), "collectives": len(coll)}


def _measured_devices(database) -> list[str]:
    """Names of the devices that hold parallel-op or collective trials."""
    from sqlalchemy import select

    from autotune.db.models import DeviceRow, TaskRow, TrialRow

    q = (select(DeviceRow.name).distinct().join(TrialRow, TrialRow.device_id == DeviceRow.id)
         .join(TaskRow, TaskRow.id == TrialRow.task_id).where(TaskRow.kind.in_(("parallel-op", "collective"))))
    with database.session() as s:
        return sorted(s.scalars(q).all())


def parallelize(model: str | Graph, cluster: str | Cluster, batch: int | None = None, algorithm: str = "mcmc",
                trials: int | None = None, seed: int = 0, time_budget: float | None = None,
                options: dict | None = None, db="sqlite:///autotune.db", campaign: str | None = None,
                progress: bool | Progress | None = False, microbatches: int = 1, measured_db=None,
                measured_device: str | None = None, fresh: bool = False,
                recompute: bool | str | None = None, optimizer: str = DEFAULT_OPTIMIZER,
                input_shapes: dict | None = None, command_files: dict | None = None,
                layouts: list[str] | None = None) -> ParallelizeResult:
    """Search a parallelization strategy for training ``model`` on ``cluster``, as a campaign.

    ``trials``: simulations of the search after the baselines, over every run of the campaign
    (``DEFAULT_TRIALS`` when neither it nor ``time_budget``, wall seconds of this call, is given).
    Every simulated strategy is a trial in ``db`` (a Database or URL; default ``sqlite:///autotune.db``, a
    file in the working directory, as every driver's; None: a throw-away SQLite file, nothing kept), so a
    named ``campaign`` resumes and `autotune trials` shows it. ``measured_db`` (a Database or URL) supplies measured op and collective times (see :func:`calibrate`). ``progress``:
    the campaign's bar on standard error and a closing summary line (True, False, None: when standard
    error is a terminal, or an :class:`autotune.progress.Progress`). ``options``: the algorithm's
    options; ``fresh``: delete an existing campaign of that name first (its trials stay, to be looked up);
    ``recompute``: activation recomputation of a transformer model, "none", "selective" (the attention core)
    or "full" (only each layer's input kept), fixed for the search; default: searched with the strategy,
    starting from the model's own (none for the built-in ones); ``optimizer``: whose optimizer state layout ZeRO
    stage 1 follows (a key of ``models.OPTIMIZERS``: "megatron" shards the fp32 gradients with the rest,
    "deepspeed-bf16" keeps them whole on every replica); ``input_shapes``: {input name: static shape} for an
    ONNX model's inputs with dynamic axes (as ``tune graph`` takes them; the search is then a task of its
    own). ``layouts``: whole-model layouts (Megatron's strategy at those degrees) to simulate beside the
    baselines, each in the words of a seed layout's name (``layouts.LAYOUT_HELP``, e.g. "t8 p8 mb1 v3 sp
    rc-selective": the one a user runs now); the result is never slower than any that fits. ``command_files``:
    the files the command line writes the result to (``{"output": ..., "timeline": ...}``), kept with the campaign's recipe so that the command printed to resume it
    (on Ctrl-C) writes them too; this call writes nothing."""
    check_campaign_name(campaign)
    if trials is not None and trials < 0:
        raise UsageError(f"the trial budget must be >= 0 simulations after the baselines, not {trials}")
    if time_budget is not None and not time_budget > 0:
        raise UsageError(f"the time budget must be a positive number of seconds, not {time_budget}")
    if trials is None and time_budget is None:
        trials = DEFAULT_TRIALS
    if measured_device is not None and measured_db is None:
        raise UsageError(f"{argument('measured_device')} picks the devices of {argument('measured_db')}'s "
                         f"measurements; give {argument('measured_db')} too")
    check_algorithm(algorithm)
    whole_grads = optimizer_layout(optimizer)
    options = check_options(algorithm, options)
    algo = make_algorithm(algorithm, **options)  # unknown options fail before anything is built
    if isinstance(model, str):
        check_model(model)
    if isinstance(cluster, str):
        check_cluster(cluster)
    bar = make_progress(progress, "parallelize")
    t0 = time.perf_counter()
    graph = model if isinstance(model, Graph) else get_model(model, micro_batch(model, batch, microbatches),
                                                             input_shapes)
    mode = None if recompute is None else recompute_mode(recompute)
    if mode is not None:
        build = rebuild(graph, mode)
        if build is None:
            raise UsageError(f"{argument('recompute')} applies to transformer models; {graph.name!r} is not one")
        graph = build(graph.batch)
    cl = cluster if isinstance(cluster, Cluster) else get_cluster(cluster)
    counts = None
    if measured_db is not None:
        cl, counts = calibrate(cl, measured_db, measured_device)
    space = strategy_space(graph, cl, microbatches, search_recompute=mode is None)
    if layouts and not space.layouts:
        raise UsageError(f"{graph.name!r} has no whole-model layout on {cl.name} to compare with")
    given = dict(space.given(text) for text in layouts or ())
    runner = SimulatorRunner(graph, cl, space, microbatches, whole_grads)
    digest = space.task.params.get("model_digest")  # a model read from a file: its content, not its inner name
    name = campaign or (f"parallelize-{space.task.name}{'-' + digest[:8] if digest else ''}-b{space.task.params['batch']}"
                        f"{f'-m{microbatches}' if microbatches > 1 else ''}{'-rc-' + graph.meta['recompute'] if mode or graph.meta.get('recompute', 'none') != 'none' else ''}"
                        f"{'' if optimizer == DEFAULT_OPTIMIZER else '-' + optimizer}"
                        f"{'-i' + space.task.key[:6] if 'input_shapes' in space.task.params else ''}"
                        f"-{algorithm}-s{seed}-{runner.device.key[:6]}")
    # a refusal opens no database; the campaign is given the baselines and then ``trials`` simulations
    check_run(space, algo, trials=None if trials is None else trials + len(space.baselines()) + len(given),
              time_budget=time_budget, seed=seed)
    with tempfile.TemporaryDirectory(prefix="autotune-parallelize-") as tmp:
        if db is None:
            database = open_database(f"sqlite:///{os.path.join(tmp, 'search.db')}")
        else:
            database = open_database(db) if isinstance(db, str) else db
        try:
            recipe = None
            if isinstance(model, str) and isinstance(cluster, str) and _storable_url(measured_db):
                recipe = {"kind": "parallel", "args": {
                    "model": recipe_path(model), "cluster": recipe_path(cluster), "batch": batch, "algorithm": algorithm, "trials": trials,
                    "seed": seed, "time_budget": time_budget, "options": options, "microbatches": microbatches,
                    **({"recompute": mode} if mode is not None else {}),
                    **({"optimizer": optimizer} if optimizer != DEFAULT_OPTIMIZER else {}),
                    **({"layouts": list(layouts)} if layouts else {}),
                    **({"input_shapes": {k: list(v) for k, v in input_shapes.items()}} if input_shapes else {}),
                    **({"measured_db": measured_db, "measured_device": measured_device} if measured_db else {})}}
                files = {k: recipe_path(v, written=True) for k, v in (command_files or {}).items() if v}
                if files:
                    recipe["files"] = files
            result = _search(space, runner, database, algo, trials, seed, time_budget, name, bar, t0, recipe, fresh,
                             given)
        finally:
            if database is not db:
                database.close()
    result.measured = counts
    bar.summary(summary_text(result))
    return result


def _storable_url(url) -> bool:
    """Whether ``url`` (a --measured-db) can be kept in a recipe: none, or a URL without a password (a
    Database object or a password is never stored)."""
    if url is None:
        return True
    if not isinstance(url, str):
        return False
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).password is None
    except Exception:  # noqa: BLE001 - calibrate() has already opened it; be safe
        return False


def summary_text(r: ParallelizeResult) -> str:
    """The closing line of a strategy search."""
    best = r.best
    if not best.ok:
        return f"{r.simulations:,} strategies simulated in {r.search_s:.1f} s; none fits in memory"
    against, ratio = speedup(r)
    over = f", {ratio:.2f}x over {against}" if ratio is not None else f"; {against}"
    return (f"{r.simulations:,} strategies simulated in {r.search_s:.1f} s, best {best.cost * 1e3:.3f} ms/iteration "
            f"({r.best_source}){over}")


def speedup(r: ParallelizeResult, long: bool = False) -> tuple[str, float | None]:
    """(what the best strategy is compared with, its speed-up over that): data parallelism as
    :func:`data_parallel_label` says it (``long``: and why); where data parallelism does not fit in memory, the
    fastest baseline that fits. The speed-up is None, and the text says why, when no baseline fits or no
    strategy does."""
    if not r.best.ok:
        return "no strategy fits in memory", None
    dp = r.baselines["data-parallel"]
    if dp.ok:
        return data_parallel_label(r, long), dp.cost / r.best.cost
    why = "data parallelism does not fit in memory" if "capacity_bytes" in dp.meta else "data parallelism fails"
    fits = [(m.cost, name) for name, m in r.baselines.items() if m.ok]
    if not fits:
        return f"{why}, nor does any other baseline", None
    cost, name = min(fits)
    return f"{name}, the fastest baseline that fits ({why})", cost / r.best.cost


def data_parallel_devices(r: ParallelizeResult) -> int | None:
    """The devices the data-parallel baseline splits the batch over: the cluster's, or fewer when the batch
    (of one micro-batch) does not divide among them (the largest degree that divides both; 1: one device
    runs the whole batch)."""
    dp = r.baselines.get("data-parallel")
    if dp is None:
        return None
    return max((cfg.parts for cfg in r.space.strategy(dp.candidate)), default=1)


def data_parallel_label(r: ParallelizeResult, long: bool = False) -> str:
    """What the data-parallel baseline is, for the speed-up over it: "data parallelism" when it splits the batch
    over every device; else what it really runs (``long``: and why)."""
    d, n = data_parallel_devices(r), r.cluster.devices
    if d is None or d >= n:
        return "data parallelism"
    what = f"{'micro-batch' if r.space.microbatches > 1 else 'batch'} of {r.model.batch}"
    if d == 1:
        return "one device" + (f" (data parallelism cannot split a {what} over {n} devices)" if long else "")
    return f"data parallelism on {d} of {n} devices" + (f" (a {what} does not split {n} ways)" if long else "")


def strategy_space(graph: Graph, cluster: Cluster, microbatches: int = 1, search_recompute: bool = True) -> StrategySpace:
    """The space a search of ``graph`` runs on: the micro-batch count searched too where the model can be
    rebuilt at another micro-batch size, and (``search_recompute``) its activation recomputation mode."""
    return StrategySpace(graph, cluster, microbatches=microbatches, rebuild=rebuild(graph),
                         recompute_modes=RECOMPUTE if search_recompute else ())


def warmup(space: StrategySpace, given: dict[str, Candidate] | None = None) -> dict[str, Candidate]:
    """What a search measures first, by name: the baselines (data parallelism first), the ``given`` layouts, then
    the space's seed layouts that are not a baseline, taken in turn from each (tensor, pipeline) degree, so that
    a time budget which stops the seeds early has tried every degree rather than the first few; within a degree,
    the less recomputation first (no recomputation, then selective, then full): the faster where it fits, and a
    layout that does not fit costs no timing."""
    out = {**space.baselines(), **(given or {})}
    keys = {c.key for c in out.values()}
    groups: dict[str, list[tuple[str, Candidate]]] = {}
    for name, c in space.seeds().items():
        if c.key not in keys:
            degree = re.match(r"layout (t\d+ p\d+)", name)
            groups.setdefault(degree.group(1) if degree else name, []).append((name, c))
            keys.add(c.key)
    order = {mode: i for i, mode in enumerate(RECOMPUTE)}  # none, selective, full
    for seeds in groups.values():
        seeds.sort(key=lambda s: order.get(s[1].payload.get("recompute", space.recompute), 0))  # stable
    for turn in itertools.zip_longest(*groups.values()):
        out.update(seed for seed in turn if seed is not None)
    return out


def _search(space: StrategySpace, runner: SimulatorRunner, db, algo, trials: int | None, seed: int,
            time_budget: float | None, name: str, bar: Progress, t0: float, recipe: dict | None = None,
            fresh: bool = False, given: dict[str, Candidate] | None = None) -> ParallelizeResult:
    baselines = {**space.baselines(), **(given or {})}
    first = warmup(space, given)
    names = {c.key: n for n, c in first.items()}
    step = 1 if algo.name == "mcmc" else 8  # MCMC's chain moves after every result
    left = None if time_budget is None else max(time_budget - (time.perf_counter() - t0), 1e-3)
    Campaign(name, space, algo, runner, db, trials=None if trials is None else trials + len(first),
             time_budget=left, batch=step, seed=seed, progress=bar.shown, console=bar.console,
             warmup=list(first.values()), warmup_required=len(baselines), recipe=recipe, fresh=fresh).run()
    rows = db.campaign_objectives(db.campaign(name).id)  # not the configurations: a long search has many
    best_at, trace = None, []
    for i, (_, _, objective) in enumerate(rows):
        if objective < math.inf and (best_at is None or objective < rows[best_at][2]):
            best_at = i
        trace.append(rows[best_at][2] if best_at is not None else math.inf)
    trial_of = {key: tid for tid, key, _ in rows}
    wanted = [trial_of[c.key] for c in baselines.values()] + ([rows[best_at][0]] if best_at is not None else [])
    loaded = db.measurements_by_id(wanted)
    measured = {n: loaded[trial_of[c.key]] for n, c in baselines.items()}
    if best_at is None:  # nothing fits in memory: report the first baseline's failure
        source, best = next(iter(measured.items()))
    else:
        best, source = loaded[rows[best_at][0]], names.get(rows[best_at][1], "search")
    return ParallelizeResult(space.graph, space.cluster, space, runner, best, source, measured,
                             time.perf_counter() - t0, runner.simulations, trace[len(first):], name)
