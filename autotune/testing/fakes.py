"""Fakes for unit tests only, never used by campaigns users run: a small knob space, a graph-like
rewrite space, a synthetic runner over either, a streaming runner measuring on threads, and a kernel
template with a planted crash."""

from __future__ import annotations

import math
import queue
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from autotune.errors import UsageError
from autotune.runners.base import Runner, StreamingRunner
from autotune.search_spaces.base import Space
from autotune.search_spaces.kernels.softmax import Softmax
from autotune.search_spaces.knobs import KnobSpace
from autotune.types import Candidate, Device, Measurement, Status, Task, stable_key

FAKE_DEVICE = Device("fake-device", "simulated", {"fake": True})


def small_knob_space(extra_constraint: bool = True) -> KnobSpace:
    """A 3-knob space with 5*4*3=60 combinations, fewer after its constraint."""
    return KnobSpace(
        {"x": [1, 2, 4, 8, 16], "y": [1, 2, 4, 8], "mode": ["a", "b", "c"]},
        constraints=["x * y <= 64"] if extra_constraint else [],
        task=Task("kernel", "fake-quadratic", {"n": 60}),
        default={"x": 1, "y": 1, "mode": "a"},
    )


class FakeRewriteSpace(Space):
    """A graph-like space for tree searches: every point is complete and its ``children`` are
    rewrites of it (as GraphSpace's rule applications), unlike a knob space's tree of partial points.

    A point is a state of ``dims`` counters in 0..``top`` whose sum is at most ``limit``; the
    payload is the list of rewrites ``[counter, +1 or -1]`` applied from the all-zero root, and the
    key is the resulting state's, so two orders of the same rewrites are one point (GraphSpace keys
    by the result's structural hash the same way). A rewrite that leaves the valid states does not
    apply. ``features`` are the counters, so FakeRunner's bowl has its optimum at (1, 2, 3).
    """

    def __init__(self, dims: int = 3, top: int = 3, limit: int = 6):
        self.dims, self.top, self.limit = dims, top, limit
        self.task = Task("graph", "fake-rewrites", {"dims": dims, "top": top, "limit": limit})
        self._points: list[Candidate] | None = None

    def _valid(self, state: tuple[int, ...]) -> bool:
        return all(0 <= v <= self.top for v in state) and sum(state) <= self.limit

    def _key(self, state: tuple[int, ...]) -> str:
        return stable_key(list(state))

    def state(self, payload) -> tuple[int, ...]:
        """The state the rewrites lead to; UsageError when one does not apply."""
        s = [0] * self.dims
        try:
            for i, d in payload:
                if d not in (1, -1) or not 0 <= int(i) < self.dims:
                    raise UsageError(f"{[i, d]} is not a rewrite of this space")
                s[int(i)] += d
                if not self._valid(tuple(s)):
                    raise UsageError(f"rewrite {[i, d]} does not apply at {s}")
        except (TypeError, ValueError) as exc:
            raise UsageError(f"a rewrite candidate is a list of [counter, +1 or -1] steps: {exc}") from None
        return tuple(s)

    def _rewrites(self, c: Candidate) -> list[Candidate]:
        s = self.state(c.payload)
        out = []
        for i in range(self.dims):
            for d in (1, -1):
                t = list(s)
                t[i] += d
                if self._valid(tuple(t)):
                    out.append(Candidate([*c.payload, [i, d]], self._key(tuple(t))))
        return out

    def initial(self) -> Candidate:
        return Candidate([], self._key((0,) * self.dims))

    def candidate(self, config) -> Candidate:
        return Candidate([list(step) for step in config], self._key(self.state(config)))

    def contains(self, c: Candidate) -> bool:
        try:
            return self._key(self.state(c.payload)) == c.key
        except UsageError:
            return False

    def children(self, c: Candidate | None) -> Iterator[Candidate]:
        yield from self._rewrites(c if c is not None else self.initial())

    def enumerate(self) -> Iterator[Candidate]:
        """Every state once, by breadth-first search from the root (each with a shortest rewrite list)."""
        if self._points is None:
            root = self.initial()
            seen, order, frontier = {root.key}, [root], [root]
            while frontier:
                nxt = []
                for c in frontier:
                    for k in self._rewrites(c):
                        if k.key not in seen:
                            seen.add(k.key)
                            order.append(k)
                            nxt.append(k)
                frontier = nxt
            self._points = order
        yield from self._points

    def size(self) -> int:
        return sum(1 for _ in self.enumerate())

    def sample(self, rng: np.random.Generator) -> Candidate:
        points = list(self.enumerate())
        return points[int(rng.integers(len(points)))]

    def neighbor(self, c: Candidate, rng: np.random.Generator) -> Candidate:
        kids = self._rewrites(c)
        return kids[int(rng.integers(len(kids)))]

    def crossover(self, a: Candidate, b: Candidate, rng: np.random.Generator) -> Candidate:
        """``a`` with each of ``b``'s rewrites replayed with probability 1/2 where it still applies."""
        c = a
        for step in b.payload:
            if rng.random() < 0.5:
                try:
                    c = self.candidate([*c.payload, step])
                except UsageError:
                    continue
        return c

    def features(self, cs: list[Candidate]) -> np.ndarray:
        return np.array([self.state(c.payload) for c in cs], dtype=float).reshape(len(cs), self.dims)

    def saturate(self, max_nodes: int = 10_000, **limits) -> list[Candidate]:
        """Every state reachable by rewrites (up to ``max_nodes``), the cheapest first by the fake's own
        cost: FakeRunner's bowl (squared distance to (1, 2, 3, 1, ...))."""
        points = list(self.enumerate())[:max_nodes]
        target = [(i % 3) + 1 for i in range(self.dims)]
        return sorted(points, key=lambda c: (sum((a - b) ** 2 for a, b in zip(self.state(c.payload), target)), c.key))[:1]


class FakeCrashingSoftmax(Softmax):
    """A CPU softmax whose ``ACC=2`` configurations dereference a null pointer (SIGSEGV): a runner
    must report them as a failed measurement and go on with the batch."""

    CRASH = "void kernel(const float *x, float *y) { volatile float *p = (float *)0; *p = 1.0f; y[0] = x[0]; }\n"

    def c_source(self, cfg):
        return self.CRASH if cfg["ACC"] == 2 else super().c_source(cfg)


class FakeRunner(Runner):
    """Cost = a smooth bowl over the space's feature values (log2 of a knob space's values);
    ``fail`` keys give RUNTIME_ERROR, points outside the space INVALID."""

    def __init__(self, space: Space, fail: set[str] = frozenset(), device: Device = FAKE_DEVICE):
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


class FakeRunnerTroubledOnSecondBatch(FakeRunner):
    """Measures as FakeRunner does, and calls ``then`` (once) as its second batch is measured: trouble (a lock
    taken, the database file deleted) starts between a batch's measurement and its storing."""

    def __init__(self, space: Space, then):
        super().__init__(space)
        self.then = then

    def measure(self, task: Task, candidates: list[Candidate]) -> list[Measurement]:
        out = super().measure(task, candidates)
        if self.calls == 2:
            self.then()
        return out


class FakeStreamingRunner(StreamingRunner):
    """Measures with ``inner`` on ``slots`` threads, each candidate after ``delay(candidate)`` seconds,
    and hands results back as they complete; ``log`` records (event, key, time) for the tests."""

    def __init__(self, inner: Runner, slots: int = 4, delay: Callable[[Candidate], float] = lambda c: 0.0):
        self.inner, self.slots, self.delay, self.device = inner, slots, delay, inner.device
        self.pool = ThreadPoolExecutor(max_workers=slots)
        self.done: queue.Queue = queue.Queue()
        self.running = 0
        self.log: list[tuple[str, str, float]] = []

    def _one(self, task: Task, c: Candidate) -> None:
        time.sleep(self.delay(c))
        self.done.put(self.inner.measure(task, [c])[0])

    def submit(self, task: Task, candidates: list[Candidate]) -> None:
        for c in candidates:
            self.running += 1
            self.log.append(("submit", c.key, time.perf_counter()))
            self.pool.submit(self._one, task, c)

    def collect(self, timeout_s: float | None = None) -> list[Measurement]:
        if not self.running:
            return []
        try:
            out = [self.done.get(timeout=timeout_s)]
        except queue.Empty:
            return []
        while True:
            try:
                out.append(self.done.get_nowait())
            except queue.Empty:
                break
        self.running -= len(out)
        self.log += [("done", m.candidate.key, time.perf_counter()) for m in out]
        return out

    @property
    def in_flight(self) -> int:
        return self.running

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def interrupting(runner_class: type, after: int) -> type:
    """``runner_class`` whose measure call number ``after + 1`` (counted over its instances) raises
    KeyboardInterrupt, as Ctrl-C would while a batch is being measured (a fake: for tests only)."""

    class Interrupting(runner_class):
        calls = 0

        def measure(self, task, candidates):
            Interrupting.calls += 1
            if Interrupting.calls > after:
                raise KeyboardInterrupt
            return super().measure(task, candidates)

    return Interrupting
