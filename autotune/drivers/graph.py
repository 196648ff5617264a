"""optimize_graph(): rewrite an ONNX model with verified substitutions, searched as an engine campaign.

The search is a :class:`Campaign` on a ``GraphSpace``: every evaluated graph is a trial of
task kind "graph" (named after the model, with the model's content hash and the rule set's
hash as parameters) whose candidate is its rewrite sequence from the input model and whose
cost is the sum of its op costs (``autotune.runners.graph``), on the device of the backend
that times the ops. Op timings are trials of task kind "op", shared by every campaign on
that device. So a graph search is logged (``autotune trials --campaign NAME``), and a
campaign of a known name resumes where it stopped: killed at any point, it ends with the
same trials as an uninterrupted run.

What is stored is what was measured: by default every op a stored graph's cost rests on is
timed. With ``max_measure`` the search times at most that many distinct ops and estimates the
rest; its graph costs are then partly guesses, stored on a device of the campaign's own
(``runners.graph.estimating_device``: named "... (estimated op costs)"), so that no other
campaign looks them up and no listing of the device shows them as its measurements. A campaign
keeps the way it started when resumed (read from the device it is stored on).

The winner is then checked end to end (``autotune.drivers.graph_check``): the numeric check
against the original on random inputs, and interleaved whole-model timing on the device. The
searched graph is returned only when it passes the check and is faster than the original beyond
measurement noise; otherwise the original model is returned.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from autotune.algorithms.base import SearchAlgorithm
from autotune.algorithms.registry import ALGORITHMS, algorithm_class, check_options
from autotune.campaign import Campaign, checked_seed
from autotune.campaign.resume import recipe_path
from autotune.db import open_database
from autotune.db.database import Database
from autotune.db.op_costs import DatabaseOpCostCache
from autotune.drivers.graph_check import CHECK_UNITS, finalize, write_model
from autotune.drivers.graph_store import (
    check_campaign_task,
    estimated_note,
    estimated_on_device,
    graph_device,
    own_history,
    store_rules,
)
from autotune.errors import UsageError, argument, check_campaign_name, interruption
from autotune.progress import Progress, make_progress
from autotune.runners.graph import (
    GraphCostRunner,
    OpCosts,
    check_device,
    is_estimating,
    make_backend,
)
from autotune.runners.timing import faster_beyond_noise
from autotune.search_spaces.base import Space
from autotune.search_spaces.graphs.space import GraphSpace

DEFAULT_ALGORITHM = "taso-queue"
#: options for algorithms whose defaults are not the best fit for graph spaces (the bandit's default arms that
#: can search a graph are evolutionary, mcmc and random; here TASO's queue is one of its arms)
GRAPH_OPTIONS = {"bandit": {"algorithms": "taso-queue,mcmc,evolutionary"}}
DEFAULT_TRIALS, DEFAULT_TIME_BUDGET = 3000, 45.0  # when neither budget is given

__all__ = ["DEFAULT_ALGORITHM", "check_device", "faster_beyond_noise", "finalize", "graph_algorithm", "optimize_graph",
           "summary_text", "write_model"]


# ---- the search algorithm ------------------------------------------------------

def graph_algorithms(space: Space) -> list[str]:
    """The registered algorithms that can search ``space`` (those that bind to it: ``bind`` checks the moves
    and traits it needs, SearchAlgorithm.check_space)."""
    names = []
    for name in sorted(ALGORITHMS):
        try:
            algorithm_class(name)(**GRAPH_OPTIONS.get(name, {})).bind(space, np.random.default_rng(0))
            names.append(name)
        except (ImportError, NotImplementedError, UsageError):  # a missing optional package, or a knob-only search
            continue
    return names


def graph_algorithm(name: str, space: Space, alpha: float | None = None, seed: int = 0,
                    options: dict | None = None) -> SearchAlgorithm:
    """The registered algorithm ``name``, checked against ``space`` (its moves and traits, by binding it) before
    anything is stored; ``alpha`` goes to algorithms that have that option (taso-queue, backtracking);
    ``options`` are the algorithm's options (checked: ``check_options``)."""
    cls = algorithm_class(name)
    options = {**GRAPH_OPTIONS.get(name, {}), **check_options(name, options),
               **({} if alpha is None else {"alpha": alpha})}
    probe = cls(**options)
    try:
        probe.bind(space, np.random.default_rng(seed))  # refuses a space it cannot search, before anything is stored
    except (NotImplementedError, UsageError) as exc:
        raise UsageError(f"algorithm {name!r} cannot search graph spaces ({str(exc).rstrip('.')}); valid here: "
                         f"{', '.join(graph_algorithms(space))}") from None
    return cls(**options)


def summary_text(r: dict) -> str:
    """The closing line of a graph search from its report (:func:`optimize_graph`'s return value)."""
    failed = f", {len(r['ops_failed'])} could not be" if r.get("ops_failed") else ""
    return (f"{r['evaluated']:,} graphs evaluated in {r['search_s']:.1f} s ({r['ops_measured']} ops timed{failed}), "
            f"predicted {r['predicted_speedup']:.3f}x, measured {r['candidate_speedup']:.3f}x; kept the "
            f"{'optimized' if r['kept'] else 'original'} graph ({r['reason']}); {r['total_s']:.1f} s in all")


# ---- the driver ----------------------------------------------------------------

def _load(model) -> tuple[object, str]:
    """(ONNX ModelProto, task name): a path is read (its file name without suffix names the task)."""
    from autotune.search_spaces.graphs.onnx_io import _onnx

    onnx = _onnx()
    if isinstance(model, (str, os.PathLike)):
        try:
            return onnx.load(str(model)), Path(model).stem
        except Exception as exc:  # noqa: BLE001 - any unreadable file is a usage error
            raise UsageError(f"cannot read ONNX model {str(model)!r}: {exc}") from None
    if not hasattr(model, "graph"):
        raise UsageError(f"a model is an ONNX file path or an onnx.ModelProto, not {type(model).__name__}")
    return model, model.graph.name or "model"


def _budgets(trials: int | None, time_budget: float | None, batch: int) -> tuple[int | None, float | None]:
    """The budgets, checked before anything is stored (with neither given, the defaults)."""
    for what, v in (("the trial budget", trials), ("the time budget", time_budget), ("the batch size", batch)):
        if v is not None and not (isinstance(v, (int, float)) and v > 0 and math.isfinite(v)):
            raise UsageError(f"{what} must be a positive number, not {v!r}")
    if trials is None and time_budget is None:
        return DEFAULT_TRIALS, DEFAULT_TIME_BUDGET
    return trials, time_budget


def optimize_graph(model, output: str | None = None, *, device: str = "cpu", algorithm: str = DEFAULT_ALGORITHM,
                   alpha: float | None = None, trials: int | None = None, time_budget: float | None = None,
                   seed: int = 0, batch: int = 16, campaign: str | None = None,
                   db: str | Database | None = "sqlite:///autotune.db", rules_file: str | None = None,
                   max_measure: int | None = None, rounds: int = 25, threads: int = 1,
                   fusion: bool | None = None, tolerance: float = 1e-3,
                   progress: bool | Progress | None = False, fresh: bool = False,
                   options: dict | None = None, input_shapes: dict | None = None,
                   start_from: str | None = None) -> dict:
    """Search rewrites of ``model`` (an ONNX path or ModelProto) as a campaign, check the best end to end,
    write the model to keep to ``output`` (when given) and return a JSON-ready report.

    ``device``: "cpu" (onnxruntime), "cuda" (torch on the GPU) or "torch-cpu" (the torch path on the
    CPU). Budgets: ``trials`` (graphs evaluated, over every run of the campaign) and ``time_budget``
    (seconds of this run); with neither, 3000 graphs and 45 s. ``campaign`` names the campaign (a known
    name resumes it; default: derived from the model, device, algorithm and seed). ``db``: a database
    URL or :class:`Database` (default ``sqlite:///autotune.db``, a file in the working directory, as every
    driver's); None uses a throw-away SQLite file (nothing is kept: a benchmark's fresh start). ``max_measure``:
    distinct ops timed during the search (at least 1), the rest estimated by the op-cost model (the ops
    the result relies on are timed at the end); the campaign's graph costs are then partly estimated and
    stored on a device of its own, "... (estimated op costs)", never looked up by another campaign. None
    (the default): every op a stored graph's cost rests on is timed. A resumed campaign keeps the way it
    started. ``fusion``: count ops the runtime fuses into their producer as
    free (default: on for onnxruntime, off for torch). ``progress``: bars on standard error for the
    search and the end-to-end check, and a closing summary line (True, False, None: when standard
    error is a terminal, or an :class:`autotune.progress.Progress`). ``fresh``: delete an existing
    campaign of that name first (its trials stay, to be looked up); ``options``: the algorithm's options;
    ``input_shapes``: {input name: static shape} for inputs with dynamic axes (a rewritten model is written
    with those shapes, the input model kept as it came); ``start_from``: search from a peer optimizer's output ("onnxruntime",
    "ort-transformers", "onnxsim", or "best": the fastest of those faster than the model beyond noise,
    else the model), as a user chains tools; the model kept is then the fastest of the original, the
    peer's and ours (CPU only)."""
    t_start = time.perf_counter()
    check_campaign_name(campaign)
    bar = make_progress(progress, "optimize_graph")
    check_device(device)
    trials, time_budget = _budgets(trials, time_budget, batch)
    if max_measure is not None and max_measure < 1:  # with no op timed, every graph's cost is a guess at nominal rates
        raise UsageError(f"{argument('max_measure')} must be at least 1, not {max_measure}: the search costs graphs "
                         "by the ops it times, and with none timed every cost it stores is a guess at nominal rates, "
                         "which the timing of the result's ops at the end contradicts")
    for what, v in (("rounds", rounds), ("threads", threads)):
        if v < 1:
            raise UsageError(f"{argument(what)} must be at least 1, not {v}")
    seed = checked_seed(seed)  # the algorithm is made with it before the campaign starts
    original, name = _load(model)
    from autotune.search_spaces.graphs import onnx_io
    from autotune.search_spaces.graphs.builtin_rules import builtin_rules
    from autotune.search_spaces.graphs.onnx_prepare import with_input_shapes
    from autotune.search_spaces.graphs.rule_files import load_rules, rule_record

    rules = builtin_rules()
    if rules_file:  # a bad file is refused before any work
        extra = load_rules(rules_file)
        builtin = {r.name for r in rules}
        clash = [r.name for r in extra if r.name in builtin]
        if clash:
            raise UsageError(f"rules file {str(rules_file)!r}: rule {clash[0]!r} has the name of a built-in rule "
                             "(names identify rewrites); rename it")
        rules += extra
    # both models are checked at these shapes, an opset older than onnxruntime runs converted to the oldest it
    # does; the input kept is written as given (its dynamic axes too)
    given, original = original, with_input_shapes(onnx_io.upgraded(original), input_shapes or {})
    if start_from is not None and device != "cpu":
        cpu = argument("device='cpu'", "--device cpu")
        raise UsageError(f"starting from a peer optimizer's output ({argument('start_from')}) is for {cpu} "
                         "(onnxruntime)")
    graph = onnx_io.from_onnx(original)  # names what it cannot import, and refuses shapes beyond the limits
    if not graph.runtime_nodes():
        raise UsageError("the model computes its outputs from constants only (every op folds into a constant): "
                         "there is no graph to search")
    backend = make_backend(device, threads)
    backend.check_runs(original)  # a model the backend cannot run is refused before any other work or storing
    start, start_speedup = "original", 1.0
    if start_from is not None:
        from autotune.drivers.graph_peers import fastest

        start, start_model, start_speedup = fastest(original, start_from, rounds, threads)
        graph = graph if start == "original" else onnx_io.from_onnx(start_model)
    space = GraphSpace(graph, rules, name=name)
    algo = graph_algorithm(algorithm, space, alpha, seed, options)
    with tempfile.TemporaryDirectory(prefix="autotune-graph-") as tmp:
        if isinstance(db, Database):
            database = db
        else:
            database = open_database(db or f"sqlite:///{os.path.join(tmp, 'search.db')}")
        try:
            recipe = None
            if isinstance(model, (str, os.PathLike)):  # a file any worker can read again
                recipe = {"kind": "graph", "args": {
                    "model": recipe_path(model), "device": device, "algorithm": algorithm, "alpha": alpha, "trials": trials,
                    "time_budget": time_budget, "seed": seed, "batch": batch, "rules_file": recipe_path(rules_file),
                    "max_measure": max_measure, "rounds": rounds, "threads": threads, "fusion": fusion,
                    "tolerance": tolerance, **({"options": options} if options else {}),
                    **({"input_shapes": {k: list(v) for k, v in input_shapes.items()}} if input_shapes else {}),
                    **({"start_from": recipe_path(start_from)} if start_from else {})}}
                if output:  # what the command printed to resume it (on Ctrl-C) writes; a worker writes nothing
                    recipe["files"] = {"output": recipe_path(output, written=True)}
            return _optimize(original, graph, space, algo, backend, database, rules, output, device, campaign,
                             trials, time_budget, seed, batch, max_measure, rounds, fusion, tolerance, bar,
                             t_start, [rule_record(r) for r in rules], recipe, fresh, (start, start_speedup), given)
        finally:
            backend.op_runner.close()
            if database is not db:
                database.close()


def _optimize(original, graph, space, algo, backend, database, rules, output, device, campaign, trials, time_budget,
              seed, batch, max_measure, rounds, fusion, tolerance, bar: Progress, t_start, records, recipe,
              fresh: bool, start: tuple[str, float], given) -> dict:
    if campaign and not fresh:  # a name of the user's own: say what differs from the campaign it names, if any
        check_campaign_task(database, campaign, space.task)
    store_rules(database, records)
    op_device = backend.op_runner.device
    cache = DatabaseOpCostCache(database, op_device, backend.label)
    op_costs = OpCosts(backend.op_runner, cache, max_measure=max_measure, label=backend.label,
                       fusion=backend.fusion if fusion is None else fusion)
    runner = GraphCostRunner(space, op_costs)
    space.op_cost, space.fusion = op_costs.op_cost, op_costs.fusion  # what an e-graph extraction minimises
    task = space.task
    name = campaign or (f"graph-{task.name}-{task.key[:8]}-{device}-{algo.name}-s{seed}-{runner.device.key[:6]}"
                        f"{'' if max_measure is None else f'-est{max_measure}'}")
    runner.device, op_costs.max_measure = graph_device(database, name, runner.device, max_measure, fresh)
    runner.timed = not is_estimating(runner.device)  # every op of a stored graph timed, else costs partly estimated
    # costs an older version estimated and stored on the device itself: looked up as measurements, so say so
    estimated_before = estimated_on_device(database, task, runner.device) if runner.timed else {}
    if estimated_before:
        print(estimated_note(task.name, runner.device.name, estimated_before), file=sys.stderr)
    # the measurement cap is the campaign's: ops timed by its earlier runs count (the trials record it)
    earlier = [] if fresh else own_history(database, name)
    op_costs.measured = max((int(m.meta.get("ops_measured", 0)) for m in earlier), default=0)
    measured_before = op_costs.measured
    campaign_id: list[int] = []

    def store_model(metrics: dict, data: bytes) -> None:
        if not campaign_id:
            campaign_id.append(database.campaign(name).id)
        database.save_cost_model(op_costs.model.name, data, metrics, int(metrics.get("n_train", 0)), task, op_device,
                                 campaign_id[0], fmt="json")

    op_costs.on_retrain = store_model
    search = Campaign(name, space, algo, runner, database, trials=trials, time_budget=time_budget, batch=batch,
                      seed=seed, progress=bar.shown, console=bar.console, recipe=recipe, fresh=fresh)
    result = search.run()  # Ctrl-C in the search: the campaign says how to resume it
    try:
        report = _check_and_report(result, original, graph, space, algo, backend, op_costs, output, device, task,
                                   op_device, measured_before, rules, rounds, tolerance, bar, t_start, start, runner,
                                   given)
    except KeyboardInterrupt:  # after the search: rerunning resumes the finished campaign, then checks again
        print(f"interrupted: {result.trials} trials stored, the end-to-end check not done; resume with: "
              f"{search.resume_command()}", file=sys.stderr)
        raise interruption() from None
    # OK graph trials of the model on graph_device itself whose costs rest on estimated ops (an older version's)
    return {**report, "estimated_on_device": sum(estimated_before.values())}


def _check_and_report(result, original, graph, space, algo, backend, op_costs, output, device, task, op_device,
                      measured_before, rules, rounds, tolerance, bar: Progress, t_start, start, runner,
                      given) -> dict:
    """The end-to-end check of a finished search's best graph, the model kept written to ``output``, and the report:
    a rewritten model at the static input shapes it was searched at, the input model as ``given`` (its dynamic
    axes too)."""
    # the best graph evaluated, own or looked up: a graph found by an earlier campaign is as good to keep
    best = result.best_evaluated.candidate if result.best_evaluated is not None else space.initial()
    best_graph = space.graph(best)
    # after the search (the campaign's own bar), the end-to-end check: the ops the result relies on that
    # were only estimated, one unit; the numeric check, CHECK_UNITS; each interleaved timing, one per round
    with bar.phase("end-to-end check", total=1 + CHECK_UNITS + rounds):
        bar.update(description="end-to-end check: timing estimated ops")
        # ops whose cost the result relies on but that were only estimated (beyond the cap) get measured
        confirmed = op_costs.confirm(graph) + op_costs.confirm(best_graph)
        cost_before, cost_after = op_costs.graph_cost(graph), op_costs.graph_cost(best_graph)
        if op_costs.measured > measured_before:
            op_costs.train()  # the op-cost model of every op met, stored with the campaign
        bar.advance(1)
        # searched from a peer's output, even the unrewritten graph differs from the original
        changed = bool(best.payload) or start[0] != "original"
        out_model, report = finalize(original, best_graph, changed, backend, rounds, tolerance, bar)
        bar.update(description="end-to-end check")
    if output:
        write_model(out_model if report["kept"] else given, output, result.campaign)
    applied = [step[0] if isinstance(step, list) else "e-graph extraction" for step in best.payload]
    summary = result.summary()
    out = {
        "model": task.name, "output": output, "device": device, "op_device": op_device.name,
        "backend": backend.name, "algorithm": algo.name, "campaign": result.campaign, "task": summary["task"],
        "status": result.status, "resumed": result.resumed, "trials": result.trials, "evaluated": result.evaluations,
        "best_cost": summary["best_cost"], "best_config": best.payload,
        "rules_applied": applied, "rule_counts": dict(Counter(applied)),
        "nodes_before": len(graph.runtime_nodes()), "nodes_searched": len(best_graph.runtime_nodes()),
        "nodes_after": len(best_graph.runtime_nodes()) if report["kept"] else len(graph.runtime_nodes()),
        "predicted_cost_before_s": cost_before, "predicted_cost_after_s": cost_after,
        "predicted_speedup": cost_before / cost_after, "search_s": result.wall_s,
        # how the stored graph costs were made: "timed" (every op timed) or "estimated" (ops beyond the cap
        # estimated; the trials are on graph_device, the campaign's own); best_cost_estimated: whether the
        # campaign's best stored cost rests on estimated ops (predicted_cost_after_s is then its timed cost)
        "op_costs": "timed" if runner.timed else "estimated", "graph_device": runner.device.name,
        "best_cost_estimated": bool(result.best is not None and result.best.meta.get("ops_estimated")),
        "ops_measured": op_costs.measured - measured_before, "ops_estimated": op_costs.estimated,
        # distinct ops that were only estimated during the search and timed for the end-to-end check
        "ops_confirmed": confirmed,
        # distinct ops met that cannot be timed alone (here or before, stored as failed op trials), and why: a
        # graph holding one is a failed trial of a campaign that times every op
        "ops_failed": [{"op": k[0], "error": why} for k, why in op_costs.failed.items()],
        "rules": len(rules), "simulated_s": summary["simulated_s"],
        "wall_s": summary["wall_s"], "total_s": time.perf_counter() - t_start,
        "started_from": start[0], "start_speedup": start[1], **report,
        **({"saturation": space.saturation} if space.saturation else {}),
    }
    bar.summary(summary_text(out))
    return out
