import math

import numpy as np

from autotune.algorithms.registry import make_algorithm
from autotune.testing.fakes import FakeRunner, small_knob_space


def test_population_keeps_the_elite_and_excludes_failures():
    space = small_knob_space()
    cands = list(space.enumerate())
    runner = FakeRunner(space, fail={cands[0].key})
    algo = make_algorithm("evolutionary", population=5).bind(space, np.random.default_rng(0), [])
    results = runner.measure(space.task, cands)
    algo.tell(results)
    best5 = sorted((m.cost, m.candidate.key) for m in results if m.ok)[:5]
    assert [(c, k) for c, k, _ in algo.pop] == best5
    assert cands[0].key not in {k for _, k, _ in algo.pop}


def test_breeds_toward_the_optimum():
    space = small_knob_space()
    runner = FakeRunner(space)
    algo = make_algorithm("evolutionary", init=8, population=8).bind(space, np.random.default_rng(2), [])
    best = math.inf
    for _ in range(9):
        res = runner.measure(space.task, algo.ask(4))
        algo.tell(res)
        best = min([best] + [m.objective for m in res])
    assert best <= min(runner.cost(c) for c in space.enumerate()) * 1.000001
