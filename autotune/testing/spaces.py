"""Conformance suite every Space must pass. Subclass and define ``make_space``:

    class TestMySpace(SpaceConformance):
        def make_space(self):
            return MySpace(...)

tests/search_spaces/test_space_conformance.py runs it over every concrete Space subclass of the
package (found by ``autotune.testing.discovery``), each built by its entries in
``SPACE_FACTORIES`` below: a new Space subclass needs an entry there, or that test fails.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from autotune.errors import MissingDependencyError
from autotune.testing.discovery import Unavailable, require_modules
from autotune.types import Candidate, Task


@dataclass(frozen=True)
class SpaceCase:
    """One small instance of a space class for the suite: ``make()`` builds it (raising
    MissingDependencyError or Unavailable where it cannot be built here); ``samples`` is the
    number of random points the suite draws per check (fewer for spaces with costly moves)."""

    id: str
    make: Callable
    samples: int = 30


def build(case: SpaceCase):
    """``case.make()``; skips the test, with the reason, when a package or the hardware is missing."""
    try:
        return case.make()
    except (MissingDependencyError, Unavailable) as exc:
        pytest.skip(str(exc))


# -- factories: small instances of each space class -------------------------------------------
#: a simulated CPU host (4 cores, AVX2 and AVX-512, 48 KiB L1d, 1 MiB L2), so kernel spaces do not
#: depend on the machine the tests run on
SIM_CPU = {"cores": 4, "avx2": True, "avx512": True, "l1d_bytes": 48 * 1024, "l2_bytes": 1 << 20}
KERNEL_SHAPES = {"gemm": "67,45,33", "conv2d": "2,5,9,11,6,3,3,stride=2,pad=1", "softmax": "7,50"}


def _knobs(constrained: bool):
    def make():
        from autotune.testing.fakes import small_knob_space

        return small_knob_space(extra_constraint=constrained)
    return make


def _kernel(name: str, target: str, shape: str | None = None, props: dict | None = None, threads: int | None = None):
    def make():
        from autotune.search_spaces.kernels import kernel_problem

        host = (props or SIM_CPU) if target == "cpu" else props  # cuda: the default A100-class device
        return kernel_problem(name, shape or KERNEL_SHAPES[name], target, host, threads=threads)[0]
    return make


def _replay():
    from autotune.search_spaces.replay import ReplaySpace

    return ReplaySpace("example:pnpoly-rtx3090")


def small_graph(name: str = "inception_v3"):
    """A bundled benchmark model (search_spaces/graphs/model_zoo.py) at its test size, as graph IR."""
    require_modules("onnx")
    from autotune.search_spaces.graphs import model_zoo, onnx_io

    return onnx_io.from_onnx(model_zoo.build(name, small=True))


def _graph():
    from autotune.search_spaces.graphs.space import GraphSpace

    return GraphSpace(small_graph())


def _strategy(model: str, batch: int, cluster: str):
    def make():
        from autotune.search_spaces.parallel.clusters import get_cluster
        from autotune.search_spaces.parallel.models import get_model
        from autotune.search_spaces.parallel.space import StrategySpace

        return StrategySpace(get_model(model, batch), get_cluster(cluster))
    return make


def _rewrites():
    from autotune.testing.fakes import FakeRewriteSpace

    return FakeRewriteSpace()


#: "module:Class" of every concrete Space subclass -> the small instances the suite checks.
#: Classes are named as strings, imported only when built, so an entry whose module needs a
#: missing package does not break this table. Test fakes are listed too: they must conform.
SPACE_FACTORIES: dict[str, list[SpaceCase]] = {
    "autotune.search_spaces.knobs:KnobSpace": [
        SpaceCase("knobs-small", _knobs(True)),
        SpaceCase("knobs-unconstrained", _knobs(False)),
        # the kernel templates' schedules on a simulated host; the full 1024^3 gemm space on an
        # AVX2 host with one thread (large: enumeration checks skip it, moves must still work)
        SpaceCase("gemm-cpu", _kernel("gemm", "cpu", "1024,1024,1024", {**SIM_CPU, "avx512": False}, threads=1)),
        SpaceCase("gemm-cuda", _kernel("gemm", "cuda", "4096,4096,4096")),
        SpaceCase("conv2d-cpu", _kernel("conv2d", "cpu")),
        SpaceCase("conv2d-cuda", _kernel("conv2d", "cuda")),
        SpaceCase("softmax-cpu", _kernel("softmax", "cpu")),
        SpaceCase("softmax-cuda", _kernel("softmax", "cuda")),
    ],
    "autotune.search_spaces.replay:ReplaySpace": [SpaceCase("replay-pnpoly", _replay)],
    "autotune.search_spaces.graphs.space:GraphSpace": [SpaceCase("graph-inception-small", _graph, samples=10)],
    "autotune.search_spaces.parallel.space:StrategySpace": [
        SpaceCase("strategy-inception-p100", _strategy("inception-v3", 16, "p100-4x4")),
        SpaceCase("strategy-gpt350m-a100", _strategy("gpt-350m", 16, "dgx-a100-x1"), samples=10),
    ],
    "autotune.testing.fakes:FakeRewriteSpace": [SpaceCase("fake-rewrites", _rewrites)],
}


def _optional(fn, *args):
    try:
        return fn(*args)
    except NotImplementedError as exc:
        pytest.skip(str(exc))


class SpaceConformance:
    samples = 30

    def make_space(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def test_task_is_described(self):
        """A campaign stores trials under the space's task: a Task with a stable key."""
        space = self.make_space()
        assert isinstance(space.task, Task) and space.task.kind and space.task.key
        assert self.make_space().task.key == space.task.key

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
