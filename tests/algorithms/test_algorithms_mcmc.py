import math

import numpy as np

from autotune.algorithms.registry import make_algorithm
from autotune.testing.algorithms import drive
from autotune.testing.fakes import FakeRunner, small_knob_space
from autotune.types import Measurement, Status


def test_starts_from_the_initial_point():
    space = small_knob_space()
    algo = make_algorithm("mcmc").bind(space, np.random.default_rng(0), [])
    assert algo.ask(1)[0].key == space.initial().key


def test_acceptance_is_scale_free():
    """The same relative costs give the same chain whatever the unit."""
    space = small_knob_space()
    runs = []
    for scale in (1.0, 1e6):
        runner = FakeRunner(space)
        runner_cost = runner.cost
        runner.cost = lambda c, f=runner_cost, s=scale: f(c) * s
        runs.append(drive(make_algorithm("mcmc"), space, runner, seed=7, steps=8))
    assert runs[0] == runs[1]


def test_finds_the_optimum_of_the_fake_bowl():
    space = small_knob_space()
    runner = FakeRunner(space)
    algo = make_algorithm("mcmc").bind(space, np.random.default_rng(1), [])
    best = math.inf
    for _ in range(10):
        batch = algo.ask(4)
        res = runner.measure(space.task, batch)
        algo.tell(res)
        best = min([best] + [m.objective for m in res])
    optimum = min(runner.cost(c) for c in space.enumerate())
    assert best <= optimum * 1.000001


def test_failures_are_never_the_current_point():
    space = small_knob_space()
    algo = make_algorithm("mcmc").bind(space, np.random.default_rng(0), [])
    first = algo.ask(1)
    ok = FakeRunner(space).measure(space.task, first)
    algo.tell(ok)
    bad = algo.ask(1)
    algo.tell([Measurement(bad[0], Status.RUNTIME_ERROR, error="x")])
    assert algo.current.key == first[0].key
    assert algo.state_dict()["current"]["key"] == first[0].key
