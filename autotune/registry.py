"""Lazy registries: algorithms (and later cost models) looked up by name.

A registry entry is a "module:Class" string, imported only when asked for, so a
missing optional dependency affects only the entry that needs it.
"""

from __future__ import annotations

import importlib
from typing import Any

from autotune.errors import MissingDependencyError, UsageError

ALGORITHMS: dict[str, str] = {
    "random": "autotune.algorithms.random_search:RandomSearch",
    "grid": "autotune.algorithms.grid:GridSearch",
    "mcmc": "autotune.algorithms.mcmc:MCMC",
    "evolutionary": "autotune.algorithms.evolutionary:Evolutionary",
    "backtracking": "autotune.algorithms.backtracking:Backtracking",
    "optuna-tpe": "autotune.algorithms.optuna_samplers:OptunaTPE",
    "optuna-cmaes": "autotune.algorithms.optuna_samplers:OptunaCmaEs",
    "optuna-gp": "autotune.algorithms.optuna_samplers:OptunaGP",
    "bandit": "autotune.algorithms.bandit:AUCBandit",
}

COST_MODELS: dict[str, str] = {
    "xgb": "autotune.cost_models.xgb:XGBCostModel",
}

# which pip extra provides a module that an entry imports
EXTRAS = {"pycuda": "cuda", "psycopg": "postgres", "kernel_tuner": "bench", "onnx": "graphs", "onnxruntime": "graphs"}


def _load(registry: dict[str, str], kind: str, name: str) -> Any:
    if name not in registry:
        raise UsageError(f"unknown {kind} {name!r}; valid: {', '.join(sorted(registry))}")
    module, _, attr = registry[name].partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        missing = (exc.name or "").split(".")[0]
        extra = EXTRAS.get(missing)
        hint = f"; install it with pip install 'autotune[{extra}]'" if extra else ""
        raise MissingDependencyError(f"{kind} {name!r} needs the package {missing!r}{hint}") from exc


def algorithm_class(name: str) -> type:
    return _load(ALGORITHMS, "algorithm", name)


def make_algorithm(name: str, **options: Any):
    return algorithm_class(name)(**options)


def make_search(algorithm: str, cost_model: str | None = None, **options: Any):
    """The algorithm named ``algorithm``, model-guided by ``cost_model`` when one is named."""
    if cost_model in (None, "", "none"):
        return make_algorithm(algorithm, **options)
    cost_model_class(cost_model)  # an unknown model name fails before the algorithm is built
    from autotune.algorithms.model_guided import make_guided

    return make_guided(algorithm, cost_model, **options)


def cost_model_class(name: str) -> type:
    return _load(COST_MODELS, "cost model", name)
