"""`autotune tune replay`: a campaign on a recorded Kernel Tuner space."""

from __future__ import annotations

from typing import Annotated

import typer

from autotune.algorithms.registry import DEFAULT_ALGORITHM, DEFAULT_COST_MODEL
from autotune.cli.common import DEFAULT_DB, DbOption, handle_errors, report

CacheOption = Annotated[str, typer.Option("--cache", help="Kernel Tuner cache file (.json/.json.gz), or example:pnpoly-rtx3090 (bundled)")]
AlgorithmOption = Annotated[str, typer.Option("--algorithm", "-a", help="Search algorithm (see `autotune algorithms`)")]
TrialsOption = Annotated[int | None, typer.Option("--trials", "-n", help="Measurements to make (over all runs of the campaign); default 100 when no budget is given")]
TimeOption = Annotated[float | None, typer.Option("--time-budget", help="Wall-clock seconds for this run")]
SimOption = Annotated[float | None, typer.Option("--simulated-budget", help="Simulated seconds (recorded compile + benchmark time)")]
SeedOption = Annotated[int, typer.Option("--seed", help="Random seed")]
BatchOption = Annotated[int, typer.Option("--batch", help="Candidates asked for and committed together")]
CampaignOption = Annotated[str | None, typer.Option("--campaign", help="Campaign name; an existing name resumes it (default: derived from the inputs)")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object as the last line of standard output")]
CostModelOption = Annotated[str | None, typer.Option("--cost-model", help="Guide the algorithm with a cost model (xgb, the default): it searches the model's predictions and only the most promising candidates are measured; none turns it off")]
TransferOption = Annotated[str | None, typer.Option("--transfer-from", help="Warm-start from other devices' measurements of this task in the database: DEVICE[,DEVICE...] or auto (the most similar)")]
TransferTopOption = Annotated[int, typer.Option("--transfer-top", help="With --transfer-from: the sources' best configurations measured first")]
ProgressOption = Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar on standard error")]


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
        transfer_top: TransferTopOption = 8,
    ) -> None:
        """Tune a recorded space: measurements are answered from the cache and charged to a simulated clock."""
        from autotune.drivers.replay import tune_replay as run

        report(run(cache, algorithm, cost_model, trials, time_budget, simulated_budget, seed, batch, campaign, db,
                   progress, transfer_from, transfer_top), json)
