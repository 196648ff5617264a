import json

import numpy as np
import pytest

from autotune.algorithms.registry import make_algorithm
from autotune.errors import UsageError
from autotune.testing.fakes import FakeRunner, small_knob_space


def test_credit_goes_to_the_arm_that_found_new_bests():
    space = small_knob_space()
    runner = FakeRunner(space)
    algo = make_algorithm("bandit", algorithms="mcmc,random").bind(space, np.random.default_rng(0), [])
    owners = []
    for _ in range(6):
        batch = algo.ask(4)
        owners.extend(algo.owner[c.key] for c in batch)
        algo.tell(runner.measure(space.task, batch))
    state = json.loads(json.dumps(algo.state_dict()))
    assert sum(state["credit"].values()) >= 1
    assert set(state["arms"]) == {"mcmc", "random"}
    assert {0, 1} <= set(owners)  # both arms got slots
    assert all(c in (0, 1) for _, c in state["window"])


def test_rejects_bad_arm_lists():
    with pytest.raises(UsageError):
        make_algorithm("bandit", algorithms="mcmc,mcmc").bind(small_knob_space(), np.random.default_rng(0), [])
    with pytest.raises(UsageError):
        make_algorithm("bandit", algorithms="nope").bind(small_knob_space(), np.random.default_rng(0), [])
