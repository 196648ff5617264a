"""`autotune tune kernel gemm|conv2d|softmax`: tune a kernel template on this machine's CPU (gcc) or GPU (nvcc)."""

from __future__ import annotations

from typing import Annotated

import typer

from autotune.algorithms.registry import DEFAULT_ALGORITHM, DEFAULT_COST_MODEL, DEFAULT_TRANSFER_TOP
from autotune.cli.common import (
    DEFAULT_DB,
    AlgorithmOptionsOption,
    CostModelOption,
    DbOption,
    FreshOption,
    RetryFailedOption,
    RayActorsOption,
    RayOption,
    TransferOption,
    TransferTopOption,
    handle_errors,
    report,
    writable_output,
)
from autotune.search_spaces.kernels import KERNEL_SHAPE_HELP


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    @tune_app.command("kernel")
    @handle_errors
    def tune_kernel_cmd(
        name: Annotated[str, typer.Argument(help="Kernel template: gemm, conv2d or softmax")],
        shape: Annotated[str | None, typer.Option("--shape", help=KERNEL_SHAPE_HELP)] = None,
        target: Annotated[str, typer.Option("--target", help="cpu (C via gcc) or cuda (nvcc + pycuda/CuPy)")] = "cpu",
        algorithm: Annotated[str, typer.Option("--algorithm", "-a", help="Search algorithm (see `autotune algorithms`)")] = DEFAULT_ALGORITHM,
        cost_model: CostModelOption = DEFAULT_COST_MODEL,
        transfer_from: TransferOption = None,
        transfer_top: TransferTopOption = DEFAULT_TRANSFER_TOP,
        trials: Annotated[int | None, typer.Option("--trials", "-n", help="Measurements (over all runs of the campaign); default 100")] = None,
        time_budget: Annotated[float | None, typer.Option("--time-budget", help="Wall-clock seconds for this run")] = None,
        seed: Annotated[int, typer.Option("--seed", help="Random seed")] = 0,
        batch: Annotated[int, typer.Option("--batch", help="Candidates built in parallel and committed together")] = 8,
        campaign: Annotated[str | None, typer.Option("--campaign", help="Campaign name; an existing name resumes it")] = None,
        threads: Annotated[int | None, typer.Option("--threads", min=1, help="cpu: pin the OpenMP thread count (default: a knob)")] = None,
        device_index: Annotated[int, typer.Option("--device", help="cuda: GPU index")] = 0,
        backend: Annotated[str, typer.Option("--backend", help="cuda: auto, pycuda or cupy")] = "auto",
        source: Annotated[str | None, typer.Option("--source", help="Write the fastest known configuration's generated code to this file (the search's, or a trial it looked up, such as the default's, when faster)")] = None,
        db: DbOption = DEFAULT_DB,
        json: Annotated[bool, typer.Option("--json", help="Print one JSON object as the last line of standard output")] = False,
        progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar on standard error")] = True,
        ray: RayOption = None,
        ray_actors: RayActorsOption = None,
        fresh: FreshOption = False,
        retry_failed: RetryFailedOption = False,
        option: AlgorithmOptionsOption = None,
    ) -> None:
        """Tune a kernel template's schedule on real hardware; reports the best time, GFLOP/s and the speed-up over the default configuration."""
        if source:
            writable_output(source, "the --source file")
        if trials is None and time_budget is None:
            trials = 100
        from autotune.algorithms.registry import parse_options
        from autotune.drivers.kernel import tune_template

        result, template, extra = tune_template(name, shape, target, algorithm, trials, time_budget, seed, batch,
                                              campaign, db, threads, device_index, backend, progress,
                                              cost_model, transfer_from, transfer_top, ray, ray_actors,
                                              fresh=fresh, options=parse_options(option),
                                              retry_failed=retry_failed)
        if source and result.best_evaluated is not None:  # the fastest known: a look-up (the default's) may beat the search
            write_source(source, template.source(result.best_evaluated.candidate.payload))
        report(result, json, extra)


def write_source(path: str, text: str) -> None:
    """Write the generated code to ``path`` whole or not at all; a write that fails (a full disk) is a UsageError
    saying the trials are stored and that running the command again writes it (it measures nothing again)."""
    from pathlib import Path

    from autotune.errors import UsageError
    from autotune.files import write_whole

    try:
        write_whole(path, lambda name: Path(name).write_text(text))
    except OSError as exc:
        raise UsageError(f"cannot write the --source file {path!r}: {exc.strerror or exc}; the trials are stored: "
                         "the same command again writes it without measuring them again") from None
