"""ModelGuided(inner, cost_model): any algorithm searches against a cost model; only the most
promising unmeasured candidates are measured (TVM Ansor/MetaSchedule style).

Each ``ask(n)``:
1. until ``init`` points were measured (and while the model is untrained, e.g. too few successes):
   the space's initial point, then random samples, or with ``design="maximin"`` a space-filling
   design (each point the farthest, in per-feature rank, from those measured or chosen, among 256
   random unseen points of an enumerable space). Spread points teach the first model more about
   the whole space than random ones, which cluster (the default: fewer measurements to 5% of the
   optimum on the recorded spaces under both evaluation protocols, docs/benchmarks.md);
2. the model is retrained when ``retrain_every`` new results (or ``retrain_growth`` times the
   results it was trained on, if more: retraining gets rarer as the history grows) arrived;
3. candidates are scored by the model (an XGBoost model, with ``pairs="log2"``, also sees the sum and
   difference of every two log2 columns of power-of-two knobs: a block's threads, a thread's tile,
   which single-column splits reach only through deep interactions; fewer measurements to 5% of the
   optimum on gemm, chosen on every fold leaving a GPU out, docs/benchmarks.md);
   a space of at most ``score_all`` points is enumerated
   once and *every* unmeasured point is scored (exact argmax of the model, cheap with
   XGBoost); a space that cannot be enumerated is searched by a fresh copy of
   the inner algorithm, bound to the real measurements (so it starts from the best measured
   points), told the first ensemble member's predicted costs for ``pool`` proposals, ``inner_batch``
   at a time (one booster call a step; every member scores what it proposed once, for the batch).
   Scoring every point is both the better search and, up to about 140,000 points, the cheaper
   one (docs/benchmarks.md), hence ``score_all``. A larger enumerable space (``large="both"``)
   gets both: a fixed random sample of ``sample`` of its points is searched as a space that
   size (design, scoring, far picks), and the inner search's proposals, near the best measured
   points, are scored beside it (fewer measurements to 5% of the optimum than either alone on
   the recorded spaces forced onto this path, under both evaluation protocols); where the
   candidates come from is :mod:`autotune.algorithms.listing`'s;
4. the ``n - round(epsilon * n)`` best-scored unseen candidates are returned plus random ones
   (the epsilon share, carried over between batches so small batches get their share too);
   with an ensemble model (``predict_members``), successive slots take the best candidate of
   successive members (m members in turn, continued from one batch to the next, so batches smaller
   than the ensemble use every member too), a Thompson-like choice that spreads the search where
   the members disagree. Asked fewer points than the ensemble has members (one at a time, as a
   single device measures), the member whose turn it is is first refit alone on every result told
   so far, and the scheduled retrain leaves the members to that: each pick then knows every result
   before it, for one member's fit per point (listed spaces below the screen's size; fewer
   measurements to 5% of the optimum asked one at a time, docs/benchmarks.md). Once ``stall``
   results in a row brought no better one, ``stall_share`` of the model's slots go instead to points
   of its ``stall_pool`` best-scored unseen ones, each the farthest (per-feature rank) from every
   point seen: a model trained around a plateau keeps proposing its
   neighbours, and a narrow optimum elsewhere is found only by measuring where nothing was
   (enumerated spaces; shorter tails on the recorded spaces, docs/benchmarks.md); both choices are
   :mod:`autotune.algorithms.batch_choice`'s;
5. once failures were measured, a failure classifier (:class:`~autotune.cost_models.failures.FailureModel`,
   retrained with the model) keeps candidates whose failure probability is above
   ``avoid_failures`` out of both the model's picks and the random ones, and those above
   ``spread_avoid`` out of the design's spread points, which are drawn while the ranking model
   still waits for enough successful results (unless every candidate is that likely to fail): on
   spaces where many configurations fail to compile or run, the search stops paying for them.

After every retrain the model's quality is in ``last_metrics`` and, with the serialised model,
passed to ``on_retrain(metrics, model_bytes)`` when set: Spearman and top-k recall
(k = a quarter of them) of the *previous* model on the results measured since it was trained
(held out by construction, no extra fit); with ``quality_every`` > 0, also those of a model
fitted on a random 80% of the measurements, on the other 20%, every that many retrains.
``state_dict`` holds the rng, the epsilon carry, the next member's turn, the pending proposals, the number of results
the model was last trained on, and the last inner state; ``load_state_dict`` retrains the model from the
history given to ``bind`` (its first ``trained_on`` results), so a resumed campaign has its
model again before the first batch and continues the same search.

The moves it needs (checked at ``bind``) are random samples, the inner algorithm's moves, and
neighbor moves when ``local`` > 0. An inner algorithm that cannot search a model's predictions
(``unguided``: Optuna's GP sampler, a cost model of its own) is refused when the search is made.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from autotune.algorithms.base import Option, SearchAlgorithm, check_guidable, union_moves
from autotune.algorithms.batch_choice import round_robin
from autotune.algorithms.listing import ListedCandidates
from autotune.algorithms.registry import cost_model_class, make_algorithm
from autotune.algorithms.retraining import ModelRetraining
from autotune.algorithms.support import exhausted, fresh_sample, fresh_walk
from autotune.cost_models.base import CostModel
from autotune.cost_models.failures import FailureModel
from autotune.errors import UsageError
from autotune.types import Candidate, Measurement


class ModelGuided(ListedCandidates, ModelRetraining, SearchAlgorithm):
    name = "model-guided"
    description = "any algorithm searching against a cost model; the best unmeasured candidates are measured"
    no_repeats = True
    options = {
        "init": Option(8, "points measured before the model is used (see design)", low=1),
        "epsilon": Option(0.1, "share of each batch given to exploration (random points, or local moves)", high=1),
        "local": Option(0.0, "share of the exploration slots that are unseen neighbors of the best measured point", high=1),
        "design": Option("maximin", "how the points before the model are drawn: 'random', or 'maximin' (each the "
                                   "farthest, in per-feature rank, of 256 random unseen points from those chosen "
                                   "before; enumerable spaces)"),
        "retrain_every": Option(8, "retrain the model after this many new results", low=1),
        "retrain_growth": Option(0.05, "...or after this share of the results it was trained on, if more"),
        "pool": Option(1000, "model evaluations by the inner search per batch (spaces above score_all)", low=1),
        "inner_batch": Option(64, "candidates the inner search proposes per simulated step", low=1),
        "score_all": Option(100000, "spaces with at most this many points are scored exhaustively"),
        "large": Option("both", "how a larger enumerable space is searched: 'inner' (the inner search's proposals), "
                                 "'sample' (a fixed random sample of its points, searched as a space that size: "
                                 "design, scoring, far picks) or 'both' (the sample and the inner search's proposals)"),
        "sample": Option(50000, "points in that sample (at most score_all)", low=1),
        "quality_every": Option(0, "every this many retrains, also measure quality with a second fit on 80% (0: never)"),
        "holdout": Option(0.2, "share held out by that quality fit", high=1),
        "avoid_failures": Option(0.5, "skip candidates whose learnt failure probability is above this (1: never)", high=1),
        "pairs": Option("log2", "'log2': an XGBoost model also sees the sum and difference of every two log2 "
                                "columns of power-of-two knobs (their products and ratios: a block's threads, a "
                                "thread's tile); 'none': the space's features only"),
        "stall": Option(32, "after this many results without a better one, part of each batch (stall_share) goes to "
                           "the model's stall_pool best-scored unseen points farthest from every point seen (0: never)"),
        "stall_share": Option(0.25, "share of the model's slots given to those picks while the search stalls", high=1),
        "stall_pool": Option(256, "how many of the model's best-scored unseen points those picks are drawn from", low=1),
        "spread_avoid": Option(0.9, "the design's spread points skip points whose learnt failure probability is "
                                    "above this (1: never)", high=1),
    }

    def __init__(self, inner: SearchAlgorithm, cost_model: CostModel, **kwargs):
        super().__init__(**kwargs)
        for key, allowed in (("design", ("maximin", "random")), ("pairs", ("log2", "none")),
                             ("large", ("inner", "sample", "both"))):
            if str(self.config[key]) not in allowed:
                raise UsageError(f"model-guided option {key} must be one of {', '.join(allowed)}, "
                                 f"not {self.config[key]!r}")
        check_guidable(inner, cost_model.name or "given")
        self.inner = inner
        self.cost_model = cost_model
        self.name = f"{inner.name}+{cost_model.name or 'model'}"
        self.on_retrain: Callable[[dict, bytes], None] | None = None
        self.background = False  # retrain in a thread (set_parallel); results then depend on timing
        self._fitter: ThreadPoolExecutor | None = None
        self._job: tuple | None = None  # (future of _fit, results it trains on, metrics)
        self.last_metrics: dict | None = None
        self.predicted: dict[str, float] = {}  # score of each candidate the model chose

    def required_moves(self, space=None) -> tuple[str, ...]:
        """Random samples, the inner algorithm's moves, and neighbor walks when ``local`` > 0."""
        local = ("neighbor",) if float(self.config["local"]) > 0 else ()
        return union_moves(self.needs, self.inner.required_moves(space), local)

    def check_space(self, space) -> None:
        """As every algorithm's; the inner algorithm then settles what it runs on ``space`` (a bandit's arms)."""
        super().check_space(space)
        self.inner.check_space(space)

    def setup(self) -> None:
        self.history: list[Measurement] = []
        self.measured: set[str] = set()
        self.rows: list[np.ndarray] = []
        self.seen: set[str] = set()
        self.pending: list[str] = []
        self.trained_on = 0
        self.member_at: list[int] = []  # the results each ensemble member was last fit on
        self.retrains = 0
        self.carry = 0.0
        self.far_carry = 0.0  # asked one point at a time: the far picks' share accumulated so far (see _stalled)
        self.slot = 0
        self.inner_state: dict | None = None
        self._all: list[Candidate] | None = None
        self._sample_seed: int | None = None  # the seed of a large space's sample, kept in the state
        self._all_X: np.ndarray | None = None
        self._all_index: dict[str, int] = {}
        self._unseen: np.ndarray | None = None
        self._synced_set: set[str] | None = None  # the ``seen`` set that ``_unseen`` reflects...
        self._synced: set[str] = set()  # ...and the keys of it reflected there
        self._ranked: np.ndarray | None = None
        self._all_scores: np.ndarray | None = None
        self._all_scored_at = -1
        self._calib = (-1.0, 0.0)
        self._job = None
        self._failures = FailureModel()
        self._all_p_fail: np.ndarray | None = None
        if str(self.config["pairs"]) == "log2" and "pair_columns" in getattr(self.cost_model, "options", {}):
            self.cost_model.options["pair_columns"] = list(getattr(self.space, "log2_columns", []))

    # -- the model -------------------------------------------------------------------
    def _features(self, cs: list[Candidate]) -> np.ndarray:
        if self._all_X is not None and all(c.key in self._all_index for c in cs):
            return self._all_X[[self._all_index[c.key] for c in cs]]
        return np.asarray(self.space.features(cs), dtype=float).reshape(len(cs), -1)

    # -- failures --------------------------------------------------------------------
    def _threshold(self) -> float | None:
        thr = float(self.config["avoid_failures"])
        return thr if thr < 1.0 and self._failures.trained else None

    def _likely_to_run(self, cands: list[Candidate], scores: np.ndarray) -> tuple[list[Candidate], np.ndarray]:
        """The candidates the failure model does not expect to fail (all of them when it expects every one to)."""
        thr = self._threshold()
        if thr is None or not cands:
            return cands, scores
        rows = np.array([self._all_index.get(c.key, -1) for c in cands]) if self._all_p_fail is not None else None
        if rows is None:
            p = self._failures.predict(self._features(cands))
        else:  # the listed points' probabilities are known; the inner search's proposals are predicted
            p = self._all_p_fail[np.maximum(rows, 0)]
            other = np.flatnonzero(rows < 0)
            if len(other):
                p[other] = self._failures.predict(self._features([cands[i] for i in other]))
        keep = np.flatnonzero(p <= thr)
        if len(keep) == 0 or len(keep) == len(cands):
            return cands, scores
        return [cands[i] for i in keep], scores[:, keep]

    def _explore(self) -> Candidate | None:
        """A random unseen point, among those the failure model does not expect to fail once it has
        seen failures (drawn from the enumerated space's, or by rejection of a few samples)."""
        thr = self._threshold()
        if thr is not None and self._all_p_fail is not None:
            ok = np.flatnonzero(self._all_p_fail <= thr)
            for i in self.rng.permutation(ok)[:64]:
                if self._all[int(i)].key not in self.seen:
                    return self._all[int(i)]
        elif thr is not None:
            for _ in range(20):
                c = fresh_sample(self.space, self.rng, self.seen)
                if c is None or self._failures.predict(self._features([c]))[0] <= thr:
                    return c
        return fresh_sample(self.space, self.rng, self.seen)

    def ask(self, n: int) -> list[Candidate]:
        out: list[Candidate] = []
        if n <= 0 or exhausted(self.space, self.seen):
            return out
        n_model = 0
        if len(self.history) + len(self.pending) >= int(self.config["init"]) and self._ready(n):
            share = self.carry + float(self.config["epsilon"]) * n
            n_rand = int(share)
            self.carry = share - n_rand
            n_model = n - n_rand
        if n_model > 0:
            if self._refreshing(n):  # asked fewer points than there are members (not a random slot fewer)
                self._refit_members(self._turns_due(n_model), len(self.history))
            scored = self._scored_all()
            cands, scores = scored if scored is not None else self._scored_by_inner()
            if scored is not None and str(self.config["large"]) == "both" and len(self._all) < (self.space.size() or 0):
                more, more_scores = self._scored_by_inner()  # beside the sample: the points near the best measured
                keep = [j for j, c in enumerate(more) if c.key not in self._all_index]
                if keep and not cands:  # every point of the sample was seen: the inner search's alone
                    cands, scores = [more[j] for j in keep], more_scores[:, keep]
                elif keep:
                    cands = cands + [more[j] for j in keep]
                    scores = np.hstack([scores, more_scores[:, keep]])
            cands, scores = self._likely_to_run(cands, scores)
            n_far = self._stalled(n_model, scored is not None)
            chosen = round_robin(scores, n_model - n_far, self.slot)
            chosen += self._far_from_seen(cands, scores, n_far, chosen)
            self.slot += len(chosen)  # the next batch starts at the next member: small batches use them all
            for i in chosen:
                c = cands[i]
                self.predicted[c.key] = float(scores[:, i].mean())
                out.append(c)
                self._mark_seen(c)
        init = self.space.initial()
        best = min((m for m in self.history if m.ok), key=lambda m: m.cost, default=None) if n_model else None
        spread = n_model == 0 and str(self.config["design"]) == "maximin" and self._enumerated()
        while len(out) < n:
            c = None
            if init is not None and init.key not in self.seen and self.space.contains(init):
                c = init
            elif best is not None and self.rng.random() < float(self.config["local"]):
                c = fresh_walk(self.space, best.candidate, self.rng, self.seen)
            if c is None and spread:
                c = self._spread()
            if c is None:
                c = self._explore()
            if c is None:
                break
            out.append(c)
            self._mark_seen(c)
        self.pending.extend(c.key for c in out)
        return out

    def tell(self, results: list[Measurement]) -> None:
        if not results:
            return
        X = self._features([m.candidate for m in results])
        for m, row in zip(results, X):
            if m.candidate.key in self.measured:
                continue
            self.measured.add(m.candidate.key)
            self.seen.add(m.candidate.key)
            self.history.append(m)
            self.rows.append(row)
        done = {m.candidate.key for m in results}
        self.pending = [k for k in self.pending if k not in done]

    # -- state -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {**super().state_dict(), "pending": list(self.pending), "trained_on": self.trained_on,
                "retrains": self.retrains, "member_at": list(self.member_at),
                "carry": self.carry, "far_carry": self.far_carry, "slot": self.slot, "inner": self.inner_state, "metrics": self.last_metrics,
                "sample_seed": self._sample_seed}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.pending = list(state.get("pending", []))
        self.seen.update(self.pending)
        self.carry = float(state.get("carry", 0.0))
        self.far_carry = float(state.get("far_carry", 0.0))
        self.slot = int(state.get("slot", 0))
        self.inner_state = state.get("inner")
        self._sample_seed = state.get("sample_seed")  # a resumed search lists the same sample of a large space
        upto = min(int(state.get("trained_on", 0)), len(self.history))
        self.retrains = max(0, int(state.get("retrains", 0)) - 1)
        if upto > 0:
            self._enumerated()  # listed first, as a search that ran on had it: the fit scores it (failures too)
            self._train(upto)
            at = [min(int(a), len(self.history)) for a in state.get("member_at", [])]
            if len(at) == len(self.member_at):
                for m, had in enumerate(at):  # members refit on their turns, each on the results it had then
                    if had != upto:
                        self._refit_members([m], had)


def make_guided(algorithm_name: str | type | SearchAlgorithm, cost_model_name: str | CostModel = "xgb",
                cost_model_options: dict | None = None, **options) -> ModelGuided:
    """``ModelGuided`` around the algorithm ``algorithm_name`` (as :func:`make_algorithm` takes it): options that
    ModelGuided declares go to it, the others to the inner algorithm; ``cost_model_options`` to the model, named
    as :func:`cost_model_class` takes it or given as a CostModel object."""
    guided = {k: v for k, v in options.items() if k in ModelGuided.options}
    inner = make_algorithm(algorithm_name, **{k: v for k, v in options.items() if k not in guided})
    if isinstance(cost_model_name, CostModel):
        if cost_model_options:
            raise UsageError("the cost model is already made: give its options when making it, not here")
        model = cost_model_name
    else:
        model = cost_model_class(cost_model_name)(**(cost_model_options or {}))
    return ModelGuided(inner, model, **guided)


def make_search(algorithm: str | type | SearchAlgorithm, cost_model: str | CostModel | None = None, **options: Any):
    """The algorithm ``algorithm``, model-guided by ``cost_model`` when one is given. Either may be a registered
    name, a user's own class named "module:Class", or one of the user's own objects (a SearchAlgorithm, a
    CostModel); ``algorithm`` also its class."""
    if cost_model is None or (isinstance(cost_model, str) and cost_model in ("", "none")):
        return make_algorithm(algorithm, **options)
    if not isinstance(cost_model, CostModel):
        cost_model_class(cost_model)  # an unknown model name fails before the algorithm is built
    return make_guided(algorithm, cost_model, **options)
