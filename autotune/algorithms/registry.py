"""Search algorithms by name (``--algorithm NAME``), loaded on first use; model guidance by cost-model name.

An entry is a "module:Class" string (autotune.lazy), imported only when asked for, so a
missing optional dependency affects only the entry that needs it.
"""

from __future__ import annotations

from typing import Any

from autotune.cost_models.registry import COST_MODELS, cost_model_class
from autotune.lazy import load

ALGORITHMS: dict[str, str] = {
    "random": "autotune.algorithms.random_search:RandomSearch",
    "grid": "autotune.algorithms.grid:GridSearch",
    "mcmc": "autotune.algorithms.mcmc:MCMC",
    "evolutionary": "autotune.algorithms.evolutionary:Evolutionary",
    "backtracking": "autotune.algorithms.backtracking:Backtracking",
    "taso-queue": "autotune.algorithms.taso_queue:TasoQueue",
    "optuna-tpe": "autotune.algorithms.optuna_samplers:OptunaTPE",
    "optuna-cmaes": "autotune.algorithms.optuna_samplers:OptunaCmaEs",
    "optuna-gp": "autotune.algorithms.optuna_samplers:OptunaGP",
    "bandit": "autotune.algorithms.bandit:AUCBandit",
}

# the default search of the tuning commands, chosen from scripts/bench_search.py (docs/benchmarks.md)
DEFAULT_ALGORITHM, DEFAULT_COST_MODEL = "evolutionary", "xgb"

__all__ = ["DEFAULT_ALGORITHM", "DEFAULT_COST_MODEL", "ALGORITHMS", "COST_MODELS", "algorithm_class", "cost_model_class", "make_algorithm"]


def algorithm_class(name: str) -> type:
    return load(ALGORITHMS, "algorithm", name)


def make_algorithm(name: str, **options: Any):
    return algorithm_class(name)(**options)
