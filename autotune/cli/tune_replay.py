"""`autotune tune replay`: a campaign on a recorded Kernel Tuner space."""

from __future__ import annotations

from typing import Annotated

import typer

from autotune.algorithms.registry import DEFAULT_ALGORITHM, DEFAULT_COST_MODEL, DEFAULT_TRANSFER_TOP
from autotune.cli.common import (
    DEFAULT_DB,
    AlgorithmOption,
    AlgorithmOptionsOption,
    BatchOption,
    CampaignOption,
    CostModelOption,
    DbOption,
    FreshOption,
    JsonOption,
    ProgressOption,
    RayActorsOption,
    RayOption,
    SeedOption,
    SimOption,
    TimeOption,
    TransferOption,
    TransferTopOption,
    TrialsOption,
    handle_errors,
    report,
)

CacheOption = Annotated[str, typer.Option("--cache", help="Kernel Tuner cache file (.json/.json.gz), or example:pnpoly-rtx3090 (bundled)")]


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    @tune_app.command("replay")
    @handle_errors
    def tune_replay(
        cache: CacheOption,
        algorithm: AlgorithmOption = DEFAULT_ALGORITHM,
        cost_model: CostModelOption = DEFAULT_COST_MODEL,
        trials: TrialsOption = None,
        time_budget: TimeOption = None,
        simulated_budget: SimOption = None,
        seed: SeedOption = 0,
        batch: BatchOption = 8,
        campaign: CampaignOption = None,
        db: DbOption = DEFAULT_DB,
        json: JsonOption = False,
        progress: ProgressOption = True,
        transfer_from: TransferOption = None,
        transfer_top: TransferTopOption = DEFAULT_TRANSFER_TOP,
        ray: RayOption = None,
        ray_actors: RayActorsOption = None,
        measure_delay: Annotated[float, typer.Option("--measure-delay", help="Wall seconds each measurement takes (load tests: the measurement, not the engine, is then the bottleneck)")] = 0.0,
        fresh: FreshOption = False,
        option: AlgorithmOptionsOption = None,
    ) -> None:
        """Tune a recorded space: measurements are answered from the cache and charged to a simulated clock."""
        from autotune.algorithms.registry import parse_options
        from autotune.drivers.replay import tune_replay as run

        report(run(cache, algorithm, cost_model, trials, time_budget, simulated_budget, seed, batch, campaign, db,
                   progress, transfer_from, transfer_top, measure_delay, ray, ray_actors, fresh=fresh,
                   options=parse_options(option)), json)
