"""Conformance suite every SearchAlgorithm must pass. Subclass and define ``make_algorithm``;
override ``make_space`` / ``make_runner`` for algorithms that need other spaces."""

from __future__ import annotations

import json

import numpy as np

from autotune.testing.fakes import FakeRunner, small_knob_space


def drive(algo, space, runner, seed: int, steps: int, batch: int = 4, history=()):
    """Run ask/measure/tell ``steps`` times; returns the proposed keys in order."""
    algo.bind(space, np.random.default_rng(seed), list(history))
    keys = []
    for _ in range(steps):
        batch_c = algo.ask(batch)
        if not batch_c:
            break
        keys.extend(c.key for c in batch_c)
        algo.tell(runner.measure(space.task, batch_c))
    return keys


class AlgorithmConformance:
    steps = 6

    def make_algorithm(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def make_space(self):
        return small_knob_space()

    def make_runner(self, space):
        return FakeRunner(space)

    def test_proposals_are_valid(self):
        space = self.make_space()
        runner = self.make_runner(space)
        algo = self.make_algorithm()
        algo.bind(space, np.random.default_rng(0), [])
        for _ in range(self.steps):
            batch = algo.ask(4)
            assert len(batch) <= 4
            for c in batch:
                assert space.contains(c), c
            algo.tell(runner.measure(space.task, batch))

    def test_deterministic_under_seed(self):
        space = self.make_space()
        runner = self.make_runner(space)
        a = drive(self.make_algorithm(), space, runner, seed=3, steps=self.steps)
        b = drive(self.make_algorithm(), self.make_space(), runner, seed=3, steps=self.steps)
        assert a == b and a

    def test_no_repeats_when_promised(self):
        algo = self.make_algorithm()
        if not algo.no_repeats:
            return
        space = self.make_space()
        keys = drive(algo, space, self.make_runner(space), seed=1, steps=self.steps)
        assert len(keys) == len(set(keys))

    def test_exhaustion_is_handled(self):
        """After every point was told, ask() returns [] or known points, never raises or loops forever."""
        space = self.make_space()
        runner = self.make_runner(space)
        algo = self.make_algorithm()
        everything = runner.measure(space.task, list(space.enumerate()))
        algo.bind(space, np.random.default_rng(0), everything)
        keys = {m.candidate.key for m in everything}
        for _ in range(3):
            batch = algo.ask(4)
            assert all(c.key in keys for c in batch)
            if not batch:
                break
            algo.tell(runner.measure(space.task, batch))
        if algo.no_repeats:
            assert algo.ask(4) == []

    def test_state_round_trips_and_resumes_the_same_search(self):
        space = self.make_space()
        runner = self.make_runner(space)
        algo = self.make_algorithm()
        algo.bind(space, np.random.default_rng(5), [])
        history = []
        for _ in range(3):
            batch = algo.ask(4)
            history.extend(runner.measure(space.task, batch))
            algo.tell(history[-len(batch):])
        state = json.loads(json.dumps(algo.state_dict()))
        expected = [c.key for c in algo.ask(4)]
        resumed = self.make_algorithm()
        resumed.bind(self.make_space(), np.random.default_rng(5), history)
        resumed.load_state_dict(state)
        assert [c.key for c in resumed.ask(4)] == expected
