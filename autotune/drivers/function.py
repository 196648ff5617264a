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
import inspect
import os
from collections.abc import Callable, Mapping

from autotune.algorithms.model_guided import make_search
from autotune.algorithms.registry import DEFAULT_ALGORITHM, DEFAULT_COST_MODEL, check_options
from autotune.campaign import Campaign, CampaignResult, check_run
from autotune.db import open_database
from autotune.errors import UsageError
from autotune.runners.function import FunctionRunner
from autotune.search_spaces.constraints import Constraint
from autotune.search_spaces.knobs import KnobSpace
from autotune.search_spaces.space_file import load_space_file
from autotune.types import Task, callable_identity, names_its_code

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


def with_task(space: KnobSpace, kind: str, name: str, params: dict) -> KnobSpace:
    """A shallow copy of ``space`` whose task is ``(kind, name, params + the knobs and constraints)``."""
    out = copy.copy(space)
    out.task = Task(kind, name, {**params, "knobs": {n: list(v) for n, v in zip(space.names, space.values)},
                                 "constraints": constraint_texts(space)})
    return out


def budgets(trials: int | None, time_budget: float | None) -> int | None:
    """The trial budget: ``DEFAULT_TRIALS`` when neither budget is given."""
    return DEFAULT_TRIALS if trials is None and time_budget is None else trials


def minimize(objective: Callable, space, trials: int | None = None, time_budget: float | None = None,
             algorithm: str = DEFAULT_ALGORITHM, cost_model: str | None = DEFAULT_COST_MODEL,
             db: str = "sqlite:///autotune.db", campaign: str | None = None, seed: int = 0, batch: int = 8,
             isolate: bool = False, timeout_s: float | None = None, progress: bool | None = None,
             memory_limit: int | None = None, fresh: bool = False, options: dict | None = None) -> CampaignResult:
    """Run (or resume) a campaign minimising ``objective(config)`` over ``space``.

    ``space``: a KnobSpace, a dict of knobs (name -> list of values) or a space file's path (YAML or
    JSON, docs/own-code.md). ``objective`` returns the cost (a finite number >= 0) or a Measurement;
    an exception or any other value is a failed trial and the campaign goes on. Without a budget
    the campaign makes 100 evaluations (fewer when the space is smaller). ``isolate=True`` runs each
    call in a fresh worker process (the objective must be picklable: a module-level function), where
    ``timeout_s`` stops a hang (a TIMEOUT trial) and a crash is a RUNTIME_ERROR trial;
    ``memory_limit`` caps its address space in bytes. The campaign's default name is the function's
    name, the space's hash, the algorithm and the seed. ``fresh``: delete a campaign of that name
    first (its trials stay, reused as look-ups). ``options``: the algorithm's options, and the
    cost-model guidance's (``autotune algorithms``), e.g. ``{"population": 16}``.
    """
    options = check_options(algorithm, options, cost_model)
    algo = make_search(algorithm, cost_model, **options)  # validates the names before anything is written
    runner = FunctionRunner(objective, isolate=isolate, timeout_s=timeout_s, memory_limit=memory_limit)
    try:
        params = {"function": runner.name}
        if not names_its_code(runner.name):
            params["code"] = callable_identity(objective).rsplit(":", 1)[-1]
        knobs = with_task(as_knob_space(space), "function", runner.name, params)
        name = campaign or f"{runner.name}-{knobs.task.key[:8]}-{algo.name}-seed{seed}"
        check_run(knobs, algo, trials=budgets(trials, time_budget), time_budget=time_budget, batch=batch, seed=seed)
        database = open_database(db)  # after the refusals: a refused call leaves no database file behind
        try:
            return Campaign(name, knobs, algo, runner, database, trials=budgets(trials, time_budget),
                            time_budget=time_budget, batch=batch, seed=seed, progress=progress,
                            fresh=fresh).run()
        finally:
            database.close()
    finally:
        runner.close()
