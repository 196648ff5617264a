import math

import numpy as np

from autotune.algorithms.registry import make_algorithm
from autotune.testing.fakes import FakeRunner, small_knob_space


def test_expands_the_cheapest_subtree_and_finds_the_optimum():
    space = small_knob_space()
    runner = FakeRunner(space)
    algo = make_algorithm("backtracking", alpha=1.5).bind(space, np.random.default_rng(0), [])
    best, n = math.inf, 0
    while n < 40:
        batch = algo.ask(4)
        res = runner.measure(space.task, batch)
        algo.tell(res)
        n += len(batch)
        best = min([best] + [m.objective for m in res])
    assert algo.expanded > 1
    assert best <= min(runner.cost(c) for c in space.enumerate()) * 1.000001


def test_node_cost_is_the_best_linked_completion():
    space = small_knob_space()
    algo = make_algorithm("backtracking").bind(space, np.random.default_rng(0), [])
    batch = algo.ask(3)  # root expansion: one rollout per value of the first knob
    runner = FakeRunner(space)
    res = runner.measure(space.task, batch)
    algo.tell(res)
    node = algo.frontier[0]
    leaf_keys = algo.links[node.key]
    assert algo._cost(node) == min(algo.costs[k] for k in leaf_keys if k in algo.costs)
    for k in leaf_keys:
        leaf = next(m.candidate for m in res if m.candidate.key == k)
        assert all(leaf.payload[key] == v for key, v in node.payload.items())



def test_walks_rewrites_when_every_node_is_complete():
    from autotune.search_spaces.base import Space
    from autotune.types import Candidate, Measurement, Status

    class Rewrites(Space):
        def sample(self, rng):
            return Candidate({"x": int(rng.integers(0, 20))})

        def children(self, c):
            x = 0 if c is None else c.payload["x"]
            for d in (1, 2):
                if x + d < 20:
                    yield Candidate({"x": x + d})

        def features(self, cs):
            return np.array([[c.payload["x"]] for c in cs], dtype=float)

        def size(self):
            return 20

    space = Rewrites()
    algo = make_algorithm("backtracking", alpha=1.0).bind(space, np.random.default_rng(0), [])
    proposed = []
    for _ in range(6):
        batch = algo.ask(2)
        proposed.extend(c.payload["x"] for c in batch)
        algo.tell([Measurement(c, Status.OK, times=[abs(c.payload["x"] - 7) + 1.0]) for c in batch])
    assert 7 in proposed[:10]  # follows the cheapest rewrites straight to the optimum
