"""tune_command(): a campaign whose cost is read from the user's own program, run once per configuration.

    tune_command(["./bench", "--block", "{block}"], "space.yaml", trials=50, timeout_s=10)

The space file (docs/own-code.md) gives the knobs, constraints and how the cost is read (a regular
expression on the program's output, or its wall time). The program and its placeholders are
checked before the campaign opens: a program that cannot be found, a placeholder that is not a
knob, or a format spec that cannot write one of its knob's values (``{layout:.3f}`` for a knob of
strings) is a UsageError. The task is the command template plus the space, so the same command on the
same space resumes the same campaign.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from autotune.algorithms.model_guided import make_search
from autotune.algorithms.registry import DEFAULT_ALGORITHM, DEFAULT_COST_MODEL, check_options
from autotune.campaign import Campaign, CampaignResult, check_run
from autotune.campaign.resume import recipe_path
from autotune.db import open_database
from autotune.drivers.function import budgets, check_has_points, with_task
from autotune.errors import UsageError, argument, check_campaign_name
from autotune.runners.command import CommandRunner
from autotune.search_spaces.space_file import load_space_file


def tune_command(argv: Sequence[str], space_file, campaign: str | None = None, trials: int | None = None,
                 time_budget: float | None = None, algorithm: str = DEFAULT_ALGORITHM,
                 cost_model: str | None = DEFAULT_COST_MODEL, seed: int = 0, batch: int = 8,
                 timeout_s: float | None = None, db: str = "sqlite:///autotune.db",
                 progress: bool | None = None, fresh: bool = False, options: dict | None = None,
                 retry_failed: bool = False) -> CampaignResult:
    """Run (or resume) a campaign over the space of ``space_file``, measuring each configuration by
    running ``argv`` with its ``{knob}`` placeholders filled in. Without a budget: 100 trials.
    ``fresh``: delete a campaign of that name first (its trials stay, reused as look-ups).
    ``options``: the algorithm's options, and the cost-model guidance's (``autotune algorithms``).
    ``retry_failed``: run again the configurations whose stored trial crashed or timed out (Campaign)."""
    check_campaign_name(campaign)
    if isinstance(argv, (str, bytes)):  # one string would be run as its characters
        raise UsageError(f"argv must be a list of the program and its arguments, not one string: "
                         f"{str(argv)[:80]!r}; e.g. shlex.split({str(argv)[:40]!r})")
    argv = [str(a) for a in argv]
    if not argv:
        raise UsageError("the command is empty; " + argument(
            "give argv as a list of the program and its arguments, e.g. ['./bench', '--block', '{block}']",
            "give the program to run after --, e.g. autotune tune command --space space.yaml -- ./bench --block {block}"))
    options = check_options(algorithm, options, cost_model)
    algo = make_search(algorithm, cost_model, **options)  # validates the names before anything is written
    space, objective = load_space_file(space_file)
    runner = CommandRunner(argv, objective, timeout_s=timeout_s, knobs=dict(zip(space.names, space.values)))
    try:
        program = os.path.basename(argv[0]) or "program"
        knobs = with_task(space, "command", program, {"argv": argv, "objective": runner.objective.to_json()})
        name = campaign or f"command-{program}-{knobs.task.key[:8]}-{algo.name}-seed{seed}"
        # how `autotune worker` runs it again (on another host: the program and the space file at the same paths)
        recipe = {"kind": "command", "args": {
            "argv": argv, "space_file": recipe_path(space_file), "trials": trials, "time_budget": time_budget,
            "algorithm": algorithm, "cost_model": cost_model, "seed": seed, "batch": batch, "timeout_s": timeout_s}}
        if options:
            recipe["args"]["options"] = options
        if retry_failed:
            recipe["args"]["retry_failed"] = True
        # before the database is opened: a refused command leaves no --db file behind
        check_has_points(knobs)
        check_run(knobs, algo, trials=budgets(trials, time_budget), time_budget=time_budget, batch=batch, seed=seed)
        database = open_database(db)
        try:
            return Campaign(name, knobs, algo, runner, database, trials=budgets(trials, time_budget),
                            time_budget=time_budget, batch=batch, seed=seed, progress=progress, recipe=recipe,
                            fresh=fresh, retry_failed=retry_failed).run()
        finally:
            database.close()
    finally:
        runner.close()
