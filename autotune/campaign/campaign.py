"""A tuning campaign: a search space, an algorithm and a runner, logged to the database under a name.

Each batch is committed in one transaction together with the algorithm's state, so
a campaign killed at any point loses at most the batch in flight, and resuming it
(same name) reloads its evaluations into the algorithm and continues the same search.
"""

from __future__ import annotations

import copy
import json
import math
import numbers
import sys
import time
import zlib
from collections.abc import Sequence

import numpy as np
from rich.console import Console
from sqlalchemy import select

from autotune.algorithms.base import SearchAlgorithm
from autotune.algorithms.registry import check_same_sources, make_algorithm
from autotune.campaign.heartbeat import Heartbeat
from autotune.campaign.loop import CampaignRun
from autotune.campaign.result import CampaignResult, campaign_result
from autotune.campaign.resume import resume_command
from autotune.cost_models.registry import MODEL_SPEC, own_model_spec
from autotune.db.database import Database
from autotune.db.trial_store import CampaignGone
from autotune.db.models import CampaignRow
from autotune.db.workers import worker_id
from autotune.errors import COMMAND_LINE, DatabaseError, UsageError, argument, check_campaign_name, interruption
from autotune.interrupts import campaign_interrupts, interrupt_handled
from autotune.runners.base import Runner
from autotune.search_spaces.base import Space
from autotune.types import Candidate, Device, Task


def _positive(name: str, value, kind=float, api: str | None = None):
    """``value`` as ``kind`` (None stays None); UsageError unless it is a finite number > 0 (a whole one for
    ``int``; never a bool: ``trials=True`` is a mistake, not one trial). A numpy number counts as a number."""
    if value is not None and not (isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
                                  and value > 0 and math.isfinite(value)
                                  and (kind is not int or float(value).is_integer())):
        given = f" ({argument(api)})" if api else ""  # the argument, or the command line's flag, that set it
        raise UsageError(f"{name} must be a positive number{', a whole one' if kind is int else ''}, not "
                         f"{value!r}{given}")
    return kind(value) if value is not None else None


def checked_seed(seed) -> int:
    """``seed`` as an int; UsageError unless it is a whole number >= 0 (what numpy's generators take)."""
    if not (isinstance(seed, numbers.Integral) and not isinstance(seed, bool) and seed >= 0):
        raise UsageError(f"the seed must be a whole number >= 0, not {seed!r}")
    return int(seed)


def check_run(space: Space, algorithm: SearchAlgorithm, *, trials=None, time_budget=None, simulated_budget=None,
              batch=8, seed=0) -> tuple[int | None, float | None, float | None, int, int]:
    """What a campaign refuses before it stores anything: the budgets, the batch size and the seed (returned as
    an int, floats and ints), no budget for a space without a size, an algorithm that cannot search the space.
    A driver calls it before it opens the database too, so that a refused command leaves no database file."""
    checked = (_positive("the trial budget", trials, int, "trials"),
               _positive("the time budget", time_budget, api="time_budget"),
               _positive("the simulated-time budget", simulated_budget, api="simulated_budget"),
               _positive("the batch size", batch, int, "batch"), checked_seed(seed))
    if trials is None and time_budget is None and simulated_budget is None and space.size() is None:
        raise UsageError("give a budget (trials, time or simulated time): this space is unbounded")
    algorithm.check_space(space)
    return checked


def _storable(recipe: dict | None) -> dict | None:
    """``recipe``, when JSON holds it; else UsageError naming the driver's argument that it cannot hold (an
    algorithm given as an object, which a resume or `autotune worker` could not make again from the recipe)."""
    for key, value in ((recipe or {}).get("args") or {}).items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise UsageError(f"{argument(key)} {value!r} cannot be stored in the campaign's recipe, from which a "
                             "resume or `autotune worker` makes it again; give plain names and numbers (an "
                             "algorithm or cost model of your own as 'module:Class'), or run autotune.Campaign with "
                             "the object") from None
    return recipe


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
    (autotune.drivers.scale), stored with the campaign so that `autotune worker` can join it; a script's
    campaign (``tune_kernel``), which no worker can make again, keeps only its warm start's, with no kind.

    ``fresh``: start afresh under this name: an existing campaign of that name is deleted first (its
    measured trials stay in the database, with no campaign, and this campaign looks them up as
    ``reused``).

    ``retry_failed``: a point the search asks for whose stored trial (of any campaign, or an import) failed
    with a TIMEOUT or a RUNTIME_ERROR, which another attempt may pass (a busy or hung device, a crash), is
    measured again instead of looked up, once per run; the new measurement replaces the failed trial, whose
    failure is kept in its ``meta["earlier"]``. The failures of this campaign's own history are not asked for
    again: with ``fresh`` too, the search starts over and retries them as it meets them.

    Ctrl-C (KeyboardInterrupt) stores what was measured (of the batch in flight too, what a runner that
    measures it one candidate after the other completed: ``BatchInterrupted``), marks the campaign
    "interrupted", gives back this worker's claim and reservations, says on stderr how to resume (a
    command line, or in a script how a script does), and is raised again.

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
        fresh: bool = False, retry_failed: bool = False,
    ):
        if not isinstance(name, str) or not name:
            raise UsageError(f"a campaign needs a name (a non-empty string), not {name!r}")
        check_campaign_name(name)
        if not isinstance(getattr(space, "task", None), Task):
            raise UsageError(f"the space must be a Space (e.g. autotune.KnobSpace({{'x': [1, 2, 4]}})), not "
                             f"{type(space).__name__}")
        if not callable(getattr(runner, "measure", None)) or not isinstance(getattr(runner, "device", None), Device):
            raise UsageError(f"the runner must be a Runner with a device and a measure method, not "
                             f"{type(runner).__name__} (to minimise a Python function: autotune.minimize)")
        if getattr(space, "anonymous", False):  # a KnobSpace made without a task: it cannot say what is measured
            space = copy.copy(space)
            space.task = Task("knobs", name, space.task.params)
        self.name, self.space, self.runner, self.db = name, space, runner, db
        self.algorithm = make_algorithm(algorithm) if isinstance(algorithm, str) else algorithm
        self.trials, self.time_budget, self.simulated_budget, self.batch, self.seed = check_run(
            space, self.algorithm, trials=trials, time_budget=time_budget, simulated_budget=simulated_budget,
            batch=batch, seed=seed)  # before the campaign is opened in the database
        self.warmup = list({c.key: c for c in warmup}.values())
        warmup = list(warmup)
        self.required = {c.key for c in warmup[:len(warmup) if warmup_required is None else int(warmup_required)]}
        self.recipe = _storable(recipe)
        self.fresh = bool(fresh)
        if not isinstance(retry_failed, bool):
            raise UsageError(f"{argument('retry_failed')} is True or False, not {retry_failed!r}")
        self.retry_failed = retry_failed
        self.console = console or Console(stderr=True)
        # a bar only on a terminal (or a notebook): logs and pipes get no control characters; None, the
        # default of the Python API, is on there too, False (--no-progress) off everywhere
        self.progress = (progress is None or bool(progress)) and bool(self.console.is_terminal or self.console.is_jupyter)

    def _options(self) -> dict:
        config = dict(self.algorithm.config)
        inner = getattr(self.algorithm, "inner", None)
        if isinstance(inner, SearchAlgorithm):  # a wrapper (model guidance): its inner algorithm's options too
            config = {**inner.config, **config}
        options = {"algorithm_options": config, "seed": self.seed, "batch": self.batch, "budget": self._budget()}
        if self.recipe is not None:
            options["recipe"] = self.recipe
        return options

    def _budget(self) -> dict:
        return {"trials": self.trials, "time_s": self.time_budget, "simulated_s": self.simulated_budget}

    def _share_budget(self, campaign_id: int, stored_options: dict | None, joining: bool) -> None:
        """The live workers' claims count against one trial budget: a run joining them takes theirs (stored by
        the run that started or last resumed the campaign alone), saying so when it was given another; a run
        resuming the campaign alone stores its own, and its recipe, which a worker started later runs (with that
        budget)."""
        stored = (stored_options or {}).get("budget") or {}
        if not joining:
            recipe = (stored_options or {}).get("recipe")
            if stored != self._budget() or (self.recipe is not None and recipe != self.recipe):
                self.db.set_campaign_run(campaign_id, self._budget(), self.recipe)
            return
        theirs = stored.get("trials")
        if theirs is not None and theirs != self.trials:
            print(f"campaign {self.name!r}: joining its running workers with their trial budget of {theirs}"
                  + (f", not {self.trials}" if self.trials is not None else ""), file=sys.stderr)
            self.trials = int(theirs)

    def _check_same_sources(self, stored_options: dict | None) -> None:
        """A warm-started campaign resumes from the sources it started from: its search state and the
        results it was told came from them (a recipe without ``transfer_from`` was stored before it was kept)."""
        if self.recipe is not None:
            check_same_sources(self.name, stored_options, self.recipe.get("args") or {})

    def _note_other_seed(self, stored_options: dict | None) -> None:
        """Say on stderr that a resumed campaign goes on with its own search when this run was given another
        seed: its search state, not the seed, says what it asks next (a new search needs --fresh or a name of
        its own)."""
        theirs = (stored_options or {}).get("seed")
        if isinstance(theirs, int) and theirs != self.seed:
            fresh, campaign = ("--fresh", "--campaign") if COMMAND_LINE.get() else ("fresh=True", "campaign")
            print(f"campaign {self.name!r}: resumes its search (seed {theirs}); the seed {self.seed} given is not "
                  f"used: to search with it, start afresh ({fresh}) or choose another {campaign} name", file=sys.stderr)

    def _start_afresh(self) -> None:
        """Delete the campaign of this name, if there is one (refused while it has live workers); its
        trials stay (campaign NULL), to be reused."""
        with self.db.session() as s:
            exists = s.scalar(select(CampaignRow.id).where(CampaignRow.name == self.name)) is not None
        if exists:
            self.db.delete_campaign(self.name, with_trials=False)

    def run(self) -> CampaignResult:
        """Run the campaign to its budget (see the class). SIGTERM, where the program left it at its default,
        stops it as Ctrl-C does, and an interrupt Python dropped stops it at its next round
        (``campaign_interrupts``)."""
        with campaign_interrupts():
            return self._run()

    def _run(self) -> CampaignResult:
        start = time.perf_counter()
        task, device = self.space.task, self.runner.device
        if self.fresh:
            self._start_afresh()
        row, resumed = self.db.open_campaign(self.name, task, device, self.algorithm.name or "custom", self._options())
        if resumed:
            self._check_same_sources(row.options)
            self._note_other_seed(row.options)
        cid = row.id
        worker = worker_id(run=True)
        joining = any(w["alive"] for w in self.db.campaign_workers(cid))
        if resumed:
            self._share_budget(cid, row.options, joining)
        # this run is a live worker from now on, before its history loads: a --fresh or a delete of the
        # campaign started meanwhile is refused rather than pulling the campaign from under it
        heartbeat = Heartbeat(self.db, cid, worker)
        run = None
        interrupted: KeyboardInterrupt | None = None  # raised once finally has said how to resume
        failed = False
        try:
            history = self.db.campaign_history(cid)
            figures = self.db.campaign_figures(cid)

            def store_model(metrics: dict, data: bytes) -> None:  # every retrained cost model is logged
                model = self.algorithm.cost_model
                spec = own_model_spec(model)
                if spec is not None:  # a model of one's own: `autotune predict` loads it again by its spec
                    metrics = {**metrics, MODEL_SPEC: spec}
                self.db.save_cost_model((model.name if model is not None else "") or "model", data, metrics,
                                        int(metrics.get("n_train", metrics.get("n_samples", 0))), task, device, cid)

            self.algorithm.on_retrain = store_model
            self.algorithm.bind(self.space, np.random.default_rng(self.seed), [m for m, _ in history])
            state = self.db.load_state(cid)
            if state:
                self.algorithm.load_state_dict(state)
            if joining and self.algorithm.rng is not None:
                # joining workers that run now: the shared state would make it propose what they propose
                mix = np.random.default_rng([self.seed, zlib.crc32(worker.encode())])
                self.algorithm.rng.bit_generator.state = mix.bit_generator.state
            self.db.set_campaign_status(cid, "running")
            run = CampaignRun(self, cid, worker, figures, {m.candidate.key for m, _ in history}, start)
            progress = run.progress()
            with progress:
                bar = progress.add_task(self.name, total=self.trials, completed=run.measured, info="")
                status = run.loop(lambda: progress.update(bar, completed=run.measured, info=run.info()))
        except KeyboardInterrupt:
            interrupt_handled()
            interrupted = interruption()
            if run is not None:
                run.store_unstored()
            raise interrupted from None  # once finally (below) has said how to resume, which becomes its message
        except CampaignGone:
            raise  # its id may be another campaign's now: nothing more is written under it
        except Exception as exc:
            failed = True  # what was stored stays; the campaign no longer says "running" for good
            if run is not None and not isinstance(exc, DatabaseError):
                # the error came from the algorithm or the runner (code of the user's own, often): what was
                # measured before it is stored all the same, so that it is never measured again
                try:
                    run.store_unstored()
                except Exception:  # noqa: BLE001 - the error that stopped the run is the one to raise
                    pass
            raise
        finally:
            heartbeat.stop()
            # the claim and any reservation left (only if the run failed or was interrupted) are given back; a
            # killed worker's stay until another worker sees it is dead and takes them over
            self.db.release_claim(cid, worker)
            if interrupted is not None:
                interrupted.args = (self._interrupted(cid),)  # what a --json output's last line says
            elif failed and not self._others_alive(cid):
                self.db.set_campaign_status(cid, "failed")
        if status != "time-budget" or not self._others_alive(cid):  # a run's own time: others run on
            self.db.set_campaign_status(cid, status)
        return campaign_result(self.name, task, device, status, self.db.campaign_figures(cid),
                               time.perf_counter() - start, resumed, run.measured_here)

    def _others_alive(self, campaign_id: int) -> bool:
        """Whether other workers still run the campaign (this one has given its claim back)."""
        return any(w["alive"] for w in self.db.campaign_workers(campaign_id))

    def _interrupted(self, campaign_id: int) -> str:
        """Mark the campaign interrupted, unless other workers still run it, and say on stderr how to resume it
        (what was stored stays); returns what it said."""
        if not self._others_alive(campaign_id):
            self.db.set_campaign_status(campaign_id, "interrupted")
        stored = self.db.campaign_figures(campaign_id).trials
        said = f"interrupted: {stored} trials stored; resume with: {self.resume_command()}"
        print(said, file=sys.stderr)
        return said

    def resume_command(self) -> str:
        """The command line that resumes this campaign (from its recipe), or how to make one."""
        return resume_command(self.name, self.recipe, self.db, ray=getattr(self.runner, "ray_address", None),
                              ray_actors=getattr(self.runner, "ray_actors_asked", None))
