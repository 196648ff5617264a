"""Spaces, sources and a driver shared by the warm start's tests (FakeRunner's bowl: unit tests only)."""

from __future__ import annotations

import numpy as np

from autotune.algorithms.warm_start import SourceData
from autotune.search_spaces.knobs import KnobSpace
from autotune.testing.fakes import FakeRunner
from autotune.types import Device, Measurement, Status, Task

SRC = Device("source-gpu", "cuda", {})


def source_data(space) -> SourceData:
    """The FakeRunner's bowl measured on every point of ``space``."""
    return SourceData(SRC, FakeRunner(space).measure(space.task, list(space.enumerate())))


def race_space() -> KnobSpace:
    """1,000 points; the FakeRunner's bowl has its optimum at (2, 4, 8)."""
    return KnobSpace({k: [2**i for i in range(10)] for k in ("x", "y", "z")}, task=Task("kernel", "race", {}))


def good_source(space) -> SourceData:
    """The target's own times 1.3 times slower: the source ranks every configuration as the target does."""
    ms = FakeRunner(space).measure(space.task, list(space.enumerate()))
    return SourceData(SRC, [Measurement(m.candidate, Status.OK, cost=1.3 * m.cost) for m in ms])


def misleading_source(space) -> SourceData:
    """The target's own times inverted: the source's best configuration is the target's worst."""
    ms = FakeRunner(space).measure(space.task, list(space.enumerate()))
    return SourceData(SRC, [Measurement(m.candidate, Status.OK, cost=1.0 / m.cost) for m in ms])


def drive(algo, space, batches: int, seed: int = 0) -> list[list[str]]:
    """Owner (arm) of every proposal, batch by batch."""
    algo.bind(space, np.random.default_rng(seed))
    runner, owners = FakeRunner(space), []
    for _ in range(batches):
        batch = algo.ask(8)
        owners.append([algo.owner[c.key] for c in batch])
        algo.tell(runner.measure(space.task, batch))
    return owners
