"""minimize(): a campaign over a knob space whose cost is the user's own Python function.

    import autotune

    def objective(config):          # seconds, or any cost >= 0 to minimise
        return (config["x"] - 3) ** 2 + config["y"]

    result = autotune.minimize(objective, {"x": list(range(8)), "y": [0, 1, 2]}, trials=20)
    print(result.best.cost, result.best.candidate.payload)

Every evaluation is a trial in the database (``db``), so a campaign resumes where it stopped (same
``campaign`` name) and never evaluates a configuration twice. The task is the function's
qualified name plus the space, so another function or another space is another campaign.
"""

from __future__ import annotations

import copy
import functools
import inspect
import os
from collections.abc import Callable, Mapping

from autotune.algorithms.model_guided import make_search
from autotune.algorithms.registry import DEFAULT_ALGORITHM, DEFAULT_COST_MODEL, check_options
from autotune.campaign import Campaign, CampaignResult, check_run
from autotune.db import open_database
from autotune.errors import UsageError, check_campaign_name
from autotune.runners.function import FunctionRunner, unpartial
from autotune.search_spaces.constraints import Constraint
from autotune.search_spaces.knobs import KnobSpace
from autotune.search_spaces.space_file import load_space_file
from autotune.types import Task, callable_identity, names_its_code, stable_key

DEFAULT_TRIALS = 100


def as_knob_space(space) -> KnobSpace:
    """A KnobSpace from a KnobSpace, a dict of knobs (name -> values) or a space file's path."""
    if isinstance(space, KnobSpace):
        return space
    if isinstance(space, Mapping):
        return KnobSpace(space)
    if isinstance(space, (str, os.PathLike)):
        return load_space_file(space)[0]
    raise UsageError(f"the space must be a KnobSpace, a dict of knobs (name -> list of values) or a space file's "
                     f"path, not {type(space).__name__}")


def constraint_texts(space: KnobSpace) -> list[str]:
    """The constraints as text (an expression, or a callable's qualified name, with a digest of its code for
    a lambda or a nested function) for the task's identity."""
    out = []
    for c in space.constraints:
        if isinstance(c, Constraint):
            out.append(c.text)
        else:
            name = f"{getattr(c, '__module__', '?')}.{getattr(c, '__qualname__', type(c).__qualname__)}"
            out.append(name if names_its_code(name) else callable_identity(inspect.unwrap(c)))
    return out


def bound_state(fn: Callable) -> str | None:
    """A digest of the numbers and strings an objective carries besides its code (None: none): the arguments
    a functools.partial binds, the attributes of a bound method's instance or of a callable object, so that
    ``partial(f, scale=1)`` and ``partial(f, scale=2)``, or ``Objective(64).run`` and ``Objective(128).run``,
    are two tasks (as two closures over other numbers are)."""
    plain, values = (bool, int, float, str, type(None)), []
    while isinstance(fn, functools.partial):
        values += [repr(v) if isinstance(v, plain) else type(v).__name__ for v in fn.args]
        values += [f"{k}={v!r}" if isinstance(v, plain) else k for k, v in sorted(fn.keywords.items())]
        fn = fn.func
    owner = fn.__self__ if inspect.ismethod(fn) else None if inspect.isroutine(fn) or inspect.isclass(fn) else fn
    if owner is not None and not inspect.isclass(owner) and not inspect.ismodule(owner):
        values += [f"{k}={v!r}" for k, v in sorted(getattr(owner, "__dict__", {}).items()) if isinstance(v, plain)]
    return stable_key(values) if values else None


def with_task(space: KnobSpace, kind: str, name: str, params: dict) -> KnobSpace:
    """A shallow copy of ``space`` whose task is ``(kind, name, params + the knobs and constraints)``."""
    out = copy.copy(space)
    out.task = Task(kind, name, {**params, "knobs": {n: list(v) for n, v in zip(space.names, space.values)},
                                 "constraints": constraint_texts(space)})
    return out


#: random combinations that look for a valid point of a space too large to count (as `space check` does)
SAMPLES = 100_000


def check_has_points(space: KnobSpace) -> None:
    """UsageError when no configuration meets the constraints, before the campaign is opened: one opened
    on such a space would stay in the database as a failed campaign, its name taken for the fixed space.
    The valid points are counted (the walk the campaign makes anyway, kept with the space); a space too
    large to count is refused when none of SAMPLES random combinations is valid, since a search could
    not find one either."""
    if space.size() is None and space.too_large_by == "checks" and space.estimate_valid(SAMPLES) == 0:
        raise UsageError(f"the knob space has {space.combinations():,} combinations of knob values, too many to "
                         f"check each against the constraints, and none of {SAMPLES:,} random combinations meets "
                         "them, so a search could not find a valid point either; narrow the knobs' ranges or "
                         "loosen the constraints")


def budgets(trials: int | None, time_budget: float | None) -> int | None:
    """The trial budget: ``DEFAULT_TRIALS`` when neither budget is given."""
    return DEFAULT_TRIALS if trials is None and time_budget is None else trials


def minimize(objective: Callable, space, trials: int | None = None, time_budget: float | None = None,
             algorithm: str = DEFAULT_ALGORITHM, cost_model: str | None = DEFAULT_COST_MODEL,
             db: str = "sqlite:///autotune.db", campaign: str | None = None, seed: int = 0, batch: int = 8,
             isolate: bool = False, timeout_s: float | None = None, progress: bool | None = None,
             memory_limit: int | None = None, fresh: bool = False, options: dict | None = None,
             retry_failed: bool = False) -> CampaignResult:
    """Run (or resume) a campaign minimising ``objective(config)`` over ``space``; returns its CampaignResult
    (``best_config``, ``best_cost``, ``trials``, ``errors``, ``status``, ``summary()``).

    - ``objective``: any callable taking the configuration (a dict: knob name -> value) and returning its
      cost, a finite number >= 0 (an int, a float, a numpy scalar or a 0-d array), or a Measurement. An
      exception or any other value is a failed trial (said once on stderr), and the campaign goes on.
    - ``space``: a KnobSpace, a dict of knobs (name -> list of values) or a space file's path (YAML or
      JSON, docs/own-code.md).
    - ``trials``: the evaluations to make, counted over every run of the campaign; ``time_budget``: the
      wall seconds of this run. Without either, 100 evaluations (fewer when the space is smaller).
    - ``algorithm``, ``cost_model`` (None: no model) and ``options`` (e.g. ``{"population": 16}``): the
      search, as ``autotune algorithms`` lists them, or one of your own (a SearchAlgorithm or CostModel object,
      or its class named "module:Class").
    - ``db``: the database URL (default ``sqlite:///autotune.db``, a file in the working directory).
    - ``campaign``: its name; by default the function's name, a hash of the task, the algorithm and the
      seed. The same call again resumes the campaign and evaluates nothing twice; ``fresh``: True starts it
      over (its trials stay in the database, looked up rather than measured again).
    - ``seed``: the search's random seed; ``batch``: the candidates asked of the search at a time.
    - ``isolate``: True runs each call in a fresh worker process (the objective must be picklable: a
      module-level function), where ``timeout_s`` stops a hang (a TIMEOUT trial), ``memory_limit`` caps
      the address space in bytes and a crash is a RUNTIME_ERROR trial.
    - ``progress``: draw the progress bar (None: when stderr is a terminal).
    - ``retry_failed``: evaluate again the points whose stored trial failed with an exception or a timeout
      (a failure another attempt may pass), instead of looking the failure up; the earlier failure stays in
      the trial's ``meta["earlier"]``.

    The task is the function's qualified name and the space (docs/own-code.md says what else tells
    two objectives apart), so another function or another space is another campaign.
    """
    if campaign is not None and not (isinstance(campaign, str) and campaign.strip()):
        raise UsageError(f"the campaign name must be a non-empty string, not {campaign!r}")
    check_campaign_name(campaign)
    options = check_options(algorithm, options, cost_model)
    algo = make_search(algorithm, cost_model, **options)  # validates the names before anything is written
    runner = FunctionRunner(objective, isolate=isolate, timeout_s=timeout_s, memory_limit=memory_limit)
    try:
        params = {"function": runner.name}
        if not names_its_code(runner.name):
            params["code"] = callable_identity(unpartial(objective)).rsplit(":", 1)[-1]
        if (state := bound_state(objective)) is not None:
            params["bound"] = state
        knobs = with_task(as_knob_space(space), "function", runner.name, params)
        name = campaign if campaign is not None else f"{runner.name}-{knobs.task.key[:8]}-{algo.name}-seed{seed}"
        check_has_points(knobs)
        check_run(knobs, algo, trials=budgets(trials, time_budget), time_budget=time_budget, batch=batch, seed=seed)
        database = open_database(db)  # after the refusals: a refused call leaves no database file behind
        try:
            return Campaign(name, knobs, algo, runner, database, trials=budgets(trials, time_budget),
                            time_budget=time_budget, batch=batch, seed=seed, progress=progress,
                            fresh=fresh, retry_failed=retry_failed).run()
        finally:
            database.close()
    finally:
        runner.close()
