"""A plain runner seen as a streaming one (``Batches``), and the checks of what a runner returns: a runner of
the user's own that breaks ``Runner.measure``'s promise is named in a UsageError, and the valid measurements of
a batch cut short are kept to be stored."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator

from autotune.errors import UsageError
from autotune.runners.base import BatchInterrupted, Runner
from autotune.types import Candidate, Measurement, Task


class Batches:
    """A plain runner seen as a streaming one: what is submitted is measured as one batch by collect, which
    starts no candidate past ``deadline`` (a perf_counter time; None: no limit). The candidates it did not
    start are ``dropped`` (not measured, to be given back). When collect raises (Ctrl-C, a runner breaking
    its promise), ``partial`` holds the batch's valid measurements, which the campaign stores all the same."""

    def __init__(self, runner: Runner):
        self.runner, self.queue, self.task = runner, [], None
        self.deadline: float | None = None
        self.dropped: list[Candidate] = []
        self.partial: list[Measurement] = []

    def submit(self, task: Task, candidates: list[Candidate]) -> None:
        self.task = task
        self.queue += candidates

    def collect(self) -> list[Measurement]:
        batch, self.queue, self.partial = self.queue, [], []
        if not batch:
            return []
        try:
            if self.deadline is None:
                results = self.runner.measure(self.task, batch)
            else:
                results = self.runner.measure_until(self.task, batch, self.deadline)
        except BatchInterrupted as exc:  # Ctrl-C part-way: the measurements completed before it are kept
            self.partial = _valid(batch, exc.measured)
            raise
        if isinstance(results, Iterator):
            results = list(results)
        try:
            results = _checked(self.runner, batch, results, whole=self.deadline is None)
        except UsageError:  # the runner broke its promise: its valid measurements are stored all the same
            self.partial = _valid(batch, results)
            raise
        done = {m.candidate.key for m in results}
        self.dropped += [c for c in batch if c.key not in done]
        return results


def _valid(batch: list[Candidate], results) -> list[Measurement]:
    """The Measurements among ``results`` that ``Runner.measure`` may return for ``batch``: each of a candidate of
    the batch that no other result names too, with a successful cost a finite number >= 0."""
    if not isinstance(results, (list, tuple, Iterator)):
        return []
    ours = [m for m in results if isinstance(m, Measurement) and isinstance(getattr(m, "candidate", None), Candidate)]
    asked = {c.key for c in batch}
    count: dict[str, int] = {}
    for m in ours:
        count[m.candidate.key] = count.get(m.candidate.key, 0) + 1
    return [m for m in ours if m.candidate.key in asked and count[m.candidate.key] == 1 and _fine_cost(m)]


def _fine_cost(m: Measurement) -> bool:
    return not m.ok or (isinstance(m.cost, numbers.Real) and not isinstance(m.cost, bool) and math.isfinite(m.cost)
                        and m.cost >= 0)


def _checked(runner: Runner, batch: list[Candidate], results, whole: bool = False) -> list[Measurement]:
    """``results`` if they are what ``Runner.measure`` promises: Measurements of the batch's candidates (all of
    them where ``whole``), each cost a finite number >= 0; else UsageError naming the runner (a runner of the
    user's own that broke the promise would hang the campaign, or rank a negative cost first)."""
    name = type(runner).__name__
    if not isinstance(results, (list, tuple, Iterator)):
        raise UsageError(f"runner {name} returned {what_kind(results)} for {len(batch)} candidates; measure() "
                         "returns a list of one Measurement per candidate, of that candidate, in order")
    results = list(results)
    wrong = next((m for m in results if not isinstance(m, Measurement)), None)
    if wrong is not None:
        raise UsageError(f"runner {name} returned {what_kind(wrong)} among its results; measure() returns one "
                         "autotune.Measurement per candidate, of that candidate, in order")
    keys = [m.candidate.key for m in results]
    asked = {c.key for c in batch}
    if len(set(keys)) < len(keys) or not set(keys) <= asked or (whole and set(keys) != asked):
        raise UsageError(f"runner {name} returned {len(results)} results for {len(batch)} candidates"
                         f"{' (one candidate twice)' if len(set(keys)) < len(keys) else ''}; measure() "
                         "returns one Measurement per candidate, of that candidate, in order")
    for m in results:
        if not _fine_cost(m):
            raise UsageError(f"runner {name} measured {m.candidate.payload!r} at cost {m.cost!r}; a cost must be a "
                             "finite number >= 0 (a failure is a Measurement with a failed status)"[:400])
    return results


def what_kind(value) -> str:
    """A value's kind, as a message says what came back: "None", "a dict"."""
    return "None" if value is None else f"a {type(value).__name__}"
