"""`autotune tune command`: tune the knobs of one's own program, run once per configuration."""

from __future__ import annotations

from typing import Annotated

import typer

from autotune.algorithms.registry import DEFAULT_ALGORITHM, DEFAULT_COST_MODEL
from autotune.cli.common import (
    DEFAULT_DB,
    AlgorithmOption,
    AlgorithmOptionsOption,
    BatchOption,
    CampaignOption,
    CostModelOption,
    DbOption,
    FreshOption,
    RetryFailedOption,
    JsonOption,
    ProgressOption,
    SeedOption,
    TimeOption,
    TrialsOption,
    handle_errors,
    report,
)

SpaceOption = Annotated[str, typer.Option("--space", help="Space file (YAML or JSON): knobs, constraints and how the cost is read (docs/own-code.md)")]
TimeoutOption = Annotated[float | None, typer.Option("--timeout", help="Seconds one run of the program may take; a run past it is killed (a TIMEOUT trial)")]
CommandArgument = Annotated[list[str], typer.Argument(help="The program and its arguments, after --; {knob} is replaced by the knob's value", metavar="PROGRAM")]


def _not_an_option(ctx: typer.Context, word: str) -> None:
    """UsageError for ``word``, a word before the program that starts with "-": the command takes unknown
    options as the program's words (so that the program's own options need no quoting), so a mistyped
    option of its own (``--trails 3``) would be run as the program."""
    from autotune.errors import UsageError, did_you_mean

    flags = [o for p in ctx.command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]
    raise UsageError(f"{word!r} is not an option of tune command{did_you_mean(word.split('=')[0], flags)}; the "
                     "program and its arguments come after the options, e.g. autotune tune command --space "
                     "space.yaml --trials 50 -- ./bench --block {block}")


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    @tune_app.command("command", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    @handle_errors
    def tune_command(
        ctx: typer.Context,
        command: CommandArgument,
        space: SpaceOption,
        campaign: CampaignOption = None,
        trials: TrialsOption = None,
        time_budget: TimeOption = None,
        algorithm: AlgorithmOption = DEFAULT_ALGORITHM,
        cost_model: CostModelOption = DEFAULT_COST_MODEL,
        seed: SeedOption = 0,
        batch: BatchOption = 8,
        timeout: TimeoutOption = None,
        db: DbOption = DEFAULT_DB,
        json: JsonOption = False,
        progress: ProgressOption = True,
        fresh: FreshOption = False,
        retry_failed: RetryFailedOption = False,
        option: AlgorithmOptionsOption = None,
    ) -> None:
        """Tune a program: run it once per configuration (no shell) and read its cost from its output or its
        wall time. Example: autotune tune command --space space.yaml -- ./bench --block {block}"""
        from autotune.algorithms.registry import parse_options
        from autotune.drivers.command import tune_command as run

        if command and command[0].startswith("-"):  # an option this command does not have, taken as the program
            _not_an_option(ctx, command[0])
        report(run(command, space, campaign=campaign, trials=trials, time_budget=time_budget, algorithm=algorithm,
                   cost_model=cost_model, seed=seed, batch=batch, timeout_s=timeout, db=db, progress=progress,
                   fresh=fresh, options=parse_options(option), retry_failed=retry_failed), json)
