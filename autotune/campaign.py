"""The campaign loop: ask, look up, measure, store, tell, until the budget is spent.

Each batch is committed in one transaction together with the algorithm's state, so
a campaign killed at any point loses at most the batch in flight, and resuming it
(same name) reloads its evaluations into the algorithm and continues the same search.
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from sqlalchemy import select

from autotune.algorithms.base import SearchAlgorithm
from autotune.algorithms.registry import DEFAULT_ALGORITHM, DEFAULT_COST_MODEL, make_algorithm
from autotune.db.database import Database
from autotune.db.models import CampaignRow
from autotune.db.queries import CampaignFigures, campaign_figures
from autotune.db.workers import worker_id
from autotune.errors import UsageError
from autotune.runners.base import Runner, StreamingRunner
from autotune.search_spaces.base import Space
from autotune.types import Candidate, Device, Measurement, Task

#: stop when this many consecutive batches brought nothing new (the algorithm only revisits known points)
STALL_BATCHES = 50
WARMUP_CHUNK = 8  # optional warm-up points measured per batch (the time budget is checked between batches)


@dataclass
class CampaignResult:
    """A campaign's figures count its *own* measurements: the trials whose campaign is this one, made
    by any of its runs and workers (autotune.db.queries.CampaignFigures, the rule ``autotune
    campaigns`` and ``autotune plot convergence`` use too). Look-ups of trials measured elsewhere are
    counted apart, in ``reused``, and a better reused trial is in ``best_including_reused``."""

    campaign: str
    task: Task
    device: Device
    status: str  # finished, exhausted, time-budget, simulated-budget, interrupted
    trials: int  # the campaign's own measurements (all runs and workers)
    evaluations: int  # trials + reused
    errors: int  # own measurements that failed
    best: Measurement | None  # the best own measurement
    simulated_s: float  # simulated seconds of the own measurements
    wall_s: float
    resumed: bool = False
    measured_here: int = 0  # measurements this run made itself (the others' are in ``trials``)
    reused: int = 0  # look-ups of trials measured elsewhere (another campaign, an import, a deleted campaign)
    best_including_reused: Measurement | None = None  # a reused trial better than ``best``; None if none is

    def __post_init__(self):
        for name in ("trials", "evaluations", "errors", "measured_here", "reused"):
            assert getattr(self, name) >= 0, f"negative {name}: {getattr(self, name)}"
        assert self.evaluations == self.trials + self.reused, (self.evaluations, self.trials, self.reused)

    @property
    def best_cost(self) -> float | None:
        return self.best.cost if self.best is not None else None

    @property
    def best_evaluated(self) -> Measurement | None:
        """The best of everything the campaign evaluated, look-ups included."""
        return self.best_including_reused or self.best

    def summary(self) -> dict:
        """The keys of ``autotune tune ... --json`` (later capabilities add keys, never rename these).
        ``trials``, ``best_cost`` and ``best_config`` are the campaign's own measurements; ``reused``
        counts its look-ups, and ``best_including_reused`` ({cost, config}) is there only when a
        reused trial is better than its own best."""
        out = {
            "campaign": self.campaign, "task": self.task.key, "device": self.device.name, "trials": self.trials,
            "reused": self.reused,
            "best_cost": self.best_cost, "best_config": self.best.candidate.payload if self.best else None,
            "simulated_s": round(self.simulated_s, 6), "wall_s": round(self.wall_s, 6), "status": self.status,
            "measured_here": self.measured_here,
        }
        if self.best_including_reused is not None:
            out["best_including_reused"] = {"cost": self.best_including_reused.cost,
                                            "config": self.best_including_reused.candidate.payload}
        return out


def _positive(name: str, value, kind=float):
    if value is not None and not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
        raise UsageError(f"{name} must be a positive number, not {value!r}")
    return kind(value) if value is not None else None


class Campaign:
    """Tune ``space`` with ``algorithm`` measured by ``runner``, logging to ``db``.

    Budgets: ``trials`` (measurements, counted over every run of the campaign), ``time_budget``
    (wall seconds of this run) and ``simulated_budget`` (simulated seconds, all runs). At least
    one must be given unless the space is finite.

    ``warmup``: candidates evaluated first, before the algorithm is asked for any (reference points
    such as a parallelization's baselines and seed layouts). They are trials like the others, logged,
    counted in the trial budget and told to the algorithm; the first ``warmup_required`` of them (default:
    all) are measured as one batch whatever the budgets, the rest in batches of ``WARMUP_CHUNK`` (or the
    batch size, if larger) until the time budget runs out, so that a long list of reference points
    cannot overrun it. A resumed campaign evaluates only those its history lacks.

    ``recipe``: how to make this campaign again, ``{"kind": ..., "args": {...}}`` of a driver
    (autotune.drivers.scale), stored with the campaign so that `autotune worker` can join it.

    ``fresh``: start afresh under this name: an existing campaign of that name is deleted first (its
    measured trials stay in the database, with no campaign, and this campaign looks them up as
    ``reused``).

    Ctrl-C (KeyboardInterrupt) stores what was measured, marks the campaign "interrupted", gives back
    this worker's claim and reservations, says on stderr how to resume, and is raised again.

    Several processes (on any hosts sharing the database) may run one campaign: each reserves the
    candidates it measures, claims from the shared trial budget and sends heartbeats, so none is
    measured twice, the budget is exact, and a dead worker's candidates are measured by the others.
    """

    SYNC_S = 1.0  # how often a worker reads the results other workers stored

    def __init__(
        self, name: str, space: Space, algorithm: str | SearchAlgorithm, runner: Runner, db: Database, *,
        trials: int | None = None, time_budget: float | None = None, simulated_budget: float | None = None,
        batch: int = 8, seed: int = 0, progress: bool | None = None, console: Console | None = None,
        warmup: Sequence[Candidate] = (), warmup_required: int | None = None, recipe: dict | None = None,
        fresh: bool = False,
    ):
        if not name:
            raise UsageError("a campaign needs a name")
        self.name, self.space, self.runner, self.db = name, space, runner, db
        self.algorithm = make_algorithm(algorithm) if isinstance(algorithm, str) else algorithm
        self.trials = _positive("the trial budget", trials, int)
        self.time_budget = _positive("the time budget", time_budget)
        self.simulated_budget = _positive("the simulated-time budget", simulated_budget)
        self.batch = _positive("the batch size", batch, int)
        self.seed = int(seed)
        self.warmup = list({c.key: c for c in warmup}.values())
        warmup = list(warmup)
        self.required = {c.key for c in warmup[:len(warmup) if warmup_required is None else int(warmup_required)]}
        self.recipe = recipe
        self.fresh = bool(fresh)
        if self.trials is None and self.time_budget is None and self.simulated_budget is None and space.size() is None:
            raise UsageError("give a budget (trials, time or simulated time): this space is unbounded")
        self.algorithm.check_space(space)  # before the campaign is opened in the database
        self.console = console or Console(stderr=True)
        # a bar only on a terminal (or a notebook): logs and pipes get no control characters; None, the
        # default of the Python API, is on there too, False (--no-progress) off everywhere
        self.progress = (progress is None or bool(progress)) and bool(self.console.is_terminal or self.console.is_jupyter)

    def _options(self) -> dict:
        config = dict(self.algorithm.config)
        inner = getattr(self.algorithm, "inner", None)
        if isinstance(inner, SearchAlgorithm):  # a wrapper (model guidance): its inner algorithm's options too
            config = {**inner.config, **config}
        options = {"algorithm_options": config, "seed": self.seed, "batch": self.batch,
                   "budget": {"trials": self.trials, "time_s": self.time_budget, "simulated_s": self.simulated_budget}}
        if self.recipe is not None:
            options["recipe"] = self.recipe
        return options

    def _start_afresh(self) -> None:
        """Delete the campaign of this name, if there is one (refused while it has live workers); its
        trials stay (campaign NULL), to be reused."""
        with self.db.session() as s:
            exists = s.scalar(select(CampaignRow.id).where(CampaignRow.name == self.name)) is not None
        if exists:
            self.db.delete_campaign(self.name, with_trials=False)

    def run(self) -> CampaignResult:
        start = time.perf_counter()
        task, device = self.space.task, self.runner.device
        if self.fresh:
            self._start_afresh()
        row, resumed = self.db.open_campaign(self.name, task, device, self.algorithm.name or "custom", self._options())
        cid, tid, did = row.id, self.db.task_id(task), self.db.device_id(device)
        try:  # reloading a long history (and retraining a model on it) may be interrupted too
            history = self.db.campaign_history(cid)
            # what the campaign has so far, counted as every report counts it (queries.CampaignFigures)
            figures = campaign_figures(self.db, cid)
            measured, errors, simulated, best = figures.trials, figures.errors, figures.simulated_s, figures.best
            looked_up = figures.reused  # shown by the progress bar: the stored look-ups and this run's
            seen = {m.candidate.key for m, _ in history}

            def store_model(metrics: dict, data: bytes) -> None:  # every retrained cost model is logged
                model = self.algorithm.cost_model
                self.db.save_cost_model((model.name if model is not None else "") or "model", data, metrics,
                                        int(metrics.get("n_train", metrics.get("n_samples", 0))), task, device, cid)

            self.algorithm.on_retrain = store_model
            self.algorithm.bind(self.space, np.random.default_rng(self.seed), [m for m, _ in history])
            state = self.db.load_state(cid)
            if state:
                self.algorithm.load_state_dict(state)
        except KeyboardInterrupt:
            self._interrupted(cid)
            raise
        worker = worker_id(run=True)
        if any(w["alive"] for w in self.db.campaign_workers(cid)) and self.algorithm.rng is not None:
            # joining workers that run now: the shared state would make it propose what they propose
            mix = np.random.default_rng([self.seed, zlib.crc32(worker.encode())])
            self.algorithm.rng.bit_generator.state = mix.bit_generator.state
        self.db.set_campaign_status(cid, "running")

        dispatch = self.runner if isinstance(self.runner, StreamingRunner) else _Batches(self.runner)
        slots = self.runner.slots if isinstance(self.runner, StreamingRunner) else self.batch
        self.algorithm.set_parallel(slots if dispatch is self.runner else 1)
        warmup = [c for c in self.warmup if c.key not in seen]
        size = self.space.size()
        in_flight: dict[str, Candidate] = {}
        reused: list[Measurement] = []  # told, to be linked to the campaign with the next stored batch
        grant: int | None = None  # measurements granted by the last claim, not yet started
        adopted: list[Candidate] = []  # a dead worker's reserved candidates, granted to this one
        status, stopping, stalled, waits, measured_here = "finished", None, 0, 0, 0
        unstored: list[Measurement] = []  # measured, not yet stored (stored on Ctrl-C)
        told = True  # whether the algorithm was told ``unstored`` (its state then matches them)
        _, told_upto = self.db.others_since(cid, None, worker)  # what other workers store is told from here on
        next_sync = 0.0
        progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(), TimeRemainingColumn(), console=self.console, disable=not self.progress, transient=False,
        )
        heartbeat = _Heartbeat(self.db, cid, worker)
        interrupted = False
        try:
            with progress:
                bar = progress.add_task(self.name, total=self.trials, completed=measured, info="")

                def show() -> None:
                    info = f"best {best.cost:.4g} s" if best else "best -"
                    assert measured >= 0 and looked_up >= 0, (measured, looked_up)
                    progress.update(bar, completed=measured, info=f"{info}  errors {errors}  reused {looked_up}")

                show()
                while True:
                    free = slots - len(in_flight)
                    if stopping is None and free > 0:
                        out_of_time = self.time_budget is not None and time.perf_counter() - start >= self.time_budget
                        if warmup and out_of_time and self.required.isdisjoint(c.key for c in warmup):
                            warmup = []  # the optional reference points stop at the time budget
                        if warmup:  # reference points, the required ones measured whatever the budgets
                            pass
                        elif self.trials is not None and measured >= self.trials:
                            stopping = "finished"
                        elif out_of_time:
                            stopping = "time-budget"
                        elif self.simulated_budget is not None and simulated >= self.simulated_budget:
                            stopping = "simulated-budget"
                        elif size is not None and len(seen) >= size or stalled >= STALL_BATCHES:
                            stopping = "exhausted"
                    if stopping is None and free > 0:
                        warmup_round = bool(warmup)
                        if warmup:  # the required points at once, then the others in chunks
                            take = sum(c.key in self.required for c in warmup) or max(slots, WARMUP_CHUNK)
                            start_now, asked, warmup = [], warmup[:take], warmup[take:]
                        else:
                            # measurements are claimed from the budget in the database before they start (with
                            # the previous results' commit), so workers never measure more than the budget
                            if grant is None:
                                got = self.db.record_batch(tid, did, cid, [], worker=worker, in_flight=len(in_flight),
                                                           claim_next=(free, self.trials))
                                measured, grant, adopted = got.total, got.granted, got.adopted
                            n, grant = min(grant, free), None
                            if n == 0 and not in_flight:
                                if self.trials is not None and measured >= self.trials:
                                    continue  # finished: the next round stops
                                # the rest is claimed by other workers: wait until they store it or die
                                time.sleep(min(1.0, 0.05 * 2 ** min(waits, 5)))
                                waits += 1
                                continue
                            waits = 0
                            # candidates a dead worker reserved come first; the algorithm is asked for the
                            # whole grant all the same, so that a resumed campaign asks what it would have asked
                            # (a dead run's reservations are what its restored algorithm asks again)
                            start_now = [c for c in adopted[:n] if c.key not in in_flight]
                            adopted = []
                            asked = [c for c in {c.key: c for c in self.algorithm.ask(n)}.values()
                                     if c.key not in in_flight]
                            if not asked and not start_now and not in_flight:
                                stopping = "exhausted"
                        taken = {c.key for c in start_now}
                        known = self.db.lookup(tid, did, [c.key for c in asked])
                        fresh = self.db.reserve(cid, worker, [c for c in asked if c.key not in known and c.key not in taken],
                                                limit=None if warmup_round else n - len(start_now))
                        now_reused = [known[c.key] for c in asked if c.key in known]
                        if now_reused:
                            self.algorithm.tell(now_reused)
                            reused += now_reused
                        seen.update(c.key for c in asked)
                        start_now += fresh
                        seen.update(c.key for c in start_now)
                        in_flight.update((c.key, c) for c in start_now)
                        if start_now:
                            dispatch.submit(task, start_now)
                    results = dispatch.collect() if in_flight else []
                    unstored, told = results, False
                    predicted = self.algorithm.predicted  # the model's score, where one chose the candidate
                    for m in results:
                        in_flight.pop(m.candidate.key, None)
                        m.predicted = predicted.get(m.candidate.key, m.predicted)
                    if results:
                        self.algorithm.tell(results)
                    told = True
                    if results or reused:
                        # the budget is the campaign's, shared by every worker running it
                        want = slots - len(in_flight) if stopping is None else 0
                        got = self.db.record_batch(tid, did, cid, results, reused, state=self.algorithm.state_dict(),
                                                   worker=worker, claim_next=(want, self.trials), in_flight=len(in_flight))
                        measured, grant, adopted = got.total, got.granted, got.adopted
                        unstored = []
                        looked_up += len(reused)
                        measured_here += len(results)
                        errors += sum(1 for m in results if not m.ok)
                        simulated += sum(m.simulated_s for m in results)
                        for m in results:  # the campaign's own best; look-ups are counted apart
                            if m.ok and (best is None or m.cost < best.cost):
                                best = m
                        reused = []
                        show()
                    if time.perf_counter() >= next_sync:
                        # other workers' results reach this one's algorithm (and its cost model) too
                        news, told_upto = self.db.others_since(cid, told_upto, worker)
                        news = [m for m in news if m.candidate.key not in in_flight]
                        if news:
                            self.algorithm.tell(news)
                            seen.update(m.candidate.key for m in news)
                            for m in news:
                                if m.ok and (best is None or m.cost < best.cost):
                                    best = m
                        next_sync = time.perf_counter() + self.SYNC_S
                    stalled = 0 if results else stalled + 1
                    if stopping is not None and not in_flight:
                        status = stopping
                        break
        except KeyboardInterrupt:
            interrupted = True
            if unstored or reused:  # measured (or looked up) before Ctrl-C: stored, with the state if it matches
                self.db.record_batch(tid, did, cid, unstored, reused, state=self.algorithm.state_dict() if told else None,
                                     worker=worker, claim_next=(0, self.trials))
            raise
        finally:
            heartbeat.stop()
            # the claim and any reservation left (only if the run failed or was interrupted) are given back; a
            # killed worker's stay until another worker sees it is dead and takes them over
            self.db.release_claim(cid, worker)
            if interrupted:
                self._interrupted(cid)
        self.db.set_campaign_status(cid, status)
        figures = campaign_figures(self.db, cid)
        return _result(self.name, task, device, status, figures, time.perf_counter() - start, resumed, measured_here)

    def _interrupted(self, campaign_id: int) -> None:
        """Mark the campaign interrupted and say how to resume it (what was stored stays)."""
        self.db.set_campaign_status(campaign_id, "interrupted")
        stored = campaign_figures(self.db, campaign_id).trials
        print(f"interrupted: {stored} trials stored; resume with: {self.resume_command()}", file=sys.stderr)

    def resume_command(self) -> str:
        """The command line that resumes this campaign (from its recipe), or how to make one."""
        return resume_command(self.name, self.recipe, self.db)


def _result(name: str, task: Task, device: Device, status: str, figures: CampaignFigures, wall_s: float,
            resumed: bool, measured_here: int) -> CampaignResult:
    return CampaignResult(
        campaign=name, task=task, device=device, status=status, trials=figures.trials,
        evaluations=figures.evaluations, errors=figures.errors, best=figures.best, simulated_s=figures.simulated_s,
        wall_s=wall_s, resumed=resumed, measured_here=measured_here, reused=figures.reused,
        best_including_reused=figures.best_including_reused,
    )


#: how each recipe kind is run from the command line: (command, positional arguments, options)
_COMMANDS = {
    "replay": ("autotune tune replay", (), {
        "cache": "--cache", "algorithm": "--algorithm", "cost_model": "--cost-model", "trials": "--trials",
        "time_budget": "--time-budget", "simulated_budget": "--simulated-budget", "seed": "--seed", "batch": "--batch",
        "measure_delay": "--measure-delay"}),
    "kernel": ("autotune tune kernel", ("name",), {
        "shape": "--shape", "target": "--target", "algorithm": "--algorithm", "cost_model": "--cost-model",
        "trials": "--trials", "time_budget": "--time-budget", "seed": "--seed", "batch": "--batch",
        "threads": "--threads", "device_index": "--device", "backend": "--backend"}),
    "command": ("autotune tune command", (), {
        "space_file": "--space", "algorithm": "--algorithm", "cost_model": "--cost-model", "trials": "--trials",
        "time_budget": "--time-budget", "seed": "--seed", "batch": "--batch", "timeout_s": "--timeout"}),
}
#: values the command line gives when an option is left out (not repeated in a resume command)
_CLI_DEFAULTS = {"algorithm": DEFAULT_ALGORITHM, "cost_model": DEFAULT_COST_MODEL, "seed": 0, "batch": 8,
                 "measure_delay": 0.0, "target": "cpu", "device_index": 0, "backend": "auto"}
DEFAULT_DB_URL = "sqlite:///autotune.db"


def resume_command(name: str, recipe: dict | None, db: Database | None = None) -> str:
    """``autotune tune KIND ... --campaign NAME`` rebuilt from a campaign's recipe; for a recipe the
    command line cannot spell, or none, what to run instead."""
    db_arg = [] if db is None or db.url == DEFAULT_DB_URL else ["--db", db.safe_url]
    kind, args = (recipe or {}).get("kind"), dict((recipe or {}).get("args") or {})
    if kind not in _COMMANDS:
        worker = shlex.join(["autotune", "worker", "--campaign", name, *db_arg])
        return (f"rerun the same command with --campaign {shlex.quote(name)}"
                + (f" (or: {worker})" if recipe else ""))
    command, positional, flags = _COMMANDS[kind]
    words = [str(args.get(p)) for p in positional]
    for key, flag in flags.items():
        value = args.get(key)
        if key == "cost_model" and value in (None, "", "none"):
            value = "none"
        if value is None or (key in _CLI_DEFAULTS and value == _CLI_DEFAULTS[key]):
            continue
        words += [flag, str(value)]
    for key, value in (args.get("options") or {}).items():
        words += ["--option", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    words += ["--campaign", name, *db_arg]
    if kind == "command":
        words += ["--", *[str(a) for a in args.get("argv") or []]]
    return " ".join([command, shlex.join(words)])


class _Batches:
    """A plain runner seen as a streaming one: what is submitted is measured as one batch by collect."""

    def __init__(self, runner: Runner):
        self.runner, self.queue, self.task = runner, [], None

    def submit(self, task: Task, candidates: list[Candidate]) -> None:
        self.task = task
        self.queue += candidates

    def collect(self) -> list[Measurement]:
        batch, self.queue = self.queue, []
        return self.runner.measure(self.task, batch) if batch else []


class _Heartbeat:
    """A thread that tells the other workers of the campaign that this one is alive."""

    def __init__(self, db: Database, campaign_id: int, worker: str):
        self.db, self.campaign_id, self.worker = db, campaign_id, worker
        self.stopped = threading.Event()
        self.db.heartbeat(campaign_id, worker)
        self.thread = threading.Thread(target=self._beat, name="autotune-heartbeat", daemon=True)
        self.thread.start()

    def _beat(self) -> None:
        while not self.stopped.wait(self.db.HEARTBEAT_S):
            try:
                self.db.heartbeat(self.campaign_id, self.worker)
            except Exception as exc:  # noqa: BLE001 - a missed beat is retried; the campaign goes on
                print(f"autotune: heartbeat failed ({exc}); retrying", file=sys.stderr)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
