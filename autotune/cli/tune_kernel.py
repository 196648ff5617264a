"""`autotune tune kernel gemm|conv2d|softmax`: tune a kernel template on this machine's CPU (gcc) or GPU (nvcc).

From Python, in a few lines:

    from autotune.cli.tune_kernel import tune_kernel
    result, template, extra = tune_kernel("gemm", "512,512,512", "cpu", trials=50)
    print(extra["gflops"], template.source(result.best.candidate.payload))
"""

from __future__ import annotations

from typing import Annotated

import typer

from autotune.cli.common import DEFAULT_DB, DbOption, handle_errors, open_db, report
from autotune.cli.tune_replay import (
    DEFAULT_ALGORITHM, DEFAULT_COST_MODEL, CostModelOption, TransferOption, TransferTopOption,
)
from autotune.errors import UsageError

DEFAULT_SHAPES = {"gemm": "1024,1024,1024", "conv2d": "1,64,56,56,64,3,3,stride=1,pad=1", "softmax": "4096,4096"}
SHAPE_HELP = ("gemm: M,N,K; conv2d: N,C,H,W,K,R,S[,stride=1,pad=0]; softmax: rows,cols "
              "(also name=value pairs, e.g. M=512,N=256,K=128)")


def make_runner(name: str, shape, target: str, threads: int | None = None, device_index: int = 0,
                backend: str = "auto", seed: int = 0, protocol=None):
    """(space, template, runner) for one kernel on this machine."""
    from autotune.search_spaces.kernels import kernel_problem

    if target == "cpu":
        from autotune.runners.c import CRunner

        space, template = kernel_problem(name, shape, "cpu", threads=threads)
        return space, template, CRunner(template, protocol=protocol, seed=seed)
    if target == "cuda":
        from autotune.runners.cuda import CudaRunner, probe_cuda_device

        if threads is not None:
            raise UsageError("--threads applies to --target cpu only")
        props = probe_cuda_device(device_index, backend)
        space, template = kernel_problem(name, shape, "cuda", device_props=props)
        return space, template, CudaRunner(template, device_index, backend, protocol=protocol, seed=seed)
    raise UsageError(f"unknown target {target!r}; valid: cpu, cuda")


def default_measurement(database, template, runner):
    """The untuned baseline: looked up in the database, else measured and stored (outside any campaign)."""
    cand = template.space().initial()
    tid, did = database.task_id(template.task), database.device_id(runner.device)
    known = database.lookup(tid, did, [cand.key])
    if cand.key in known:
        return known[cand.key]
    m = runner.measure(template.task, [cand])[0]
    database.add_trials(template.task, runner.device, [m])
    return m


def tune_kernel(name: str, shape=None, target: str = "cpu", algorithm: str = DEFAULT_ALGORITHM, trials: int | None = 100,
                time_budget: float | None = None, seed: int = 0, batch: int = 8, campaign: str | None = None,
                db: str = DEFAULT_DB, threads: int | None = None, device_index: int = 0, backend: str = "auto",
                progress: bool = False, cost_model: str | None = DEFAULT_COST_MODEL, transfer_from: str | None = None,
                transfer_top: int = 8):
    """Run (or resume) a kernel tuning campaign; (CampaignResult, template, extra summary keys)."""
    from autotune.campaign import Campaign
    from autotune.registry import make_search
    from autotune.search_spaces.kernels import TEMPLATES

    if name not in TEMPLATES:
        raise UsageError(f"unknown kernel {name!r}; valid: {', '.join(TEMPLATES)}")
    algo = make_search(algorithm, cost_model)
    shape = shape or DEFAULT_SHAPES[name]
    space, template, runner = make_runner(name, shape, target, threads, device_index, backend, seed)
    label = "x".join(str(v) for v in template.shape.values())
    database = open_db(db)
    if transfer_from:
        from autotune.transfer.sources import warm_start_search

        warm, sources = warm_start_search(database, template.task, runner.device, algorithm, transfer_from, transfer_top)
        algo = warm if warm is not None else algo
        typer.echo("warm start from: " + (", ".join(s.device.name for s in sources)
                                          or "no similar device measured this task; ordinary search"), err=True)
    cname = campaign or f"kernel-{name}-{target}-{label}{f'-t{threads}' if threads else ''}-{algo.name}-seed{seed}"
    try:
        base = default_measurement(database, template, runner)
        result = Campaign(cname, space, algo, runner, database, trials=trials, time_budget=time_budget,
                          batch=batch, seed=seed, progress=progress).run()
    finally:
        runner.close()
        database.close()
    best = result.best
    default_cost = base.cost if base.ok else None
    extra = {
        "gflops": template.flops / best.cost / 1e9 if best is not None else None,
        "gbytes_s": template.bytes / best.cost / 1e9 if best is not None else None,
        "default_cost": default_cost,
        "default_status": base.status.value,
        "speedup_over_default": default_cost / best.cost if best is not None and default_cost else None,
    }
    return result, template, extra


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    @tune_app.command("kernel")
    @handle_errors
    def tune_kernel_cmd(
        name: Annotated[str, typer.Argument(help="Kernel template: gemm, conv2d or softmax")],
        shape: Annotated[str | None, typer.Option("--shape", help=SHAPE_HELP)] = None,
        target: Annotated[str, typer.Option("--target", help="cpu (C via gcc) or cuda (nvcc + pycuda/CuPy)")] = "cpu",
        algorithm: Annotated[str, typer.Option("--algorithm", "-a", help="Search algorithm (see `autotune algorithms`)")] = DEFAULT_ALGORITHM,
        cost_model: CostModelOption = DEFAULT_COST_MODEL,
        transfer_from: TransferOption = None,
        transfer_top: TransferTopOption = 8,
        trials: Annotated[int | None, typer.Option("--trials", "-n", help="Measurements (over all runs of the campaign); default 100")] = None,
        time_budget: Annotated[float | None, typer.Option("--time-budget", help="Wall-clock seconds for this run")] = None,
        seed: Annotated[int, typer.Option("--seed", help="Random seed")] = 0,
        batch: Annotated[int, typer.Option("--batch", help="Candidates built in parallel and committed together")] = 8,
        campaign: Annotated[str | None, typer.Option("--campaign", help="Campaign name; an existing name resumes it")] = None,
        threads: Annotated[int | None, typer.Option("--threads", help="cpu: pin the OpenMP thread count (default: a knob)")] = None,
        device_index: Annotated[int, typer.Option("--device", help="cuda: GPU index")] = 0,
        backend: Annotated[str, typer.Option("--backend", help="cuda: auto, pycuda or cupy")] = "auto",
        source: Annotated[str | None, typer.Option("--source", help="Write the best configuration's generated code to this file")] = None,
        db: DbOption = DEFAULT_DB,
        json: Annotated[bool, typer.Option("--json", help="Print one JSON object as the last line of standard output")] = False,
        progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar on standard error")] = True,
    ) -> None:
        """Tune a kernel template's schedule on real hardware; reports the best time, GFLOP/s and the speed-up over the default configuration."""
        if trials is None and time_budget is None:
            trials = 100
        result, template, extra = tune_kernel(name, shape, target, algorithm, trials, time_budget, seed, batch,
                                              campaign, db, threads, device_index, backend, progress,
                                              cost_model, transfer_from, transfer_top)
        if source and result.best is not None:
            with open(source, "w") as f:
                f.write(template.source(result.best.candidate.payload))
        report(result, json, extra)
