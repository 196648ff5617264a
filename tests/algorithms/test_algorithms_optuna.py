import importlib.util

import numpy as np
import pytest

from autotune.algorithms.registry import make_algorithm
from autotune.errors import MissingDependencyError, UsageError
from autotune.search_spaces.base import Space
from autotune.testing.fakes import FakeRunner, small_knob_space
from autotune.types import Candidate


def test_invalid_points_cost_no_measurement():
    """A space whose constraint rejects most combinations: every proposal is still valid."""
    space = small_knob_space()
    algo = make_algorithm("optuna-tpe", n_startup_trials=2).bind(space, np.random.default_rng(0), [])
    runner = FakeRunner(space)
    for _ in range(8):
        batch = algo.ask(4)
        assert all(space.contains(c) for c in batch)
        algo.tell(runner.measure(space.task, batch))
    failed = [t for t in algo.study.trials if t.state.name == "FAIL"]
    complete = [t for t in algo.study.trials if t.state.name == "COMPLETE"]
    assert len(complete) >= 32 - 4  # only random fill-ins or failures are not COMPLETE
    assert len(failed) + len(complete) >= len(algo.study.trials) - 1


def test_needs_a_knob_space():
    class Bare(Space):
        def sample(self, rng):
            return Candidate({"g": 1})

        def features(self, cs):
            return np.zeros((len(cs), 1))

    with pytest.raises(UsageError, match="knob spaces"):
        make_algorithm("optuna-tpe").bind(Bare(), np.random.default_rng(0), [])


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed")
def test_gp_without_torch_names_the_package():
    with pytest.raises(MissingDependencyError, match="torch"):
        make_algorithm("optuna-gp").bind(small_knob_space(), np.random.default_rng(0), [])
