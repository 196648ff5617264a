"""tune_replay(): a campaign on a recorded Kernel Tuner space (measurements answered from the cache)."""

from __future__ import annotations

from functools import partial

from autotune.algorithms.model_guided import make_search
from autotune.algorithms.registry import (
    DEFAULT_ALGORITHM,
    DEFAULT_COST_MODEL,
    DEFAULT_TRANSFER_TOP,
    check_options,
)
from autotune.campaign import Campaign, CampaignResult, check_run
from autotune.campaign.resume import recipe_path
from autotune.db import open_database
from autotune.errors import UsageError, argument, check_campaign_name
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import ReplaySpace, cache_label


def tune_replay(cache: str, algorithm: str = DEFAULT_ALGORITHM, cost_model: str | None = DEFAULT_COST_MODEL,
                trials: int | None = None, time_budget: float | None = None,
                simulated_budget: float | None = None, seed: int = 0, batch: int = 8, campaign: str | None = None,
                db: str = "sqlite:///autotune.db", progress: bool | None = None, transfer_from: str | None = None,
                transfer_top: int = DEFAULT_TRANSFER_TOP, measure_delay: float = 0.0, ray: str | None = None,
                ray_actors: int | None = None, fresh: bool = False, options: dict | None = None) -> CampaignResult:
    """Run (or resume) a campaign on ``cache`` (a .json/.json.gz file or ``example:pnpoly-rtx3090``).

    Without any budget the campaign makes 100 measurements. ``transfer_from`` warm-starts the
    search from other devices' trials of the same task in the database (names or ``auto``).
    ``measure_delay``: wall seconds each measurement takes (load tests). ``ray``: measure on
    ``ray_actors`` Ray actors (default: one per CPU of the cluster) of the cluster at this address
    (``local``, ``auto`` or HOST:PORT). ``fresh``: delete a campaign of that name first (its trials
    stay, reused as look-ups). ``options``: the algorithm's options, and the cost-model guidance's
    (``autotune algorithms``).
    """
    check_campaign_name(campaign)
    options = check_options(algorithm, options, cost_model)
    if options and transfer_from:
        raise UsageError(f"algorithm options ({argument('options', '--option')}) apply to the ordinary search, not to a "
                         f"warm start ({argument('transfer_from')})")
    algo = make_search(algorithm, cost_model, **options)  # validates the names before anything is written
    if trials is None and time_budget is None and simulated_budget is None:
        trials = 100
    from autotune.runners.ray import check_ray_args

    check_ray_args(ray, ray_actors)
    if measure_delay < 0:
        raise UsageError(f"the measurement delay must be >= 0 seconds, not {measure_delay}")
    space = ReplaySpace(cache)
    check_run(space, algo, trials=trials, time_budget=time_budget, simulated_budget=simulated_budget, batch=batch,
              seed=seed)  # before the database is opened: a refused command leaves no --db file behind
    if ray is not None:
        from autotune.runners.ray import RayRunner

        runner = RayRunner(partial(ReplayRunner, space.cache, measure_delay), ray_actors, address=ray)
    else:
        runner = ReplayRunner(space.cache, measure_delay)
    recipe = {"kind": "replay", "args": {
        "cache": recipe_path(cache), "algorithm": algorithm, "cost_model": cost_model, "trials": trials, "time_budget": time_budget,
        "simulated_budget": simulated_budget, "seed": seed, "batch": batch, "measure_delay": measure_delay}}
    if options:
        recipe["args"]["options"] = options
    if transfer_from:  # a worker joining the campaign, and its resume command, warm-start from the same sources
        recipe["args"].update(transfer_from=transfer_from, transfer_top=transfer_top)
    database = open_database(db)

    def named(search: str) -> str:  # the campaign's name, given its search's
        name = campaign or f"replay-{cache_label(cache)}-{search}-seed{seed}"
        if campaign is None and database.campaign_is_for(name, space.task, runner.device) is False:
            # another kernel's recording of a GPU of the same file name (gemm/RTX_Titan, convolution/RTX_Titan)
            name = f"replay-{space.task.name}-{cache_label(cache)}-{search}-seed{seed}"
        return name

    try:
        name = None
        if transfer_from:
            from autotune.transfer.sources import warm_started

            algo, name = warm_started(database, space.task, runner.device, algorithm, transfer_from, transfer_top, algo,
                                      named, fresh=fresh, recipe=recipe)
        return Campaign(name or named(algo.name), space, algo, runner, database, trials=trials, time_budget=time_budget,
                        simulated_budget=simulated_budget, batch=batch, seed=seed, progress=progress,
                        recipe=recipe, fresh=fresh).run()
    finally:
        runner.close()
        database.close()
