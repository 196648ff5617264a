"""Every registered algorithm, plain and model-guided, passes the algorithm conformance suite
(autotune.testing.algorithms) on each space it applies to.

The cases are built from ``ALGORITHMS`` when this module is collected, so a newly registered
algorithm is checked without editing this file: on the small knob space when that offers the
moves it uses (``required_moves()``: its ``needs``, plus those of the algorithms a wrapper
such as bandit runs), and on the graph-like rewrite space too when it is a tree search (needs
``children``). Each runs as registered and guided by the XGBoost cost model through
``make_search(name, cost_model="xgb")``; guidance uses ``score_all=0`` so the inner algorithm
really searches the model (the path of large spaces; on small ones every point is scored and
the inner algorithm would not run). An algorithm that cannot be imported or bound for lack of
an optional package is skipped with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from autotune.algorithms.model_guided import make_search
from autotune.algorithms.registry import ALGORITHMS
from autotune.errors import MissingDependencyError
from autotune.testing.algorithms import ARENAS, AlgorithmConformance, arenas_for

#: options keeping an algorithm's checks small and fast (an algorithm not listed runs with its defaults)
FAST_OPTIONS = {
    "evolutionary": {"init": 6, "population": 8},
    "optuna-tpe": {"n_startup_trials": 4},
    "optuna-cmaes": {"n_startup_trials": 4},
    "optuna-gp": {"n_startup_trials": 4},
}
#: ask/tell rounds per check (default 6): the Gaussian process is slow to fit
STEPS = {"optuna-gp": 3}
#: algorithms whose checks take minutes (where they can run at all: optuna-gp needs torch) run with -m slow
SLOW = {"optuna-gp"}
#: rounds per check under guidance: two batches of random points train the model, two more search it
GUIDED_STEPS = 4
#: model guidance: a few random points, then an XGBoost model retrained every 4 results and
#: searched by the inner algorithm (score_all=0) with a small pool
GUIDED_OPTIONS = {"init": 6, "retrain_every": 4, "score_all": 0, "pool": 16, "inner_batch": 8,
                  "cost_model_options": {"min_samples": 4, "rounds": 10}}
GUIDANCE = (None, "xgb")


@dataclass(frozen=True)
class Case:
    algorithm: str
    cost_model: str | None
    arena: str | None
    options: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def id(self) -> str:
        return f"{self.algorithm}{'+' + self.cost_model if self.cost_model else ''}-{self.arena}"


def cases() -> list:
    out = []
    for name in sorted(ALGORITHMS):
        try:  # the moves it uses: its own needs and, for a wrapper (bandit), those of what it wraps
            moves = make_search(name, None, **FAST_OPTIONS.get(name, {})).required_moves()
        except MissingDependencyError as exc:
            out.append(pytest.param(None, id=name, marks=pytest.mark.skip(reason=str(exc))))
            continue
        arenas = arenas_for(moves) or [None]  # None: no arena fits, the case fails saying so
        for cost_model in GUIDANCE:
            options = {**FAST_OPTIONS.get(name, {}), **(GUIDED_OPTIONS if cost_model else {})}
            for arena in arenas:
                case = Case(name, cost_model, arena, options)
                out.append(pytest.param(case, id=case.id, marks=[pytest.mark.slow] if name in SLOW else []))
    return out


@pytest.fixture(params=cases())
def case(request) -> Case:
    return request.param


class TestRegisteredAlgorithm(AlgorithmConformance):
    @pytest.fixture(autouse=True)
    def _bind_case(self, case):
        if case.arena is None:
            moves = make_search(case.algorithm, None).required_moves()
            pytest.fail(f"no conformance space offers every move algorithm {case.algorithm!r} uses {moves}; "
                        "add one to ARENAS in autotune/testing/algorithms.py")
        self.case = case
        try:  # an optional package the algorithm checks for only when bound (optuna-gp: torch)
            make_search(case.algorithm, None, **FAST_OPTIONS.get(case.algorithm, {})).bind(
                ARENAS[case.arena](), np.random.default_rng(0), [])
        except MissingDependencyError as exc:
            pytest.skip(str(exc))
        self.steps = min(STEPS.get(case.algorithm, AlgorithmConformance.steps),
                         GUIDED_STEPS if case.cost_model else AlgorithmConformance.steps)

    def make_algorithm(self):
        return make_search(self.case.algorithm, self.case.cost_model, **self.case.options)

    def make_space(self):
        return ARENAS[self.case.arena]()


def test_every_registered_algorithm_has_a_case():
    names = {p.values[0].algorithm for p in cases() if p.values[0] is not None}
    skipped = {p.id for p in cases() if p.values[0] is None}
    assert names | skipped == set(ALGORITHMS)
