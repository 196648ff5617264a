"""The Runner interface: measure candidates of a task on one device.

A runner never raises for one bad candidate: every outcome is a Measurement with
a Status. It raises only when it cannot run at all (no device, bad task).

``measure_until`` measures a batch but starts no candidate past a deadline (a campaign's time
budget): the budget then holds within about one measurement, not one batch.

Ctrl-C (KeyboardInterrupt) stops a runner part-way through a batch. A runner that measures a batch one
candidate after the other raises :class:`BatchInterrupted`, a KeyboardInterrupt that holds the
Measurements completed before it (a prefix of the batch, in order), so that a campaign stores them
(measurements may take minutes each) before it stops; ``runs_until`` and ``measure_each`` do this for it.
Any other KeyboardInterrupt means that nothing of the batch is kept.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from autotune.types import Candidate, Device, Measurement, Task


@dataclass
class Built:
    """One candidate's build, made on any CPU and run where the device is (it travels by pickle):
    the artifact's bytes (a shared object, a cubin), or why there is none."""

    artifact: bytes | None
    error: str = ""
    build_s: float = 0.0
    info: dict = field(default_factory=dict)
    invalid: bool = False  # not a point of the space: nothing was built


class BatchInterrupted(KeyboardInterrupt):
    """Ctrl-C while a runner measured a batch: ``measured`` holds the Measurements of the candidates completed
    before it, in the batch's order (a prefix of it; the candidate it stopped in is not among them). A
    KeyboardInterrupt, so that code which does not look for them stops as on any Ctrl-C."""

    def __init__(self, measured: list[Measurement]):
        # what a traceback's last line says: the interrupt, and that the completed measurements are kept here
        super().__init__(f"KeyboardInterrupt (Ctrl-C) part-way through a batch, after {len(measured)} measurement"
                         f"{'' if len(measured) == 1 else 's'} of it completed")
        self.measured = list(measured)


class Runner(ABC):
    device: Device

    @abstractmethod
    def measure(self, task: Task, candidates: list[Candidate]) -> list[Measurement]:
        """One Measurement per candidate, in the same order. Interrupted (Ctrl-C) part-way, a runner that
        measures them one after the other raises BatchInterrupted with those completed (``measure_each``)."""

    def measure_until(self, task: Task, candidates: list[Candidate], deadline: float | None) -> list[Measurement]:
        """Measure the candidates in order, starting none once ``time.perf_counter()`` has reached
        ``deadline`` (None: all of them): the Measurements of those started, a prefix of ``candidates``.
        A started measurement is never cut short. Runners that prepare a batch together (compile it in
        parallel) override this to prepare it at once and run its candidates while time is left."""
        if deadline is None:
            return self.measure(task, candidates)
        return runs_until(deadline, candidates, candidates, lambda c, _: self.measure(task, [c])[0])

    def build_stage(self) -> Callable[[Task, Candidate], Built] | None:
        """A picklable function that builds one candidate on any machine, without the device (compiling
        it), when the runner's work splits into a build and a run; None when it does not."""
        return None

    def run_built(self, task: Task, candidate: Candidate, built: Built) -> Measurement:
        """Run a candidate built by ``build_stage()`` (only runners that have one)."""
        raise NotImplementedError(f"{type(self).__name__} has no separate build stage")

    def close(self) -> None:
        """Release worker processes, contexts and files."""

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def runs_until(deadline: float | None, candidates: list[Candidate], prepared: list,
               run: Callable[[Candidate, object], Measurement]) -> list[Measurement]:
    """``run(candidate, prepared)`` for each candidate in order, starting none once ``time.perf_counter()``
    has reached ``deadline`` (None: all): the batch-preparing runners' ``measure_until``. Ctrl-C in a run
    raises BatchInterrupted with the Measurements completed before it."""
    out: list[Measurement] = []
    try:
        for c, p in zip(candidates, prepared):
            if deadline is not None and time.perf_counter() >= deadline:
                break
            out.append(run(c, p))
    except KeyboardInterrupt as exc:
        if not out and isinstance(exc, BatchInterrupted):
            raise
        # a run that measured a batch of its own (measure([c])) may hold a part of it too
        done = out + list(getattr(exc, "measured", None) or [])
        raise BatchInterrupted(done).with_traceback(exc.__traceback__) from None
    return out


def measure_each(candidates: list[Candidate], one: Callable[[Candidate], Measurement]) -> list[Measurement]:
    """``one(candidate)`` for each candidate in order: ``measure`` of a runner that measures a batch one
    candidate after the other (BatchInterrupted on Ctrl-C, holding those completed)."""
    return runs_until(None, candidates, candidates, lambda c, _: one(c))


class BatchRunner(Runner):
    """A runner that prepares a whole batch at once (``_prepare``: compiles its candidates side by side, then
    times them on quiet cores) and runs each candidate with what was prepared for it (``_run``)."""

    @abstractmethod
    def _prepare(self, task: Task, candidates: list[Candidate]) -> list:
        """What each candidate needs to run (its build), in order; UsageError for a task it does not measure."""

    @abstractmethod
    def _run(self, cand: Candidate, prepared) -> Measurement:
        """One candidate's Measurement, from what ``_prepare`` made for it."""

    def measure(self, task: Task, candidates: list[Candidate]) -> list[Measurement]:
        return self.measure_until(task, candidates, None)

    def measure_until(self, task: Task, candidates: list[Candidate], deadline: float | None) -> list[Measurement]:
        return runs_until(deadline, candidates, self._prepare(task, candidates), self._run)


class StreamingRunner(Runner):
    """A runner that measures several candidates at once and hands each result back as it completes.

    The campaign keeps ``slots`` candidates in flight: it ``submit``s new ones whenever ``collect``
    returned some, so one slow candidate does not hold up the others (no batch barrier). A ``collect``
    interrupted by Ctrl-C may leave in ``partial`` (a list) the measurements completed and not yet handed
    back; the campaign stores them before it stops.
    """

    slots: int = 1

    @abstractmethod
    def submit(self, task: Task, candidates: list[Candidate]) -> None:
        """Start measuring these candidates (returns at once)."""

    @abstractmethod
    def collect(self, timeout_s: float | None = None) -> list[Measurement]:
        """Measurements completed since the last call, in completion order; waits (up to ``timeout_s``)
        until there is at least one, unless nothing is in flight."""

    @property
    @abstractmethod
    def in_flight(self) -> int:
        """Candidates submitted and not yet collected."""

    def measure(self, task: Task, candidates: list[Candidate]) -> list[Measurement]:
        self.submit(task, candidates)
        done: dict[str, Measurement] = {}
        while self.in_flight:
            done.update((m.candidate.key, m) for m in self.collect())
        return [done[c.key] for c in candidates]
