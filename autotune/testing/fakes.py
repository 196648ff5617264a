"""Fakes for unit tests only: a synthetic runner over knob spaces. Never used by campaigns users run."""

from __future__ import annotations

import math

from autotune.runners.base import Runner
from autotune.search_spaces.knobs import KnobSpace
from autotune.types import Candidate, Device, Measurement, Status, Task

FAKE_DEVICE = Device("fake-device", "simulated", {"fake": True})


def small_knob_space(extra_constraint: bool = True) -> KnobSpace:
    """A 3-knob space with 5*4*3=60 combinations, fewer after its constraint."""
    return KnobSpace(
        {"x": [1, 2, 4, 8, 16], "y": [1, 2, 4, 8], "mode": ["a", "b", "c"]},
        constraints=["x * y <= 64"] if extra_constraint else [],
        task=Task("kernel", "fake-quadratic", {"n": 60}),
        default={"x": 1, "y": 1, "mode": "a"},
    )


class FakeRunner(Runner):
    """Cost = a smooth bowl over the knobs' log2 values; ``fail`` keys give RUNTIME_ERROR."""

    def __init__(self, space: KnobSpace, fail: set[str] = frozenset(), device: Device = FAKE_DEVICE):
        self.space = space
        self.fail = set(fail)
        self.device = device
        self.calls = 0

    def cost(self, c: Candidate) -> float:
        f = self.space.features([c])[0]
        target = [(i % 3) + 1.0 for i in range(len(f))]
        return 1e-3 * (1.0 + sum((a - b) ** 2 for a, b in zip(f, target)))

    def measure(self, task: Task, candidates: list[Candidate]) -> list[Measurement]:
        self.calls += 1
        out = []
        for c in candidates:
            if not self.space.contains(c):
                out.append(Measurement(c, Status.INVALID, error="not in space"))
            elif c.key in self.fail:
                out.append(Measurement(c, Status.RUNTIME_ERROR, error="planted failure", simulated_s=0.5))
            else:
                t = self.cost(c)
                out.append(Measurement(c, Status.OK, times=[t, t * 1.01, t * 0.99], simulated_s=1.0 + math.log1p(t)))
        return out
