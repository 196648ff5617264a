"""taso-queue beyond the parametrised conformance suite (tests/algorithms/test_conformance.py runs it on the
rewrite space, plain and model-guided): TASO's order, alpha, exhaustion, resume, and the refusal of a knob space."""

import json

import numpy as np
import pytest

from autotune.algorithms.registry import make_algorithm
from autotune.algorithms.taso_queue import TasoQueue
from autotune.errors import UsageError
from autotune.testing.algorithms import drive
from autotune.testing.fakes import FakeRewriteSpace, FakeRunner, small_knob_space


def _run(algo, space, runner, batch=4, limit=1000):
    told = []
    while len(told) < limit:
        cands = algo.ask(batch)
        if not cands:
            break
        res = runner.measure(space.task, cands)
        algo.tell(res)
        told.extend(res)
    return told


def test_registered_under_its_own_name():
    algo = make_algorithm("taso-queue", alpha=1.2)
    assert isinstance(algo, TasoQueue) and algo.name == "taso-queue" and algo.config["alpha"] == 1.2
    assert type(make_algorithm("backtracking")).__module__ == "autotune.algorithms.backtracking"


def test_starts_from_the_initial_point_and_reaches_the_optimum():
    space = FakeRewriteSpace()
    runner = FakeRunner(space)
    algo = make_algorithm("taso-queue", alpha=1.0).bind(space, np.random.default_rng(0))
    told = _run(algo, space, runner)
    assert told[0].candidate.key == space.initial().key
    optimum = min(runner.cost(c) for c in space.enumerate())
    assert min(m.objective for m in told) == optimum
    assert algo.ask(4) == []  # the queue ran empty: the search is over
    # alpha = 1 queues only improvements, so far fewer than the 100 points are evaluated
    assert len(told) < space.size()


def test_alpha_relaxation_explores_more():
    space = FakeRewriteSpace()
    runner = FakeRunner(space)
    strict = _run(make_algorithm("taso-queue", alpha=1.0).bind(space, np.random.default_rng(0)), space, runner)
    loose = _run(make_algorithm("taso-queue", alpha=3.0).bind(space, np.random.default_rng(0)), space, runner)
    assert len(loose) > len(strict)


def test_expands_the_cheapest_queued_point_first():
    space = FakeRewriteSpace()
    runner = FakeRunner(space)
    algo = make_algorithm("taso-queue", alpha=10.0).bind(space, np.random.default_rng(0))
    algo.tell(runner.measure(space.task, algo.ask(1)))  # the initial point
    first = algo.ask(100)  # all its children
    res = runner.measure(space.task, first)
    algo.tell(res)
    best = min(res, key=lambda m: m.cost).candidate
    nxt = algo.ask(100)
    assert nxt and all(c.payload[:-1] == best.payload for c in nxt)


def test_resumes_mid_expansion_with_the_same_queue():
    """State saved between batches (with children of an expansion still pending) and restored after
    a bind with the same history continues with exactly the proposals of the uninterrupted search."""
    space = FakeRewriteSpace()
    runner = FakeRunner(space)
    ref = drive(make_algorithm("taso-queue", alpha=2.0), space, runner, seed=0, steps=40, batch=2)
    algo = make_algorithm("taso-queue", alpha=2.0).bind(space, np.random.default_rng(0))
    history, steps = [], 0
    while not (len(algo.popped) >= 3 and algo.pending):
        batch = algo.ask(2)
        history.extend(runner.measure(space.task, batch))
        algo.tell(history[-len(batch):])
        steps += 1
    state = json.loads(json.dumps(algo.state_dict()))
    resumed = make_algorithm("taso-queue", alpha=2.0).bind(FakeRewriteSpace(), np.random.default_rng(0), history)
    resumed.load_state_dict(state)
    keys = [m.candidate.key for m in history]
    keys += drive_on(resumed, space, runner, steps=40 - steps, batch=2)
    assert keys == ref


def drive_on(algo, space, runner, steps, batch):
    keys = []
    for _ in range(steps):
        cands = algo.ask(batch)
        if not cands:
            break
        keys.extend(c.key for c in cands)
        algo.tell(runner.measure(space.task, cands))
    return keys


def test_a_knob_space_is_refused_naming_the_spaces_it_searches():
    """A knob space's children are partial points of a tree, none a rewrite: the search would propose the
    default point and stop, so binding refuses the space (before a campaign stores anything)."""
    algo = make_algorithm("taso-queue")
    with pytest.raises(UsageError) as err:
        algo.bind(small_knob_space(), np.random.default_rng(0))
    assert str(err.value) == ("algorithm 'taso-queue' searches graph spaces only (tune graph): it needs a space with "
                              "rewrites (children that are complete points), and KnobSpace offers sample, neighbor, "
                              "crossover, children, enumerate, knobs")
    assert algo.space is None
