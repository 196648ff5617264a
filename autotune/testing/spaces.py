"""Conformance suite every Space must pass. Subclass and define ``make_space``:

    class TestMySpace(SpaceConformance):
        def make_space(self):
            return MySpace(...)
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from autotune.types import Candidate


def _optional(fn, *args):
    try:
        return fn(*args)
    except NotImplementedError as exc:
        pytest.skip(str(exc))


class SpaceConformance:
    samples = 30

    def make_space(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def test_sample_is_valid_and_json(self):
        space, rng = self.make_space(), np.random.default_rng(0)
        for _ in range(self.samples):
            c = space.sample(rng)
            assert isinstance(c, Candidate) and c.key
            assert space.contains(c)
            assert space.is_complete(c)
            payload = json.loads(json.dumps(c.payload))
            assert space.candidate(payload).key == c.key

    def test_sample_is_deterministic_under_seed(self):
        a, b = self.make_space(), self.make_space()
        ra, rb = np.random.default_rng(7), np.random.default_rng(7)
        assert [a.sample(ra).key for _ in range(10)] == [b.sample(rb).key for _ in range(10)]

    def test_neighbor_is_valid_and_moves(self):
        space, rng = self.make_space(), np.random.default_rng(1)
        c = space.sample(rng)
        _optional(space.neighbor, c, rng)
        moved = 0
        for _ in range(self.samples):
            n = space.neighbor(c, rng)
            assert space.contains(n)
            moved += n.key != c.key
            c = n
        assert moved > 0

    def test_crossover_is_valid(self):
        space, rng = self.make_space(), np.random.default_rng(2)
        a, b = space.sample(rng), space.sample(rng)
        _optional(space.crossover, a, b, rng)
        for _ in range(self.samples):
            assert space.contains(space.crossover(a, b, rng))

    def test_children_reach_a_complete_valid_point(self):
        space, rng = self.make_space(), np.random.default_rng(3)
        node = None
        kids = list(_optional(space.children, node))
        for _ in range(10_000):
            assert kids, "a partial point has no children"
            node = kids[rng.integers(len(kids))]
            if space.is_complete(node):
                break
            kids = list(space.children(node))
        assert space.is_complete(node) and space.contains(node)

    def test_features_have_fixed_width(self):
        space, rng = self.make_space(), np.random.default_rng(4)
        cs = [space.sample(rng) for _ in range(8)]
        X = space.features(cs)
        assert X.shape[0] == 8 and X.ndim == 2
        assert space.features(cs[:3]).shape[1] == X.shape[1]
        assert np.isfinite(X).all()

    def test_initial_is_valid_when_given(self):
        space = self.make_space()
        c = space.initial()
        if c is not None:
            assert space.contains(c)

    def test_size_matches_enumeration(self):
        space = self.make_space()
        size = space.size()
        if size is None or size > 50_000:
            pytest.skip("unbounded or large space")
        keys = [c.key for c in space.enumerate()]
        assert len(keys) == size == len(set(keys))
