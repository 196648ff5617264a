"""Search algorithms by name (``--algorithm NAME``), loaded on first use; model guidance by cost-model name.
A user's own algorithm is named "module:Class" wherever a registered name is taken.

An entry is a "module:Class" string (autotune.lazy), imported only when asked for, so a
missing optional dependency affects only the entry that needs it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from autotune.cost_models.registry import COST_MODELS, cost_model_class
from autotune.errors import UsageError, argument, did_you_mean
from autotune.lazy import is_spec, load, load_user

if TYPE_CHECKING:
    from autotune.algorithms.base import SearchAlgorithm

ALGORITHMS: dict[str, str] = {
    "random": "autotune.algorithms.random_search:RandomSearch",
    "grid": "autotune.algorithms.grid:GridSearch",
    "mcmc": "autotune.algorithms.mcmc:MCMC",
    "evolutionary": "autotune.algorithms.evolutionary:Evolutionary",
    "backtracking": "autotune.algorithms.backtracking:Backtracking",
    "taso-queue": "autotune.algorithms.taso_queue:TasoQueue",
    "equality-saturation": "autotune.algorithms.equality_saturation:EqualitySaturation",
    "optuna-tpe": "autotune.algorithms.optuna_samplers:OptunaTPE",
    "optuna-cmaes": "autotune.algorithms.optuna_samplers:OptunaCmaEs",
    "optuna-gp": "autotune.algorithms.optuna_samplers:OptunaGP",
    "bandit": "autotune.algorithms.bandit:AUCBandit",
}

#: the wrapper that a cost model puts around an algorithm (make_search), and whose options it adds
GUIDES = {"model-guided": "autotune.algorithms.model_guided:ModelGuided"}

# the default search of the tuning commands, chosen from scripts/bench_search.py (docs/benchmarks.md)
DEFAULT_ALGORITHM, DEFAULT_COST_MODEL = "evolutionary", "xgb"
# the sources' best configurations a warm start measures first, chosen by scripts/bench_transfer.py's protocol
DEFAULT_TRANSFER_TOP = 8

__all__ = [
    "ALGORITHMS",
    "COST_MODELS",
    "DEFAULT_ALGORITHM",
    "DEFAULT_COST_MODEL",
    "DEFAULT_TRANSFER_TOP",
    "algorithm_class",
    "check_options",
    "cost_model_class",
    "make_algorithm",
    "parse_options",
    "valid_options",
]


def algorithm_class(name: str | type | SearchAlgorithm) -> type:
    """The class of the registered algorithm ``name``, of a user's own named "module:Class" (a SearchAlgorithm
    subclass), or of a SearchAlgorithm class or object given as such."""
    from autotune.algorithms.base import SearchAlgorithm  # here: the command line imports this module at start

    if isinstance(name, SearchAlgorithm) or (isinstance(name, type) and issubclass(name, SearchAlgorithm)):
        return name if isinstance(name, type) else type(name)
    if not isinstance(name, str):
        raise UsageError(f"an algorithm is a name (`autotune algorithms` lists them), 'module:Class' or a "
                         f"SearchAlgorithm, not {name!r} ({type(name).__name__})")
    if name not in ALGORITHMS and is_spec(name):
        return load_user(name, "algorithm", SearchAlgorithm)
    if name not in ALGORITHMS:
        raise UsageError(f"unknown algorithm {name!r}; valid: {', '.join(sorted(ALGORITHMS))}, or 'module:Class' for "
                         f"a SearchAlgorithm of your own{did_you_mean(name, sorted(ALGORITHMS))}")
    return load(ALGORITHMS, "algorithm", name)


def make_algorithm(name: str | type | SearchAlgorithm, options: Mapping[str, Any] | None = None, **kwargs: Any):
    """The registered algorithm ``name`` (or a user's own, named "module:Class" or given as its class) with
    ``options`` (checked by :func:`check_options`) and ``kwargs``; an algorithm object given is returned as it is
    (it was made with its options)."""
    from autotune.algorithms.base import SearchAlgorithm

    if isinstance(name, SearchAlgorithm):
        if options or kwargs:
            raise UsageError(f"algorithm {name.name or type(name).__name__!r} is already made: give its options "
                             "when making it, not here")
        return name
    return algorithm_class(name)(**check_options(name, options), **kwargs)


def _guided(cost_model: str | None) -> bool:
    return cost_model not in (None, "", "none")


def valid_options(algorithm: str, cost_model: str | None = None) -> dict:
    """Name -> Option of what ``--option`` may set: the algorithm's options and, with a cost model,
    those of the model-guided wrapper (which takes a name both declare)."""
    out = dict(algorithm_class(algorithm).options)
    if _guided(cost_model):
        out.update(load(GUIDES, "search wrapper", "model-guided").options)
    return out


def _type_name(value: Any) -> str:
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string", list: "a JSON list",
            dict: "a JSON object"}.get(type(value), type(value).__name__)


def _checked(key: str, value: Any, default: Any) -> Any:
    """``value`` as the type of ``default`` (an int is a float too; a whole float an int), else UsageError."""
    if default is None:
        return value
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif isinstance(default, str):
        ok = isinstance(value, str)
    else:
        ok = isinstance(value, type(default))
    if not ok:
        shown = value if isinstance(value, str) else json.dumps(value)
        given = argument(f"options[{key!r}]={value!r}", f"--option {key}={shown}")
        raise UsageError(f"{given}: {key} must be {_type_name(default)} (default "
                         f"{json.dumps(default)}), not {_type_name(value)}")
    return value


def check_options(algorithm: str, options: Mapping[str, Any] | None, cost_model: str | None = None) -> dict:
    """``options`` checked against what ``algorithm`` (model-guided when ``cost_model`` names a model)
    declares: an unknown name is a UsageError naming the closest valid one and every valid one, and
    each value must have its default's type. Returns them, with numbers as their default's type."""
    if not options:
        return {}
    if not isinstance(options, Mapping):
        raise UsageError(f"the options must be a dict of option name -> value, not {options!r} ({type(options).__name__})")
    valid = valid_options(algorithm, cost_model)
    guide = f" guided by {cost_model}" if _guided(cost_model) else ""
    out = {}
    for key, value in options.items():
        if key not in valid:
            hint = did_you_mean(key, valid, n=1)
            listed = ", ".join(sorted(valid)) or "none"
            raise UsageError(f"algorithm {algorithm!r}{guide} has no option {key!r}{hint} (valid: {listed}; "
                             "`autotune algorithms` lists them with their defaults)")
        out[key] = _checked(key, value, valid[key].default)
    return out


def parse_options(pairs: Iterable[str] | None) -> dict:
    """``--option KEY=VALUE`` arguments as a dict: VALUE as JSON when it parses (numbers, true/false,
    lists, quoted strings), else as the text itself; a later KEY wins."""
    out: dict[str, Any] = {}
    for pair in pairs or ():
        key, eq, text = str(pair).partition("=")
        key = key.strip()
        if not eq or not key:
            raise UsageError(f"--option {pair!r} is not KEY=VALUE (for example --option population=64)")
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            value = text
        out[key] = value
    return out


def same_sources_spec(a: str | None, b: str | None) -> bool:
    """Whether two ``transfer_from`` values ask for the same sources: ``auto`` in any case, device names or keys
    whatever the spaces around their commas."""
    def norm(spec):
        if spec is None:
            return None
        names = [n.strip() for n in str(spec).split(",") if n.strip()]
        return ["auto"] if [n.lower() for n in names] == ["auto"] else names
    return norm(a) == norm(b)


def check_same_sources(campaign: str, stored_options: dict | None, args: dict | None) -> None:
    """A warm-started campaign resumes from the sources it started from: its search state and the results it
    was told came from them. UsageError when ``args`` (a run's recipe arguments: ``transfer_from``,
    ``transfer_top``) ask for other sources than the campaign's stored recipe (``stored_options``: its
    options) kept; a recipe without ``transfer_from`` was stored before it was kept, and passes."""
    stored = ((stored_options or {}).get("recipe") or {}).get("args") or {}
    if args is None or "transfer_from" not in stored:
        return
    new = args.get("transfer_from")
    if not same_sources_spec(new, stored["transfer_from"]):
        raise UsageError(
            f"campaign {campaign!r} was warm-started with {argument('transfer_from')} {stored['transfer_from']!r}, "
            f"not {new!r}; resume it with the same sources, start it afresh ({argument('fresh=True', '--fresh')}), "
            f"or choose another {argument('campaign')} name")
    top = stored.get("transfer_top")
    if top is not None and args.get("transfer_top", top) != top:  # the probes were chosen from its top k
        raise UsageError(
            f"campaign {campaign!r} was warm-started with {argument('transfer_top')} {top}, not "
            f"{args['transfer_top']}; resume it with the same, start it afresh "
            f"({argument('fresh=True', '--fresh')}), or choose another {argument('campaign')} name")
