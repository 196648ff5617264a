"""A model-guided search asked fewer points than its ensemble has members: each member is refit on every
result just before its turn, alone, and a resumed search has each member as it was."""

import json

import numpy as np
import pytest

from autotune.algorithms.model_guided import make_guided
from autotune.cost_models.xgb import XGBCostModel
from autotune.testing.fakes import FakeRunner, small_knob_space


def run(algo, space, runner, steps, seed=0, batch=4):
    algo.bind(space, np.random.default_rng(seed), [])
    for _ in range(steps):
        algo.tell(runner.measure(space.task, algo.ask(batch)))


def _guided(retrain_every=100):
    return make_guided("evolutionary", init=6, retrain_every=retrain_every, epsilon=0.0, avoid_failures=1.0,
                       stall=0, cost_model_options={"min_samples": 4, "rounds": 5, "members": 4})


def _one_at_a_time(retrain_every=100):
    """A model-guided search asked one point at a time, told each result, past its 6 design points (by
    default the scheduled retrain every 100 results never comes after the first)."""
    space = small_knob_space()
    runner = FakeRunner(space)
    algo = _guided(retrain_every)
    run(algo, space, runner, steps=2, batch=3)
    return space, runner, algo


def test_asked_one_point_at_a_time_each_member_learns_every_result_before_its_turn():
    """Asked fewer points than the ensemble has members, the member whose turn it is is refit, alone, on every
    result told so far, and its pick is the best it scores among the unseen points; the others stay as they
    were (one member's fit per point, as a batch of one point per member costs)."""
    space, runner, algo = _one_at_a_time()
    for step in range(6):
        member = algo.slot % 4
        before = list(algo.member_at) or [6] * 4  # untrained before the first ask, which fits on 6 results
        (c,) = algo.ask(1)
        n = len(algo.history)
        assert algo.member_at[member] == n
        assert all(algo.member_at[m] == before[m] for m in range(4) if m != member)
        if step >= 1:  # the first pick follows the first fit, on every result already
            assert before[member] < n
        unseen = [u for u in space.enumerate() if u.key not in algo.measured and u.key != c.key] + [c]
        scores = algo.cost_model.predict_members(space.features(unseen))[member]
        assert scores[-1] == max(scores)
        refit = XGBCostModel(**algo.cost_model.options)
        refit.fit(np.vstack(algo.rows), np.array([m.objective for m in algo.history]))
        assert np.allclose(refit.predict_members(space.features(unseen))[member], scores)
        algo.tell(runner.measure(space.task, [c]))
    assert algo.trained_on == 6  # no scheduled retrain of the whole ensemble


def test_asked_a_point_per_member_the_members_are_fit_together_as_before():
    """A batch of at least as many points as members refits nobody alone: every member is fit with the others
    at the scheduled retrain."""
    space = small_knob_space()
    runner = FakeRunner(space)
    algo = make_guided("evolutionary", init=6, retrain_every=4, cost_model_options={"min_samples": 4, "rounds": 5,
                                                                                     "members": 4})
    run(algo, space, runner, steps=4, batch=4)
    assert algo.member_at == [algo.trained_on] * 4 and algo.trained_on == len(algo.history) - 4


@pytest.mark.parametrize("retrain_every", [100, 3])
def test_a_search_asked_one_point_at_a_time_resumes_with_each_member_as_it_was(retrain_every):
    """The results each member was last fit on are in the state: a resumed search refits each on as many
    (more than the last scheduled retrain's, or, retraining every 3 results, fewer too) and proposes what the
    original would have."""
    space, runner, algo = _one_at_a_time(retrain_every)
    for _ in range(6):
        algo.tell(runner.measure(space.task, algo.ask(1)))
    state = json.loads(json.dumps(algo.state_dict()))
    assert any(a > state["trained_on"] for a in state["member_at"])  # some member was refit since the fit
    if retrain_every == 3:
        assert any(a < state["trained_on"] for a in state["member_at"])  # ...and some before the last one
    expected = [c.key for c in algo.ask(1)]
    resumed = _guided(retrain_every)
    resumed.bind(space, np.random.default_rng(0), list(algo.history))
    resumed.load_state_dict(state)
    assert resumed.member_at == state["member_at"]
    assert [c.key for c in resumed.ask(1)] == expected


@pytest.mark.parametrize("batch", [pytest.param(1, marks=pytest.mark.slow), 3])
def test_resumed_after_any_batch_the_search_proposes_what_it_would_have(batch):
    """Stopped after any batch of a recorded space with failures (its failure model trained, some members
    refit on their turns before and after the last scheduled retrain) and resumed from its state and history,
    the default search proposes the same next batch."""
    from autotune.algorithms.model_guided import make_search
    from autotune.runners.replay import ReplayRunner
    from autotune.search_spaces.replay import ReplaySpace

    space = ReplaySpace("example:pnpoly-rtx3090")
    runner = ReplayRunner(space.cache)
    algo = make_search("evolutionary", "xgb")
    algo.bind(space, np.random.default_rng(11), [])
    history, behind = [], 0
    for _ in range({1: 60, 3: 30}[batch]):
        state = json.loads(json.dumps(algo.state_dict()))
        resumed = make_search("evolutionary", "xgb")
        resumed.bind(space, np.random.default_rng(11), list(history))
        resumed.load_state_dict(state)
        behind += any(a < state["trained_on"] for a in state.get("member_at", []))
        proposed = algo.ask(batch)
        assert [c.key for c in resumed.ask(batch)] == [c.key for c in proposed]
        results = runner.measure(space.task, proposed)
        algo.tell(results)
        history.extend(results)
    assert behind > 0 and algo._failures.trained
