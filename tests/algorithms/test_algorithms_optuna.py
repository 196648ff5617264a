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


def test_the_gp_sampler_guided_by_a_cost_model_is_refused_when_the_search_is_made():
    """optuna-gp+xgb never ran the Gaussian process on a space the model scores whole (every recorded space),
    and would refit it for each of the model's evaluations on a larger one: refused with the way out named."""
    from autotune.algorithms.model_guided import make_search
    from autotune.algorithms.warm_start import WarmStart

    for build in (lambda: make_search("optuna-gp", "xgb"),
                  lambda: make_search("bandit", "xgb", algorithms="random,optuna-gp"),
                  lambda: WarmStart(make_algorithm("optuna-gp"), [])):
        with pytest.raises(UsageError) as err:
            build()
        msg = err.value.command_line_message()
        assert "'optuna-gp'" in msg and "cannot be guided" in msg and "--cost-model none" in msg
    assert str(err.value).count("cost_model=None") == 1  # the Python API's spelling
    # the other samplers search the model's predictions, and the GP runs alone
    assert make_search("optuna-tpe", "xgb").inner.name == "optuna-tpe"
    assert make_search("optuna-gp", None).name == "optuna-gp"
    assert make_search("bandit", "xgb").inner.name == "bandit"  # its default arms have no GP


def test_a_missing_package_is_refused_with_the_space_check():
    """The sampler's package is checked with the space (what a campaign does before it stores anything)."""
    from autotune.algorithms.optuna_samplers import OptunaTPE

    class Needy(OptunaTPE):
        requires = ("no_such_package_here",)

    with pytest.raises(MissingDependencyError, match="no_such_package_here"):
        Needy().check_space(small_knob_space())


def test_a_bandit_arm_missing_its_package_is_refused_with_the_space_check(monkeypatch):
    """A bandit checks each arm as the arm's own space check would, before a campaign stores anything."""
    from autotune.algorithms.optuna_samplers import OptunaGP
    from autotune.algorithms.registry import make_algorithm

    monkeypatch.setattr(OptunaGP, "requires", ("no_such_package_here",))
    bandit = make_algorithm("bandit", {"algorithms": "random,optuna-gp"})
    with pytest.raises(MissingDependencyError, match="no_such_package_here"):
        bandit.check_space(small_knob_space())
