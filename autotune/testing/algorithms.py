"""Conformance suite every SearchAlgorithm must pass. Subclass and define ``make_algorithm``;
override ``make_space`` / ``make_runner`` for algorithms that need other spaces.

tests/algorithms/test_conformance.py runs it over every registered algorithm, plain and
model-guided, on each space of ``ARENAS`` that fits the algorithm (``arenas_for``).

An algorithm whose optional dependency is missing (MissingDependencyError when it is built or
bound) is skipped with that error as the reason.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from autotune.algorithms.base import offered_moves
from autotune.errors import MissingDependencyError
from autotune.testing.fakes import FakeRewriteSpace, FakeRunner, small_knob_space
from autotune.types import Measurement, Status

#: the spaces algorithms are checked on. The knob space offers every move; its ``children`` fix
#: one knob at a time (a tree of partial points). The rewrite space is graph-like: every point is
#: complete and its children are rewrites of it (the tree TASO-style searches walk).
ARENAS = {"knobs": small_knob_space, "rewrites": FakeRewriteSpace}

def arenas_for(moves) -> list[str]:
    """The ARENAS an algorithm using these ``moves`` (its ``required_moves()``) is checked on: the
    knob space when it offers them all, and the rewrite space too for tree searches (those that
    use ``children``, or need them to be ``rewrites``) and equality saturation (``saturate``). Which
    moves a space offers is what ``bind`` checks (``offered_moves``)."""
    moves = set(moves)
    out = []
    for name, make in ARENAS.items():
        if not moves <= set(offered_moves(make())):
            continue
        if name == "knobs" or moves & {"children", "rewrites", "saturate"}:
            out.append(name)
    return out


def points_of(space, n: int = 60) -> list:
    """Every point of ``space`` (in enumeration order), or ``n`` seeded samples when it cannot be enumerated."""
    try:
        return list(space.enumerate())
    except NotImplementedError:
        rng = np.random.default_rng(0)
        return list({c.key: c for c in (space.sample(rng) for _ in range(n))}.values())


def bind(algo, space, seed: int, history=()):
    """``algo.bind`` with a fresh seeded rng; a missing optional dependency skips the test."""
    try:
        return algo.bind(space, np.random.default_rng(seed), list(history))
    except MissingDependencyError as exc:
        pytest.skip(str(exc))


def drive(algo, space, runner, seed: int, steps: int, batch: int = 4, history=()):
    """Run ask/measure/tell ``steps`` times; returns the proposed keys in order."""
    bind(algo, space, seed, history)
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

    def new_algorithm(self):
        """``make_algorithm()``; a missing optional dependency skips the test."""
        try:
            return self.make_algorithm()
        except MissingDependencyError as exc:
            pytest.skip(str(exc))

    def test_proposals_are_valid(self):
        """ask(n) gives at most n distinct Candidates, each a complete, valid point of the space."""
        space = self.make_space()
        runner = self.make_runner(space)
        algo = bind(self.new_algorithm(), space, 0)
        for n in [4, 1] * (self.steps // 2) + [4] * (self.steps % 2):
            batch = algo.ask(n)
            assert len(batch) <= n
            assert len({c.key for c in batch}) == len(batch), "a batch proposes one point twice"
            for c in batch:
                assert space.contains(c), c
                assert space.is_complete(c), f"a partial point was proposed for measurement: {c}"
            algo.tell(runner.measure(space.task, batch))

    def test_failures_and_results_it_did_not_propose_are_accepted(self):
        """tell() takes failed measurements and measurements of points it never proposed (a
        resumed campaign's history, another worker's results); the search goes on with valid points."""
        space = self.make_space()
        points = points_of(space)
        runner = self.make_runner(space)
        if isinstance(runner, FakeRunner):
            runner.fail = {c.key for c in points[::3]}  # a third of the space fails at run time
        rng = np.random.default_rng(11)
        foreign = [points[int(i)] for i in rng.choice(len(points), size=min(6, len(points)), replace=False)]
        history = runner.measure(space.task, foreign[:3])
        algo = bind(self.new_algorithm(), space, 2, history)
        algo.tell(runner.measure(space.task, foreign[3:]) + [Measurement(points[-1], Status.INVALID, error="told")])
        for _ in range(self.steps):
            batch = algo.ask(4)
            if not batch:
                break
            assert all(space.contains(c) and space.is_complete(c) for c in batch)
            algo.tell(runner.measure(space.task, batch))

    def test_deterministic_under_seed(self):
        space = self.make_space()
        runner = self.make_runner(space)
        a = drive(self.new_algorithm(), space, runner, seed=3, steps=self.steps)
        b = drive(self.new_algorithm(), self.make_space(), runner, seed=3, steps=self.steps)
        assert a == b and a

    def test_no_repeats_when_promised(self):
        algo = self.new_algorithm()
        if not algo.no_repeats:
            return
        space = self.make_space()
        keys = drive(algo, space, self.make_runner(space), seed=1, steps=self.steps)
        assert len(keys) == len(set(keys))

    def test_exhaustion_is_handled(self):
        """After every point was told, ask() returns [] or known points, never raises or loops forever."""
        space = self.make_space()
        runner = self.make_runner(space)
        algo = self.new_algorithm()
        everything = runner.measure(space.task, list(space.enumerate()))
        bind(algo, space, 0, everything)
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
        """state_dict() is JSON; a fresh instance bound to the same history and loaded with it
        proposes what the original would have proposed next."""
        space = self.make_space()
        runner = self.make_runner(space)
        algo = bind(self.new_algorithm(), space, 5)
        history = []
        for _ in range(3):
            batch = algo.ask(4)
            history.extend(runner.measure(space.task, batch))
            algo.tell(history[-len(batch):])
        state = json.loads(json.dumps(algo.state_dict()))
        expected = [c.key for c in algo.ask(4)]
        resumed = bind(self.new_algorithm(), self.make_space(), 5, history)
        resumed.load_state_dict(state)
        assert [c.key for c in resumed.ask(4)] == expected
