"""When and how a model-guided search retrains its models (:class:`ModelRetraining`, a mixin of
:class:`~autotune.algorithms.model_guided.ModelGuided`, which owns the state these methods read).

- ``ask`` retrains once ``retrain_every`` new results (or ``retrain_growth`` times the results the model
  was trained on, if more) arrived: the cost model, its calibration to log cost, the failure model, and
  the scores of the listed points; the metrics of the model before it learnt the new results go to
  ``on_retrain`` with the serialised model;
- with several evaluations in flight (``set_parallel``) the fit runs on a copy in a thread while the
  model in hand keeps scoring;
- :func:`retrain_together` fits several searches' models side by side (a warm start's arms), with the
  same models and proposals as one after the other.
"""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from autotune.algorithms.batch_choice import SCREEN_ROWS, member_scores
from autotune.algorithms.support import exhausted
from autotune.cost_models.base import CostModel
from autotune.cost_models.failures import FailureModel
from autotune.cost_models.features import positive_costs
from autotune.cost_models.metrics import quality


class ModelRetraining:
    """The retraining of a model-guided search's cost and failure models."""

    def _train(self, upto: int, keep_members: bool = False) -> None:
        """Retrain on the first ``upto`` results; in the background (``parallel``, a model exists) the
        fit runs on a copy in a thread and the current model keeps scoring until the copy replaces it.
        ``keep_members``: the ensemble's members stay as they are (each is refit on its turn instead, see
        ``_refreshing``); the rest is retrained."""
        X, y, metrics = self._training_data(upto)
        if self.background and self.trained_on > 0:
            if self._fitter is None:
                self._fitter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="retrain")
            self._job = (self._fitter.submit(self._fit, copy.deepcopy(self.cost_model), X, y), upto, metrics)
            return
        self._install(*self._fit(self.cost_model, X, y, keep_members), upto, metrics)

    def _training_data(self, upto: int) -> tuple[np.ndarray, np.ndarray, dict]:
        """The rows and objectives of the first ``upto`` results, and the metrics of the model before it
        learns them (the results it never saw, and a fit on 80% every ``quality_every`` retrains)."""
        X = np.vstack(self.rows[:upto])
        y = np.array([m.objective for m in self.history[:upto]])
        metrics: dict = {"n_train": int(upto)}
        fresh = upto - self.trained_on
        if self.trained_on > 0 and fresh >= 3 and getattr(self.cost_model, "trained", True):
            # prequential: the results measured since the last training, which that model never saw
            metrics.update(quality(y[self.trained_on:upto], self.cost_model.predict(X[self.trained_on:upto]),
                                   k=max(1, fresh // 4)), holdout="new results")
        every = int(self.config["quality_every"])
        n_hold = int(upto * float(self.config["holdout"]))
        if every > 0 and self.retrains % every == 0 and n_hold >= 5 and upto - n_hold >= 5:
            perm = np.random.default_rng(upto).permutation(upto)  # own rng: the search rng is untouched
            hold, train = perm[:n_hold], perm[n_hold:]
            probe = type(self.cost_model).load(self.cost_model.save()).fit(X[train], y[train])
            if getattr(probe, "trained", True):
                metrics.update(quality(y[hold], probe.predict(X[hold])), holdout=f"random {n_hold}")
        return X, y, metrics

    def _fit(self, model: CostModel, X: np.ndarray, y: np.ndarray, keep_members: bool = False) -> tuple:
        """(fitted model, calibration of its scores to log cost, its serialisation for on_retrain, its
        scores of the enumerated space when there is one (None with ``keep_members``: the members and their
        scores stay), the failure model, its failure probabilities of the enumerated space, and whether the
        members were kept)."""
        if keep_members:
            model.fit(X, y, members=[])
        else:
            model.fit(X, y)
        failures = FailureModel(seed=len(y)).fit(X, ~np.isfinite(y))
        p_fail = failures.predict(self._all_X) if self._all_X is not None and failures.trained else None
        calib = self._calib
        ok = np.isfinite(y)
        if ok.sum() >= 3 and getattr(model, "trained", True):
            s, log_y = model.predict(X[ok]), np.log(positive_costs(y[ok]))  # a cost of 0 at a finite log
            a, b = np.polyfit(s, log_y, 1) if np.ptp(s) > 0 else (0.0, 0.0)
            calib = (a, b) if a < 0 else (-1.0, float(np.min(log_y)) + float(np.max(s)))
        scores = member_scores(model, self._all_X, screen=True) if self._all_X is not None and not keep_members \
            else None
        return (model, calib, model.save() if self.on_retrain is not None else b"", scores, failures, p_fail,
                keep_members)

    def _install(self, model: CostModel, calib: tuple, data: bytes, scores: np.ndarray | None,
                 failures: FailureModel, p_fail: np.ndarray | None, kept: bool, upto: int, metrics: dict) -> None:
        fresh = self._all_scores is not None and self._all_scored_at == self.retrains
        self.cost_model, self._calib, self.trained_on, self.last_metrics = model, calib, upto, metrics
        if not kept:
            self.member_at = [upto] * int(getattr(model, "members", 0) or 0)
        self._failures, self._all_p_fail = failures, p_fail
        self.retrains += 1
        if scores is not None:
            self._all_scores, self._all_scored_at = scores, self.retrains
        elif kept and fresh:  # the members, and so their scores, are those of before
            self._all_scored_at = self.retrains
        if self.on_retrain is not None:
            self.on_retrain(metrics, data)

    def _refreshing(self, n: int) -> bool:
        """Whether members are refit on their turns when ``n`` points are asked: fewer than the ensemble has
        members, so that each slot's member knows every result measured before it, as a batch of one point per
        member does, for the cost of one member's fit per slot. Not in the background (set_parallel), nor for
        a listing that is screened (batch_choice.SCREEN_ROWS) or not listed."""
        size = len(self.member_at)
        return 1 < size and n < size and not self.background and self._enumerated() and len(self._all_X) < SCREEN_ROWS

    def _turns_due(self, n: int) -> list[int]:
        """The members the next ``n`` model slots take that were fit on fewer results than were told."""
        size = len(self.member_at)
        return sorted(m for m in {(self.slot + j) % size for j in range(n)} if self.member_at[m] < len(self.history))

    def _refit_members(self, members: list[int], upto: int) -> None:
        """Refit ``members`` alone on the first ``upto`` results and rescore the listing with each."""
        if not members or self._all_X is None:
            return
        self._scored_all()  # every member's scores of the listing, computed if the last retrain left none
        X, y = np.vstack(self.rows[:upto]), np.array([m.objective for m in self.history[:upto]])
        self.cost_model.fit(X, y, members=members)
        for m in members:
            self._all_scores[m] = self.cost_model.predict_members(self._all_X, slice(m, m + 1))[0]
            self.member_at[m] = upto

    def set_parallel(self, slots: int) -> None:
        """With several evaluations in flight, retrain beside the search instead of holding it up."""
        self.background = slots > 1

    def _ready(self, n: int = 0) -> bool:
        """Whether the model may score, for an ``ask`` of ``n`` points (retrained first when due)."""
        if self._job is not None and self._job[0].done():
            future, upto, metrics = self._job
            self._job = None
            self._install(*future.result(), upto, metrics)
        if len(self.history) < int(self.config["init"]):
            return False
        if self._due():
            self._train(len(self.history), keep_members=self.trained_on > 0 and self._refreshing(n))
        return getattr(self.cost_model, "trained", True)

    def _due(self) -> bool:
        """Whether the model is to be retrained on the results told so far (it has none, or enough new ones)."""
        n = len(self.history)
        every = max(int(self.config["retrain_every"]), int(float(self.config["retrain_growth"]) * self.trained_on))
        return n >= int(self.config["init"]) and (self.trained_on == 0 or n - self.trained_on >= every) \
            and self._job is None

    def retrains_on_ask(self) -> bool:
        """Whether the next ``ask`` (of at least one point) retrains the model before it proposes, and waits
        for it: not in the background, where the model in hand keeps scoring (see ``retrain_together``)."""
        return not exhausted(self.space, self.seen) and self._due() and not (self.background and self.trained_on > 0)


def retrain_together(searches: list[ModelRetraining]) -> None:
    """Retrain, side by side on threads, the searches whose next ``ask`` would retrain and wait for it (a
    warm start's arms, each with a model of its own), then install the models in the order given: the
    same models and the same proposals as retraining one after the other at each ``ask``, in less time
    (XGBoost trains without the interpreter's lock)."""
    due = [s for s in searches if s.retrains_on_ask()]
    if len(due) < 2:
        return
    jobs = [(s, len(s.history), *s._training_data(len(s.history))) for s in due]
    with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="retrain") as pool:
        fits = [pool.submit(s._fit, s.cost_model, X, y) for s, _, X, y, _ in jobs]
        done = [f.result() for f in fits]
    for (s, upto, _, _, metrics), fit in zip(jobs, done):
        s._install(*fit, upto, metrics)
