"""WarmStart: a search warm-started from other devices' measurements of the same task, that races
the warm guess against the cold search so that a misleading source costs little.

1. The sources' best configurations (``top_k`` of them, round-robin over the sources'
   rankings, heaviest source first, those that are points of the target space) are measured first;
2. then ``init`` points spread over the space (``design``, as in ModelGuided; the target data that
   shows where the devices differ);
3. then every batch is shared between the arms, the first two
   :class:`~autotune.algorithms.model_guided.ModelGuided` searches told every target result:
   - *warm*: its model is one pooled XGBoost ranking model over the sources' rows and the
     target's (each device a ranking group, the target weighted as much as all sources), with
     the device properties as extra features (:class:`~autotune.cost_models.pooled.PooledModel`);
   - *cold*: the search run without sources (the target-only XGBoost model);
   - *probe*: the sources' next ``more_probes`` best configurations in the same order, so a
     source's ranking is followed further only while it keeps paying (its first ``top_k`` probes
     count for it as for the warm arm; a later probe earns credit only when it beats the
     ``probe_top``-th best earlier result), and a fixed ``top_k`` does not stop just short of the
     configuration that is within reach of the target's optimum.
   Each slot goes to the arm that wins a Thompson draw from Beta(1 + credit, 1 + misses) of
   each arm. A result earns its arm the credit r = (share of the earlier successful target
   results it beats) ** ``focus`` and the miss 1 - r (a failure: r = 0; the first probes are the
   warm arm's and the probe arm's); ``focus`` above 1 weighs the top of the target's results, where the search is won.
   An arm's credit and misses fade by ``discount`` at each of its results, so its share follows
   what it pays now. A ``cold_floor`` share of every batch (a quarter; carried over between batches,
   so one point at a time gets it too) goes to the cold arm before the draws: an arm whose picks
   are good but not the best keeps winning draws, and the floor keeps the cold search going beside
   it (a source wrong on its top, or whose best configurations fail on the target, cost less; the
   evaluation protocol chose it on the real pairs, docs/benchmarks.md).

Why a race: a source can rank the bulk of the target's space rightly and its top wrongly; a
check of its overall agreement then passes while the pooled model keeps steering toward the
source's optimum. The race does not try to detect that: once the warm arm's proposals stop
ranking high among the target's results and the cold arm's do, the slots move to the cold arm within a
few batches, and back when the warm arm pays again, so a poor source costs about its probes and
a few batches; a good one takes nearly every slot. The pooled model also keeps its own check
(Spearman of the sources-only ranking of the target's results after ``check_after`` of them,
below ``min_rho`` the source rows are left out; then every slot goes to the cold arm, since a
second target-only search on the same data explores less than one with every slot).

``sources`` is a list of :class:`SourceData` (a device's measurements, and a weight). Without
sources it is the cold arm alone: an ordinary model-guided search. The warm arm's model is the
one reported (``cost_model``, ``on_retrain``).
"""

from __future__ import annotations

import bisect
import copy
import itertools
from dataclasses import dataclass, field

import numpy as np

from autotune.algorithms.base import Option, SearchAlgorithm, check_guidable, union_moves
from autotune.algorithms.model_guided import ModelGuided
from autotune.algorithms.registry import DEFAULT_TRANSFER_TOP
from autotune.algorithms.retraining import retrain_together
from autotune.cost_models.pooled import PROPS, PooledModel, device_vector, row_keys
from autotune.cost_models.xgb import XGBCostModel
from autotune.types import Candidate, Device, Measurement

ARMS = ("warm", "cold", "probe")


@dataclass
class SourceData:
    """One source device's measurements of the task (failures included) and its weight."""

    device: Device
    measurements: list[Measurement]
    weight: float = 1.0
    info: dict = field(default_factory=dict)

    def ranked(self) -> list[Measurement]:
        """Successful measurements, fastest first."""
        return sorted((m for m in self.measurements if m.ok), key=lambda m: m.cost)


class WarmStart(SearchAlgorithm):
    name = "warm-start"
    description = "source devices' best configurations first, then a model on all devices' data races the cold search"
    no_repeats = True
    options = {
        "top_k": Option(DEFAULT_TRANSFER_TOP, "source best configurations measured first"),
        "more_probes": Option(24, "source best configurations after those, measured while they keep paying (the probe arm)"),
        "min_rho": Option(0.2, "leave the sources out of the pooled model while their Spearman with the target's results is lower", low=-1, high=1),
        "check_after": Option(8, "target results needed before the sources are checked"),
        "epsilon": Option(0.1, "share of each model-guided batch given to random points", high=1),
        "retrain_every": Option(4, "retrain the warm arm's model after this many new results", low=1),
        "init": Option(8, "points measured after the probes, before the models are used"),
        "design": Option(ModelGuided.options["design"].default, "how those points are drawn (ModelGuided's design: "
                                                                "'maximin' spreads them away from the probes and each other)"),
        "pairs": Option("none", "'log2': both arms' models also see the products and ratios of power-of-two knobs "
                                "(ModelGuided's pairs, the cold search's default); 'none': the knobs alone, which a "
                                "misleading source's probes mislead less"),
        "stall": Option(0, "both arms' far picks once their search stalls (ModelGuided's stall; 0: never)"),
        "large": Option("inner", "how both arms search a space above ModelGuided's score_all (ModelGuided's large; "
                                 "'inner': two arms scoring a sample each cost half as much again per trial of a "
                                 "campaign on a million points, docs/benchmarks.md)"),
        "pool": Option(ModelGuided.options["pool"].default // 2, "model evaluations per batch by each arm's inner "
                                                                 "search (spaces above score_all; ModelGuided's pool): "
                                                                 "the two arms together as many as one search", low=1),
        "focus": Option(4.0, "a result's credit is the share of earlier target results it beats, to this power"),
        "top": Option(0, "when above 0, a result's credit is 1 if it beats the top-th best earlier result, else 0"),
        "probe_top": Option(3, "a later probe earns credit only when it beats the probe_top-th best earlier result"),
        "discount": Option(0.95, "weight an arm's credit keeps at every new result", high=1),
        "cold_floor": Option(0.25, "share of each batch after the design points that goes to the cold arm whatever "
                                   "the draws (the race gives out the rest)", high=1),
    }

    def __init__(self, inner: SearchAlgorithm, sources: list[SourceData], target_device: Device | None = None,
                 **kwargs):
        super().__init__(**kwargs)
        check_guidable(inner, "xgb")  # both arms are model-guided searches around it
        self.target_device = target_device
        self.inner = inner
        self.sources = list(sources)
        self.name = f"warm-start+{inner.name}"
        self.arms: dict[str, ModelGuided] = {}

    # -- what a campaign reads -------------------------------------------------------
    @property
    def _reported(self) -> ModelGuided | None:
        return self.arms.get("warm") or self.arms.get("cold")

    @property
    def on_retrain(self):
        return getattr(self, "_on_retrain", None)

    @on_retrain.setter
    def on_retrain(self, fn) -> None:
        self._on_retrain = fn
        if self._reported is not None:
            self._reported.on_retrain = fn

    @property
    def cost_model(self):
        return self._reported.cost_model if self._reported is not None else None

    @property
    def predicted(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for arm in self.arms.values():
            out.update(arm.predicted)
        return out

    def required_moves(self, space=None) -> tuple[str, ...]:
        return union_moves(self.needs, self.inner.required_moves(space))

    def check_space(self, space) -> None:
        """As every algorithm's; the inner algorithm then settles what it runs on ``space`` (a bandit's arms)."""
        super().check_space(space)
        self.inner.check_space(space)

    # -- set-up ----------------------------------------------------------------------
    def setup(self) -> None:
        space = self.space
        usable = [s for s in self.sources if s.measurements]
        top_k = int(self.config["top_k"])
        ranked = self._top_configs(usable, top_k + max(0, int(self.config["more_probes"])) if top_k > 0 else 0)
        self.queue: list[Candidate] = ranked[:top_k]
        self.more: list[Candidate] = ranked[top_k:]  # the probe arm's, in the sources' order
        self.first_probes = {c.key for c in self.queue}
        self.probes: list[Candidate] = list(self.queue)  # every probe chosen, the probe arm's too (kept in the state)
        seed = int(self.rng.integers(2**31))
        init = len(self.queue) + int(self.config["init"])  # both arms: design points until the probes and these were measured
        design = str(self.config["design"])
        pairs, stall = str(self.config["pairs"]), int(self.config["stall"])
        large, pool = str(self.config["large"]), int(self.config["pool"])
        cold = ModelGuided(copy.deepcopy(self.inner), XGBCostModel(seed=seed), init=init,
                           epsilon=float(self.config["epsilon"]), holdout=0.0, design=design, pairs=pairs, stall=stall,
                           large=large, pool=pool)
        self.arms = {}
        if usable:
            rows = [(np.asarray(space.features([m.candidate for m in s.measurements]), dtype=float),
                     np.array([m.objective for m in s.measurements]), device_vector(s.device)) for s in usable]
            target = device_vector(self.target_device) if self.target_device else np.full(len(PROPS), np.nan)
            model = PooledModel(rows, target, seed=seed, min_rho=float(self.config["min_rho"]),
                                check_after=int(self.config["check_after"]))
            if self.queue:
                model.exclude = self._rows(self.queue)
            self.arms["warm"] = ModelGuided(self.inner, model, init=max(1, init), design=design, pairs=pairs, stall=stall,
                                            large=large, pool=pool,
                                            epsilon=float(self.config["epsilon"]),
                                            retrain_every=int(self.config["retrain_every"]), holdout=0.0)
        self.arms["cold"] = cold
        self.seen: set[str] = set()
        listing: dict = {}
        for arm in self.arms.values():
            arm.bind(space, np.random.default_rng(int(self.rng.integers(2**63))))
            arm.seen = self.seen  # one set: an arm never proposes what the other has
            arm.shared_listing = listing  # and one listing of the space's points, built by the first to need it
        if self._reported is not None:
            self._reported.on_retrain = getattr(self, "_on_retrain", None)
        self.owner: dict[str, str] = {}
        self.bets: set[str] = set()  # pending proposals that earn or lose their arm credit
        self.credit = {a: 0.0 for a in ARMS}
        self.misses = {a: 0.0 for a in ARMS}
        self.costs: list[float] = []  # the successful target costs so far, ascending
        self.unjudged: list[float | None] = []  # the first probes' costs (None: failed), not yet credited
        self.floor_carry = 0.0  # the cold arm's floor not given out yet (see share)

    def _top_configs(self, sources: list[SourceData], k: int) -> list[Candidate]:
        """Up to k distinct source-best configurations that are points of the space, round-robin
        over the sources' rankings, heaviest source first."""
        if k <= 0:
            return []
        lists = [list(itertools.islice((m.candidate for m in s.ranked() if self.space.contains(m.candidate)), k))
                 for s in sorted(sources, key=lambda s: -s.weight)]
        out: dict[str, Candidate] = {}
        for i in range(k):
            for lst in lists:
                if i < len(lst) and len(out) < k:
                    out.setdefault(lst[i].key, lst[i])
        return list(out.values())

    # -- ask / tell ------------------------------------------------------------------
    def share(self, n: int) -> dict[str, int]:
        """Slots of the next ``n`` per arm: the cold arm's floor once the design points are in, then one
        Thompson draw of each arm's success rate per slot (the probe arm while it has configurations
        left); every slot to the cold search once the pooled model's check has left all sources out."""
        if "warm" not in self.arms or n <= 0 or not self.arms["warm"].cost_model.active:
            return {"cold": max(n, 0)}  # the sources were left out: the warm search is the cold one
        arms = [a for a in ARMS if a != "probe" or (self.more and self._designed())]  # after the design points
        floor = 0
        if self._designed():  # the cold arm's floor, carried over between batches so small ones get it too
            self.floor_carry += float(self.config["cold_floor"]) * n
            floor = min(n, int(self.floor_carry + 1e-9))
            self.floor_carry -= floor
        draws = np.array([[self.rng.beta(1.0 + self.credit[a], 1.0 + self.misses[a]) for a in arms]
                          for _ in range(n - floor)]).reshape(n - floor, len(arms))
        wins = np.argmax(draws, axis=1)
        out = {a: int((wins == i).sum()) for i, a in enumerate(arms)}
        out["cold"] += floor
        return out

    def _designed(self) -> bool:
        """Whether the probes and the points spread after them were told (the warm arm's model is due)."""
        warm = self.arms.get("warm")
        return warm is not None and len(warm.history) >= int(warm.config["init"])

    def _probe(self, n: int) -> list[Candidate]:
        """The probe arm's next ``n``: the sources' next-best configurations not measured yet."""
        out = []
        while self.more and len(out) < n:
            c = self.more.pop(0)
            if c.key not in self.seen:
                out.append(c)
                self.seen.add(c.key)
        if out:  # the target-only fallback leaves the sources' picks out, as it does the first probes
            self.arms["warm"].cost_model.exclude.update(self._rows(out))
            self.probes += out
        return out

    def _rows(self, cands: list[Candidate]) -> set[bytes]:
        """The feature rows of ``cands`` (the pooled model's ``exclude``)."""
        return set(row_keys(np.asarray(self.space.features(cands), dtype=float))) if cands else set()

    def ask(self, n: int) -> list[Candidate]:
        out: list[Candidate] = []
        while self.queue and len(out) < n:
            c = self.queue.pop(0)
            if c.key not in self.seen:
                out.append(c)
                self.seen.add(c.key)
                self.owner[c.key] = "warm"
                self.bets.add(c.key)
        slots = self.share(n - len(out))
        order = sorted(slots, key=lambda a: -slots[a])
        # every arm with slots is asked below: those whose ask would retrain first retrain side by side
        retrain_together([self.arms[a] for a in order if slots[a] > 0 and a in self.arms])
        for a, want in [(a, slots[a]) for a in order] + [(a, n) for a in order]:  # then one fills what the other lacks
            want = min(want, n - len(out))
            if want > 0 and a == "probe":
                got = self._probe(want)
                self.owner.update((c.key, a) for c in got)
                self.bets.update(c.key for c in got)
                out.extend(got)
            elif want > 0:
                got = self.arms[a].ask(want)
                self.owner.update((c.key, a) for c in got)
                self.bets.update(c.key for c in got if c.key in self.arms[a].predicted)
                out.extend(got)
        return out

    def _reward(self, cost: float | None, top: int | None = None) -> float:
        """The credit of a result (None: a failure) against the successful target results so far."""
        if cost is None:
            return 0.0
        top = int(self.config["top"]) if top is None else top
        if top > 0:
            return float(len(self.costs) < top or cost < self.costs[top - 1])
        if not self.costs:
            return 1.0
        slower = len(self.costs) - bisect.bisect_right(self.costs, cost)
        return (slower / len(self.costs)) ** float(self.config["focus"])

    def _judge(self, arms, reward: float) -> None:
        fade = float(self.config["discount"])
        for a in arms:
            self.credit[a] = fade * self.credit[a] + reward
            self.misses[a] = fade * self.misses[a] + 1.0 - reward

    def tell(self, results: list[Measurement]) -> None:
        for m in results:
            arm = self.owner.pop(m.candidate.key, None)
            bet = m.candidate.key in self.bets and arm is not None
            self.bets.discard(m.candidate.key)
            cost = float(m.cost) if m.ok else None
            # an arm is judged by its bets only: the probes and its model's picks, not the points it
            # measured before its model or as random exploration (they would charge the cold arm for
            # its design points while the warm arm's probes earn, and starve it from the first batch).
            # Its evidence fades with its own results only: an arm left idle keeps its record.
            if bet and m.candidate.key in self.first_probes:
                self.unjudged.append(cost)  # judged against the design points, once they are in
            elif bet:
                # a later probe pays only near the top: a source's next-best configurations that are merely
                # good beat most of the target's results and would keep the arm going where it wastes slots
                self._judge([arm], self._reward(cost, int(self.config["probe_top"]) if arm == "probe" else None))
            if cost is not None:
                bisect.insort(self.costs, cost)
        for arm in self.arms.values():
            arm.tell(results)
        if self.unjudged and self._designed():
            # the first probes bet on the sources' ranking as much as on the pooled model: both arms'
            for cost in self.unjudged:
                if cost is not None:
                    self.costs.remove(cost)  # against the other results, not itself
                self._judge(["warm", "probe"], self._reward(cost))
                if cost is not None:
                    bisect.insort(self.costs, cost)
            self.unjudged = []

    # -- state -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {**super().state_dict(), "queue": [c.payload for c in self.queue], "more": [c.payload for c in self.more],
                "owner": dict(self.owner), "bets": sorted(self.bets), "credit": dict(self.credit), "misses": dict(self.misses),
                "unjudged": list(self.unjudged), "floor_carry": self.floor_carry, "arms": {a: arm.state_dict() for a, arm in self.arms.items()},
                "first_probes": len(self.first_probes), "probes": [c.payload for c in self.probes]}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.queue = [Candidate(p) for p in state.get("queue", [])]
        self.more = [Candidate(p) for p in state.get("more", [])]
        self.owner = {k: str(v) for k, v in state.get("owner", {}).items()}
        self.seen.update(self.owner)
        self.bets = set(state.get("bets", []))
        self.unjudged = list(state.get("unjudged", []))
        self.floor_carry = float(state.get("floor_carry", 0.0))
        if "probes" in state:  # as chosen when the campaign started: the sources' weights, which order them, are
            # their similarity to the target, and a resume computes it again with the target's results since
            self.probes = [Candidate(p) for p in state["probes"]]
            self.first_probes = {c.key for c in self.probes[:int(state.get("first_probes", 0))]}
            if "warm" in self.arms:
                self.arms["warm"].cost_model.exclude = self._rows(self.probes)
        self.credit.update({a: float(v) for a, v in state.get("credit", {}).items()})
        self.misses.update({a: float(v) for a, v in state.get("misses", {}).items()})
        for a, s in state.get("arms", {}).items():
            if a in self.arms:
                self.arms[a].load_state_dict(s)
