"""`autotune parallelize`: search a parallelization strategy with the execution simulator (FlexFlow)."""

from __future__ import annotations

import json as jsonlib
from typing import Annotated

import typer

from autotune.cli.common import DEFAULT_DB, DbOption, emit_json, handle_errors, open_db
from autotune.errors import UsageError


def _fmt(s: dict) -> str:
    if s["iteration_s"] is None:
        return f"{s['status']}: {s['error']}"
    return (f"{s['iteration_s'] * 1e3:10.3f} ms/iter  {s['throughput']:12.1f} samples/s  "
            f"peak memory {s['peak_memory_bytes'] / 2**30:7.2f} GiB/device")


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    @app.command("parallelize")
    @handle_errors
    def parallelize_cmd(
        model: Annotated[str | None, typer.Option("--model", "-m", help="Built-in model name (see --list), an .onnx file or a .json graph")] = None,
        cluster: Annotated[str | None, typer.Option("--cluster", "-c", help="Cluster preset (e.g. dgx-a100-x2) or .json/.yaml file")] = None,
        batch: Annotated[int | None, typer.Option("--batch", "-b", help="Global batch size (default: the model's)")] = None,
        microbatches: Annotated[int, typer.Option("--microbatches", help="Split each iteration's batch into this many micro-batches (gradient accumulation; a pipeline where ops sit on different device blocks, 1F1B)")] = 1,
        algorithm: Annotated[str, typer.Option("--algorithm", "-a", help="Search algorithm (mcmc, evolutionary, random, ...)")] = "mcmc",
        budget: Annotated[int, typer.Option("--budget", "-n", help="Simulations the search may run")] = 1000,
        time_limit: Annotated[float | None, typer.Option("--time-limit", help="Stop the search after this many seconds")] = None,
        seed: Annotated[int, typer.Option("--seed", help="Random seed")] = 0,
        output: Annotated[str | None, typer.Option("--output", "-o", help="Write the best strategy as JSON to this file")] = None,
        timeline: Annotated[str | None, typer.Option("--timeline", help="Draw the simulated schedule of the best strategy (PNG)")] = None,
        json: Annotated[bool, typer.Option("--json", help="Print one JSON object as the last line of standard output")] = False,
        list_: Annotated[bool, typer.Option("--list", help="List the built-in models and cluster presets")] = False,
        measured_db: Annotated[str | None, typer.Option("--measured-db", help="Database URL whose measured op and collective times override the estimates")] = None,
        measured_device: Annotated[str | None, typer.Option("--measured-device", help="Use measurements of devices whose name contains this (default: the cluster's device, e.g. A100)")] = None,
        db: DbOption = DEFAULT_DB,
        campaign: Annotated[str | None, typer.Option("--campaign", help="Campaign name the search is logged under (a known name resumes it; default: model, cluster, batch, algorithm, seed and a hash of the cluster figures)")] = None,
        progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar on standard error")] = False,
    ) -> None:
        """Find a fast parallelization strategy for training MODEL on CLUSTER; compare it with the baselines.

        The search runs as a campaign logged to --db (every simulated strategy is a trial of task kind
        "parallel"): `autotune trials --campaign NAME` and `autotune plot convergence` show how it went,
        and rerunning with the same --campaign resumes it."""
        from autotune.search_spaces.parallel.clusters import preset_names
        from autotune.search_spaces.parallel.models import DEFAULT_BATCH, MODELS

        if list_:
            if json:
                emit_json({"models": list(MODELS), "clusters": preset_names()})
                return
            typer.echo("models:   " + ", ".join(f"{m} (batch {DEFAULT_BATCH[m]})" for m in MODELS))
            typer.echo("clusters: " + ", ".join(preset_names()) + "  (-xN: N nodes, e.g. dgx-a100-x4)")
            return
        if model is None or cluster is None:
            raise UsageError("--model and --cluster are required (see --list)")
        if budget < 0:
            raise UsageError(f"--budget must be >= 0, got {budget}")
        from autotune.drivers.parallel import parallelize

        target = cluster
        if measured_db:
            from autotune.db import open_database
            from autotune.db.calibration import measured
            from autotune.runners.simulator.calibration import calibrated
            from autotune.search_spaces.parallel.clusters import get_cluster

            mdb = open_database(measured_db, create=False)
            try:
                base = get_cluster(cluster)
                target = calibrated(base, *measured(mdb, measured_device or base.device.name))
            finally:
                mdb.close()
        database = open_db(db)
        try:
            r = parallelize(model, target, batch, algorithm, budget, seed, time_limit, db=database, campaign=campaign,
                            progress=progress, microbatches=microbatches)
        finally:
            database.close()
        out = r.to_json()
        if output:
            with open(output, "w") as f:
                jsonlib.dump(r.best.candidate.payload, f, indent=1)
        if timeline:
            from autotune.search_spaces.parallel.timeline import plot_timeline

            m = r.runner.measure_one(r.best.candidate, timeline=True)
            plot_timeline(m.meta["timeline"], r.cluster, timeline,
                          f"{r.model.name} on {r.cluster.name}, batch {r.model.batch}: {out['best']['source']}")
        if json:
            emit_json(out)
            return
        typer.echo(f"{r.model.name} ({len(r.model.ops)} ops, {r.model.parameters / 1e6:.1f}M parameters, "
                   f"batch {out['batch']}{f' in {microbatches} micro-batches' if microbatches > 1 else ''}) "
                   f"on {r.cluster.name} ({r.cluster.devices} x {r.cluster.device.name})")
        typer.echo(f"  {'best (' + out['best']['source'] + ')':22s}{_fmt(out['best'])}")
        for name, s in out["baselines"].items():
            typer.echo(f"  {name:22s}{_fmt(s)}")
        dp = out["baselines"]["data-parallel"]["iteration_s"]
        if dp:
            typer.echo(f"  speed-up over data parallelism: {dp / out['best']['iteration_s']:.2f}x")
        typer.echo(f"  search: {r.simulations} simulations in {r.search_s:.2f} s ({algorithm}), "
                   f"logged as campaign {r.campaign!r} in {db}")
        if measured_db:
            typer.echo(f"  measured: {len(r.cluster.op_times)} op times, {len(r.cluster.collectives)} collective points")
        if output:
            typer.echo(f"  strategy written to {output}")
        if timeline:
            typer.echo(f"  timeline drawn to {timeline}")
