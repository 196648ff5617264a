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


def _strategies():
    from autotune.search_spaces.parallel.clusters import get_cluster
    from autotune.search_spaces.parallel.models import get_model
    from autotune.search_spaces.parallel.space import StrategySpace

    return StrategySpace(get_model("rnnlm", 64), get_cluster("p100-4x4"))


def test_default_arms_are_those_that_can_search_the_space_and_the_option_names_them():
    """On a parallelization space (no knobs) the default arms are evolutionary, mcmc and random: optuna-tpe,
    a knob-space search, is not one; the option, the state's arms and credits and the arms run agree."""
    space = _strategies()
    algo = make_algorithm("bandit").bind(space, np.random.default_rng(0), [])
    assert algo.arm_names == ["evolutionary", "mcmc", "random"] == [type(a).name for a in algo.arms]
    assert algo.config["algorithms"] == "evolutionary,mcmc,random"
    runner = FakeRunner(space)
    for _ in range(3):
        batch = algo.ask(4)
        assert batch
        algo.tell(runner.measure(space.task, batch))
    state = json.loads(json.dumps(algo.state_dict()))
    assert list(state["arms"]) == list(state["credit"]) == ["evolutionary", "mcmc", "random"]
    # on a knob space the same bandit runs every default arm
    knobs = make_algorithm("bandit").bind(small_knob_space(), np.random.default_rng(0), [])
    assert knobs.arm_names == ["evolutionary", "mcmc", "optuna-tpe", "random"]


def test_an_arm_named_that_cannot_search_the_space_is_refused():
    algo = make_algorithm("bandit", algorithms="mcmc,optuna-tpe")
    with pytest.raises(UsageError, match="'bandit' searches knob spaces only .*: it needs a space with knobs"):
        algo.bind(_strategies(), np.random.default_rng(0), [])
    assert algo.space is None


def test_a_campaign_stores_the_arms_the_bandit_runs(sqlite_url):
    from autotune.campaign import Campaign
    from autotune.db import open_database

    space, db = _strategies(), open_database(sqlite_url)
    Campaign("b", space, "bandit", FakeRunner(space), db, trials=12, batch=4).run()
    row = db.campaign("b")
    state = db.load_state(row.id)
    assert row.options["algorithm_options"]["algorithms"] == "evolutionary,mcmc,random"
    assert list(state["arms"]) == list(state["credit"]) == ["evolutionary", "mcmc", "random"]
