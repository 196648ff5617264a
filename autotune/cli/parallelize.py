"""`autotune tune parallel` (alias `autotune parallelize`): search a parallelization strategy with the
execution simulator (FlexFlow)."""

from __future__ import annotations

import json as jsonlib
from typing import Annotated

import typer

from autotune.cli.common import (
    DEFAULT_DB,
    AlgorithmOptionsOption,
    CampaignOption,
    DbOption,
    FreshOption,
    InputShapeOption,
    JsonOption,
    OldBudgetOption,
    OldTimeLimitOption,
    ProgressOption,
    SeedOption,
    TimeOption,
    emit_json,
    handle_errors,
    open_db,
    with_old_budget_names,
    writable_output,
)
from autotune.errors import UsageError
from autotune.search_spaces.parallel.layouts import LAYOUT_HELP

ParallelTrialsOption = Annotated[int | None, typer.Option(
    "--trials", "-n", help="Simulations of the search after the baselines (over all runs of the campaign); "
                           "1000 when no budget is given")]


def _fmt(s: dict) -> str:
    if s["iteration_s"] is None:
        return f"{s['status']}: {s['error']}"
    return (f"{s['iteration_s'] * 1e3:10.3f} ms/iter  {s['throughput']:12.1f} samples/s  "
            f"peak memory {s['peak_memory_bytes'] / 2**30:7.2f} GiB/device")


def _check_files_apart(output: str | None, timeline: str | None, inputs: dict[str, str | None]) -> None:
    """UsageError when ``--output`` or ``--timeline`` names one of ``inputs`` (option -> file: the model, the
    cluster file, the --db SQLite file), or both name one file: writing the result there would overwrite it."""
    import os

    def same(a: str, b: str) -> bool:
        try:
            return os.path.realpath(a) == os.path.realpath(b) or (os.path.exists(a) and os.path.exists(b)
                                                                  and os.path.samefile(a, b))
        except (OSError, ValueError):
            return False

    for opt, path in (("--output", output), ("--timeline", timeline)):
        for other, file in {**inputs, **({"--output": output} if opt == "--timeline" else {})}.items():
            if path and file and same(path, file):
                raise UsageError(f"{opt} {path!r} is the file of {other}: writing the result there would overwrite "
                                 f"it; give {opt} another file")


def tune_parallel(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Built-in model name (see --list), a transformer's shape BASE:KEY=VALUE,... (a built-in GPT, Llama or BERT with those keys changed, e.g. llama-3-8b:seq=4096, or transformer: with layers, hidden, heads, seq and vocab; --list names every key), an .onnx file or a .json graph")] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", "-c", help="Cluster preset (e.g. dgx-a100-x2) or .json/.yaml file")] = None,
    batch: Annotated[int | None, typer.Option("--batch", "-b", help="Global batch size of the model (default: the model's)")] = None,
    microbatches: Annotated[int, typer.Option("--microbatches", help="Split each iteration's batch into this many micro-batches (gradient accumulation; a pipeline where ops sit on different device blocks, 1F1B) for the baselines; for transformer models the search also tries other counts (layouts)")] = 1,
    optimizer: Annotated[str, typer.Option("--optimizer", help="Whose optimizer the strategies run with: megatron (Megatron-LM's distributed optimizer shards fp32 weights, gradients and Adam moments under ZeRO stage 1: 4 + 16/d bytes per parameter over d replicas) or deepspeed-bf16 (DeepSpeed's BF16 optimizer keeps its fp32 gradients whole, 8 + 12/d, and adds each micro-batch's gradients into them after its backward)")] = "megatron",
    recompute: Annotated[str | None, typer.Option("--recompute", help="Fix the activation recomputation of a transformer model: full (keep only each layer's input for the backward; what large models need to fit), selective (recompute the attention core only) or none. Default: the search chooses it with the strategy, starting from none")] = None,
    layout: Annotated[list[str] | None, typer.Option("--layout", metavar="WORDS", help="A whole-model layout (Megatron's strategy at its degrees) to simulate beside the baselines, e.g. the one you run now (repeatable; the result is never slower than one that fits): " + LAYOUT_HELP)] = None,
    algorithm: Annotated[str, typer.Option("--algorithm", "-a", help="Search algorithm (mcmc, evolutionary, random, ...; see `autotune algorithms`)")] = "mcmc",
    trials: ParallelTrialsOption = None,
    time_budget: TimeOption = None,
    seed: SeedOption = 0,
    output: Annotated[str | None, typer.Option("--output", "-o", help="Write the best strategy as JSON to this file")] = None,
    timeline: Annotated[str | None, typer.Option("--timeline", help="Draw the simulated schedule of the best strategy (.png, .svg or .pdf)")] = None,
    json: JsonOption = False,
    list_: Annotated[bool, typer.Option("--list", help="List the built-in models and cluster presets")] = False,
    measured_db: Annotated[str | None, typer.Option("--measured-db", help="Database URL whose measured op and collective times override the estimates")] = None,
    input_shape: InputShapeOption = None,
    measured_device: Annotated[str | None, typer.Option("--measured-device", help="Use measurements of devices whose name contains this (default: the cluster's device, e.g. A100)")] = None,
    db: DbOption = DEFAULT_DB,
    campaign: CampaignOption = None,
    fresh: FreshOption = False,
    option: AlgorithmOptionsOption = None,
    progress: ProgressOption = True,
    budget: OldBudgetOption = None,
    time_limit: OldTimeLimitOption = None,
    ray: Annotated[str | None, typer.Option("--ray", metavar="ADDRESS", help="Run the campaign as a Ray task on this cluster (local, auto or HOST:PORT)")] = None,
) -> None:
    """Find a fast parallelization strategy for training MODEL on CLUSTER; compare it with the baselines.

    The search runs as a campaign logged to --db: the baselines (data parallelism, Megatron, model
    parallelism) are its first trials, then every simulated strategy is one (task kind "parallel").
    `autotune trials --campaign NAME` and `autotune plot convergence` show how it went, and rerunning
    with the same --campaign resumes it.

    On a terminal, the campaign's bar on standard error shows the search, and a summary line ends the
    run (--no-progress: neither)."""
    from autotune.algorithms.registry import parse_options
    from autotune.progress import Progress
    from autotune.search_spaces.parallel.clusters import preset_names
    from autotune.search_spaces.parallel.models import DEFAULT_BATCH, MODELS, SHAPE

    if output:
        writable_output(output, "the strategy file")
    if timeline:
        writable_output(timeline, "the timeline", (".png", ".svg", ".pdf"))
    if output or timeline:
        from autotune.db.engine import sqlite_file
        from autotune.search_spaces.parallel.clusters import is_cluster_file
        from autotune.search_spaces.parallel.models import file_kind

        _check_files_apart(output, timeline, {
            "--model": model if model and file_kind(model) else None,
            "--cluster": cluster if cluster and is_cluster_file(cluster) else None,
            "--db": sqlite_file(db), "--measured-db": sqlite_file(measured_db) if measured_db else None})

    if list_:
        if json:
            emit_json({"models": list(MODELS), "shape_keys": list(SHAPE), "clusters": preset_names()})
            return
        typer.echo("models:   " + ", ".join(f"{m} (batch {DEFAULT_BATCH[m]})" for m in MODELS))
        typer.echo("shapes:   BASE:key=value,... (a GPT, Llama or BERT above, or transformer) with keys "
                   + ", ".join(SHAPE) + " (e.g. llama-3-8b:seq=4096,layers=16)")
        typer.echo("clusters: " + ", ".join(preset_names()) + "  (-xN: N nodes, e.g. dgx-a100-x4)")
        return
    trials, time_budget = with_old_budget_names(trials, time_budget, budget, time_limit)
    if model is None or cluster is None:
        raise UsageError("--model and --cluster are required (see --list)")
    from autotune.drivers.parallel import (
        check_algorithm,
        check_cluster,
        check_model,
        parallelize,
        speedup,
        summary_text,
    )

    check_model(model)  # before the database is opened: a typo creates nothing
    check_cluster(cluster)
    from autotune.search_spaces.graphs.onnx_prepare import parse_input_shapes
    from autotune.search_spaces.parallel.models import file_kind

    input_shapes = parse_input_shapes(input_shape) or None
    if input_shapes and file_kind(model) != "onnx":
        raise UsageError(f"--input-shape applies to ONNX models, not {model!r}")
    if recompute is not None:
        from autotune.search_spaces.parallel.models import recompute_mode

        recompute_mode(recompute)
    from autotune.search_spaces.parallel.models import optimizer_layout

    optimizer_layout(optimizer)
    check_algorithm(algorithm)
    if trials is not None and trials < 0:
        raise UsageError(f"--trials must be >= 0 (simulations after the baselines), got {trials}")
    if time_budget is not None and not time_budget > 0:
        raise UsageError(f"--time-budget must be a positive number of seconds, got {time_budget}")
    # the summary ends the text report; with --json it comes before the JSON line
    bar = Progress(ctx.command_path.split(" ", 1)[-1], enabled=progress, defer_summary=not json)
    if ray is not None:
        from autotune.drivers.scale import run_on_ray

        open_db(db).close()  # a bad URL fails here, not on the cluster
        r = run_on_ray("parallel", {"model": model, "cluster": cluster, "batch": batch, "algorithm": algorithm,
                                    "trials": trials, "seed": seed, "time_budget": time_budget, "db": db,
                                    "campaign": campaign, "microbatches": microbatches, "measured_db": measured_db,
                                    "measured_device": measured_device, "options": parse_options(option) or None,
                                    "fresh": fresh, "recompute": recompute, "optimizer": optimizer,
                                    "input_shapes": input_shapes, "layouts": layout or None}, ray)
        bar.summary(summary_text(r))
    else:
        # the URL, opened once the model, the cluster and the search are accepted: a refusal leaves no --db file
        r = parallelize(model, cluster, batch, algorithm, trials, seed, time_budget, db=db, campaign=campaign,
                        progress=bar, microbatches=microbatches, measured_db=measured_db,
                        measured_device=measured_device, options=parse_options(option) or None, fresh=fresh,
                        recompute=recompute, optimizer=optimizer, input_shapes=input_shapes,
                        command_files={"output": output, "timeline": timeline}, layouts=layout or None)
    out = r.to_json()
    fits = r.best.ok  # where no strategy fits in memory there is none to write or draw
    if output and fits:
        with open(output, "w") as f:
            jsonlib.dump(r.best.candidate.payload, f, indent=1)
    if timeline and fits:
        from autotune.search_spaces.parallel.timeline import plot_timeline

        m = r.runner.measure_one(r.best.candidate, timeline=True)
        plot_timeline(m.meta["timeline"], r.cluster, timeline,
                      f"{r.model.name} on {r.cluster.name}, batch {r.model.batch}: {out['best']['source']}")
    if json:
        emit_json(out)
        return
    micro = f" in {out['microbatches']} micro-batches (best strategy)" if out["microbatches"] > 1 else ""
    if out.get("recompute") not in (None, "none"):
        micro += f", {out['recompute']} recomputation"
    typer.echo(f"{r.model.name} ({len(r.model.ops)} ops, {r.model.parameters / 1e6:.1f}M parameters, "
               f"batch {out['batch']}{micro}) "
               f"on {r.cluster.name} ({r.cluster.devices} x {r.cluster.device.name})")
    rows = [(f"best ({out['best']['source']})", out["best"]), *out["baselines"].items()]
    width = max(22, *(len(label) + 2 for label, _ in rows))  # a long source (a seed layout's name) keeps the columns
    for label, s in rows:
        typer.echo(f"  {label:{width}s}{_fmt(s)}")
    against, ratio = speedup(r, long=True)
    typer.echo(f"  speed-up over {against}: {ratio:.2f}x" if ratio is not None else
               f"  no speed-up: {against}{'' if layout or not r.best.ok else ' (--layout compares with a layout you name)'}")
    for label, m in r.baselines.items():
        if label.startswith("given ") and m.ok and r.best.ok and not against.startswith(label):  # not said twice
            typer.echo(f"  speed-up over the {label}: {m.cost / r.best.cost:.2f}x")
    typer.echo(f"  search: {r.simulations} simulations in {r.search_s:.2f} s ({algorithm}), "
               f"logged as campaign {r.campaign!r} in {db}")
    if r.measured is not None:
        typer.echo(f"  measured: {r.measured['op_times']} op times, {r.measured['collectives']} collective points")
    for path, what in ((output, "strategy written"), (timeline, "timeline drawn")):
        if path:
            typer.echo(f"  {what} to {path}" if fits else f"  nothing written to {path}: no strategy fits in memory")
    bar.write_summary()


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    tune_app.command("parallel")(handle_errors(tune_parallel))
    app.command("parallelize", help="Alias of `autotune tune parallel`. " + tune_parallel.__doc__)(
        handle_errors(tune_parallel))
