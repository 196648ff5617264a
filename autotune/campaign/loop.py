"""One run of a campaign: ask, look up, measure, store, tell, until a budget is spent.

A run keeps ``slots`` candidates in flight. Each round it starts new ones where slots are free (asked of
the algorithm, looked up in the database, reserved, submitted), collects what finished, tells the
algorithm, and stores the results in one transaction with the algorithm's state and the next claim on
the shared trial budget; now and then it reads what other workers of the campaign stored.

The time budget holds within about one measurement: no slot starts once it is spent, and a plain
runner's batch starts none of its candidates past it (``Runner.measure_until``; those are given back
unmeasured). Measurements already running finish and are stored.

A batch cut short keeps what it measured: Ctrl-C in a runner that measures one candidate after the other
(``BatchInterrupted``), or a runner that breaks its promise (too few results), leaves the batch's completed,
valid measurements to be stored (``CampaignRun.store_unstored``) before the run stops.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from autotune.algorithms.base import SearchAlgorithm
from autotune.campaign.batches import Batches, what_kind
from autotune.db.campaigns import CampaignFigures
from autotune.db.models import utcnow
from autotune.errors import UsageError
from autotune.interrupts import raise_lost_interrupt
from autotune.progress import NameColumn
from autotune.runners.base import StreamingRunner
from autotune.types import Candidate, Measurement, Status

#: stop when this many consecutive batches brought nothing new (the algorithm only revisits known points)
STALL_BATCHES = 50
#: the stored failures a campaign that retries failures (``retry_failed``) measures again: those that may pass
#: on another attempt (a busy or hung device, a crash of the process); a compile error, an invalid point or a
#: wrong result is the configuration's own and fails again
RETRIED = frozenset({Status.TIMEOUT, Status.RUNTIME_ERROR})
WARMUP_CHUNK = 8  # optional warm-up points measured per batch


class CampaignRun:
    """The state of one run between two rounds: its counts (the campaign's, all runs and workers), what
    it has in flight, what the database granted it, and what it measured but has not stored yet.
    ``campaign`` is the `Campaign` run (its budgets, warm-up points, runner and database)."""

    def __init__(self, campaign, campaign_id: int, worker: str, figures: CampaignFigures,
                 seen: set[str], start: float):
        self.c, self.db, self.algorithm = campaign, campaign.db, campaign.algorithm
        self.cid, self.worker, self.start = campaign_id, worker, start
        self.task = campaign.space.task
        self.tid, self.did = self.db.task_id(self.task), self.db.device_id(campaign.runner.device)
        self.created = self.db.campaign_created(campaign_id)  # every store checks the campaign is still this one
        self.started_at = utcnow()  # the failures stored before it are those retry_failed measures again
        runner = campaign.runner
        self.dispatch = runner if isinstance(runner, StreamingRunner) else Batches(runner)
        self.slots = runner.slots if isinstance(runner, StreamingRunner) else campaign.batch
        self.algorithm.set_parallel(self.slots if self.dispatch is runner else 1)
        self.own_code = _own_code(self.algorithm)  # whether ask's points are checked to be in the space
        self.size = campaign.space.size()
        # what the campaign has so far, counted as every report counts it (db.campaigns.CampaignFigures)
        self.measured, self.errors, self.simulated, self.best = figures.trials, figures.errors, figures.simulated_s, figures.best
        self.looked_up = figures.reused  # shown by the progress bar: the stored look-ups and this run's
        self.seen = seen
        self.warmup = [c for c in campaign.warmup if c.key not in seen]
        self.in_flight: dict[str, Candidate] = {}
        self.elsewhere: dict[str, Candidate] = {}  # asked, being measured by another campaign: looked up later
        self.reused: list[Measurement] = []  # told, to be linked to the campaign with the next stored batch
        self.grant: int | None = None  # measurements granted by the last claim, not yet started
        self.adopted: list[Candidate] = []  # a dead worker's reserved candidates, granted to this one
        self.stopping: str | None = None
        self.stalled = self.waits = self.measured_here = 0
        self.unstored: list[Measurement] = []  # measured, not yet stored (stored on Ctrl-C)
        self.told = True  # whether the algorithm was told ``unstored`` (its state then matches them)
        _, self.told_upto = self.db.others_since(campaign_id, None, worker)  # others' results are told from here on
        self.next_sync = 0.0

    def loop(self, show) -> str:
        """Run rounds until a budget is spent and nothing is in flight; the status the campaign ends with.
        ``show()`` is called whenever the counts change."""
        show()
        if self._all_stored():
            show()
            return "exhausted"
        while True:
            raise_lost_interrupt()  # one that landed where Python drops it (a weakref callback) stops the run here
            seen = len(self.seen)
            free = self.slots - len(self.in_flight)
            if self.stopping is None and free > 0:
                self.stopping = self._stop_reason()
            if self.stopping is None and free > 0 and not self._start(free):
                continue  # nothing could start: the budget is claimed by others, or the next round stops
            try:
                results = self.dispatch.collect() if self.in_flight else []
            except BaseException:
                # Ctrl-C part-way through a batch, or a runner's broken promise: what the batch measured is
                # stored by the caller (store_unstored), with the algorithm's state from before the batch
                self.unstored, self.told = getattr(self.dispatch, "partial", []), False
                for m in self.unstored:
                    m.predicted = self.algorithm.predicted.get(m.candidate.key, m.predicted)
                raise
            dropped = self._drop()
            self.unstored, self.told = results, False
            predicted = self.algorithm.predicted  # the model's score, where one chose the candidate
            for m in results:
                self.in_flight.pop(m.candidate.key, None)
                m.predicted = predicted.get(m.candidate.key, m.predicted)
            if results:
                self.algorithm.tell(results)
            self.told = True
            if results or self.reused:
                # the algorithm was asked for candidates that were dropped: its state counts them as asked,
                # so the state stored before this batch is kept, and a resumed run asks for them again
                self._store(results, keep_state=dropped)
                show()
            if time.perf_counter() >= self.next_sync:
                self._sync()
            # a round that measured nothing and met no new point (it looked up stored ones) is a stall: the
            # search only proposes what it has seen; one that looked up new points moves on
            self.stalled = 0 if results or len(self.seen) > seen else self.stalled + 1
            if self.stopping is not None and not self.in_flight:
                return self.stopping

    def _all_stored(self) -> bool:
        """Whether every point of the space was stored for this task and device before the run (an import,
        other campaigns): then nothing is left to measure, and the run links them all at once, where the
        search would ask for them a batch at a time, told and retrained after each (minutes on a recorded
        space of thousands of points)."""
        if self.size is None or self.warmup or len(self.seen) >= self.size \
                or self.db.count_stored(self.tid, self.did) < self.size:
            return False
        keys = [c.key for c in self.c.space.enumerate() if c.key not in self.seen]
        known = self.db.lookup(self.tid, self.did, keys)
        if len(known) < len(keys) or self.c.retry_failed and any(m.status in RETRIED for m in known.values()):
            return False
        self.reused += list(known.values())
        self.seen.update(keys)
        self._store([], keep_state=True)
        return True

    def _drop(self) -> bool:
        """Forget the candidates of a batch that the time budget left unstarted: no longer in flight nor
        seen (their reservations go back with the run's claim, when it ends at the time budget next round).
        Whether there were any."""
        dropped = getattr(self.dispatch, "dropped", None)
        if not dropped:
            return False
        self.dispatch.dropped = []
        for c in dropped:
            self.in_flight.pop(c.key, None)
            self.seen.discard(c.key)
        return True

    def _stop_reason(self) -> str | None:
        c = self.c
        out_of_time = c.time_budget is not None and time.perf_counter() - self.start >= c.time_budget
        if self.warmup and out_of_time and c.required.isdisjoint(w.key for w in self.warmup):
            self.warmup = []  # the optional reference points stop at the time budget
        if self.warmup:  # reference points, the required ones measured whatever the budgets
            return None
        if c.trials is not None and self.measured >= c.trials:
            return "finished"
        if out_of_time:
            return "time-budget"
        if c.simulated_budget is not None and self.simulated >= c.simulated_budget:
            return "simulated-budget"
        if self.size is not None and len(self.seen) >= self.size or self.stalled >= STALL_BATCHES:
            return "exhausted"
        return None

    def _start(self, free: int) -> bool:
        """Start what the free slots allow: warm-up points, else candidates claimed from the budget and
        asked of the algorithm. False when nothing could be claimed (the caller goes round again)."""
        warmup_round = bool(self.warmup)
        if warmup_round:  # the required points at once, then the others in chunks
            take = sum(c.key in self.c.required for c in self.warmup) or max(self.slots, WARMUP_CHUNK)
            start_now, asked, self.warmup = [], self.warmup[:take], self.warmup[take:]
            n = len(asked)
        else:
            # measurements are claimed from the budget in the database before they start (with the
            # previous results' commit), so workers never measure more than the budget
            if self.grant is None:
                got = self.db.record_batch(self.tid, self.did, self.cid, [], worker=self.worker,
                                           in_flight=len(self.in_flight), claim_next=(free, self.c.trials),
                                           created=self.created)
                self.measured, self.grant, self.adopted = got.total, got.granted, got.adopted
            n, self.grant = min(self.grant, free), None
            if n == 0 and not self.in_flight:
                if self.c.trials is not None and self.measured >= self.c.trials:
                    return False  # finished: the next round stops
                # the rest is claimed by other workers: wait until they store it or die
                time.sleep(min(1.0, 0.05 * 2 ** min(self.waits, 5)))
                self.waits += 1
                return False
            self.waits = 0
            # candidates a dead worker reserved come first; the algorithm is asked for the whole grant all
            # the same, so that a resumed campaign asks what it would have asked (a dead run's
            # reservations are what its restored algorithm asks again)
            start_now = [c for c in self.adopted[:n] if c.key not in self.in_flight]
            self.adopted = []
            asked = [c for c in {c.key: c for c in self._ask(n)}.values() if c.key not in self.in_flight]
            if not asked and not start_now and not self.in_flight:
                self.stopping = "exhausted"
        taken = {c.key for c in start_now}
        waiting = [c for c in self.elsewhere.values() if c.key not in taken]
        known = self.db.lookup(self.tid, self.did, [c.key for c in asked + waiting])
        # retry_failed: a failure stored before this run, of a point this run has not evaluated, is measured
        # again; one stored since (another worker's or campaign's retry) is looked up
        stale = self.db.failed_before(self.tid, self.did, [k for k in known if k not in self.seen or
                                                           k in self.elsewhere], RETRIED, self.started_at) \
            if self.c.retry_failed else set()
        again = [c.key for c in asked if c.key not in self.seen and c.key in stale]
        for key in again:
            del known[key]
        for c in waiting:  # stored by the other campaign since (its retry too, not the failure before it): a look-up
            if c.key in known and c.key not in stale:
                asked.append(self.elsewhere.pop(c.key))
        # a point another campaign of the task and device reserved first is being measured there: it is stored
        # once, so this campaign looks it up later rather than measure it again (and lose the race to store it)
        busy: list[Candidate] = []
        fresh = self.db.reserve(self.cid, self.worker, [c for c in asked if c.key not in known and c.key not in taken],
                                limit=None if warmup_round else n - len(start_now), elsewhere=busy, again=again,
                                again_before=self.started_at)
        self.elsewhere.update((c.key, c) for c in busy)
        now_reused = [known[c.key] for c in asked if c.key in known]
        if now_reused:
            self.algorithm.tell(now_reused)
            self.reused += now_reused
        self.seen.update(c.key for c in asked)
        start_now += fresh
        self.seen.update(c.key for c in start_now)
        self.in_flight.update((c.key, c) for c in start_now)
        if start_now:
            if isinstance(self.dispatch, Batches):  # required reference points are measured whatever the budget
                required = warmup_round and any(c.key in self.c.required for c in start_now)
                budget = self.c.time_budget
                self.dispatch.deadline = None if budget is None or required else self.start + budget
            self.dispatch.submit(self.task, start_now)
        return True

    def _ask(self, n: int) -> list[Candidate]:
        """``algorithm.ask(n)``, checked: a list of Candidates and, from an algorithm of the user's own (or one
        wrapping it), at most ``n`` points of the space. One that breaks this is named, rather than failing deep
        in the loop or having its runner measure what is no point of the space; the built-in ones pass the
        conformance suite, and checking their points would cost graph and parallel spaces a rebuild of each."""
        got = self.algorithm.ask(n)
        items = list(got) if isinstance(got, (list, tuple, Iterator)) else None
        if items is None or not all(isinstance(c, Candidate) for c in items):
            what = what_kind(got) if items is None else \
                f"{what_kind(got)} holding {what_kind(next(c for c in items if not isinstance(c, Candidate)))}"
            raise UsageError(f"algorithm {_name(self.algorithm)}: ask({n}) returned {what}; ask returns a list of "
                             "autotune.Candidate (Candidate(config), or space.candidate(config)), [] when it has no "
                             "more")
        if self.own_code and len({c.key for c in items}) > n:
            raise UsageError(f"algorithm {_name(self.algorithm)}: ask({n}) returned {len(items)} candidates; ask(n) "
                             "returns at most n (the campaign asks again for more as slots free up)")
        space = self.c.space
        outside = next((c for c in items if c.key not in self.seen and not space.contains(c)), None) \
            if self.own_code else None
        if outside is not None:
            raise UsageError(f"algorithm {_name(self.algorithm)}: ask({n}) returned {outside.payload!r}"[:300]
                             + f", which is not a point of the space ({type(space).__name__}.contains is False); "
                             "propose points of the space (space.sample, space.neighbor, space.candidate(config)), "
                             "or leave out those space.contains refuses")
        return items

    def _state(self) -> dict:
        """``algorithm.state_dict()``, checked to be what the database stores, JSON, where it comes from an
        algorithm of the user's own (the built-in ones' tests hold them to it; a graph search's state is large)."""
        state = self.algorithm.state_dict()
        if not self.own_code:
            return state
        try:
            json.dumps(state)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"algorithm {_name(self.algorithm)}: state_dict() returned what JSON cannot hold "
                             f"({exc}); return plain dicts, lists, str, int, float, bool and None (int(x) of a "
                             "numpy number, list(x) of a set or an array)") from None
        return state

    def _store(self, results: list[Measurement], keep_state: bool = False) -> None:
        """Store the results and the look-ups with the algorithm's state (``keep_state``: leave the stored
        state as it is), claiming the next measurements from the budget, which is the campaign's, shared
        by every worker running it."""
        want = self.slots - len(self.in_flight) if self.stopping is None else 0
        state = None if keep_state else self._state()
        got = self.db.record_batch(self.tid, self.did, self.cid, results, self.reused, state=state,
                                   worker=self.worker, claim_next=(want, self.c.trials), in_flight=len(self.in_flight),
                                   created=self.created, replace_failed=self.c.retry_failed)
        self.measured, self.grant, self.adopted = got.total, got.granted, got.adopted
        self.unstored = []
        self.looked_up += len(self.reused)
        self.measured_here += len(results)
        self.errors += sum(1 for m in results if not m.ok)
        self.simulated += sum(m.simulated_s for m in results)
        self._better(results)  # the campaign's own best; look-ups are counted apart
        self.reused = []

    def _better(self, results: list[Measurement]) -> None:
        for m in results:
            if m.ok and (self.best is None or m.cost < self.best.cost):
                self.best = m

    def _sync(self) -> None:
        """Tell the algorithm (and its cost model) what other workers stored since the last look."""
        news, self.told_upto = self.db.others_since(self.cid, self.told_upto, self.worker)
        news = [m for m in news if m.candidate.key not in self.in_flight]
        if news:
            self.algorithm.tell(news)
            self.seen.update(m.candidate.key for m in news)
            self._better(news)
        self.next_sync = time.perf_counter() + self.c.SYNC_S

    def store_unstored(self) -> None:
        """On Ctrl-C, or when the algorithm raised: store what was measured (or looked up) and not yet stored,
        with the algorithm's state if it was told them and its state can be stored (else the stored state
        stays as it was: a resumed run is told these results through its history)."""
        if self.unstored or self.reused:
            state = None
            if self.told:
                try:
                    state = self._state()
                except Exception:  # noqa: BLE001 - the results are stored all the same; the error is the caller's
                    state = None
            self.db.record_batch(self.tid, self.did, self.cid, self.unstored, self.reused, state=state,
                                 worker=self.worker, claim_next=(0, self.c.trials), created=self.created,
                                 replace_failed=self.c.retry_failed)

    def progress(self) -> Progress:
        """A progress bar of the campaign's measurements, its best and its errors (off where the campaign's
        is off)."""
        return Progress(
            NameColumn(self.c.console, others=80), BarColumn(bar_width=None), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(), TimeRemainingColumn(), console=self.c.console, disable=not self.c.progress,
            transient=False,
        )

    def info(self) -> str:
        assert self.measured >= 0 and self.looked_up >= 0, (self.measured, self.looked_up)
        unit = "" if self.task.kind == "function" else " s"  # a minimized function's value has no unit
        best = f"best {self.best.cost:.4g}{unit}" if self.best else "best -"
        return f"{best}  errors {self.errors}  reused {self.looked_up}"


def _own_code(algorithm) -> bool:
    """Whether ``algorithm``, or an algorithm it wraps (``inner``: model guidance), is defined outside autotune."""
    while isinstance(algorithm, SearchAlgorithm):
        if not type(algorithm).__module__.startswith("autotune."):
            return True
        algorithm = getattr(algorithm, "inner", None)
    return False


def _name(algorithm) -> str:
    """How a message names an algorithm: its name, else its class's."""
    return repr(getattr(algorithm, "name", "") or type(algorithm).__name__)
