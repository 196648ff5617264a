"""WarmStart: a search warm-started from other devices' measurements of the same task.

1. The sources' best configurations (``top_k`` of them, round-robin over the sources'
   rankings, heaviest source first, those that are points of the target space) are measured first;
2. then ``init`` random points, and a :class:`~autotune.algorithms.model_guided.ModelGuided`
   search whose model is one pooled XGBoost ranking model over the sources' rows and the
   target's (each device a ranking group, the target weighted as much as all sources), with
   the device properties as extra features (:class:`~autotune.cost_models.pooled.PooledModel`).

Pooling lets the target's own results outrank the sources' where the devices disagree, so the
search leaves a source's favourite region once the target shows it is off (a model boosted from
the sources' scores, or given them as a feature, stays there). Target measurements to 5% of the
optimum with scripts/bench_transfer.py (gemm on RTX 3090 / 2080 Ti / TITAN RTX, 5 seeds,
median): 3090->2080 Ti 22, 2080 Ti->3090 34, TITAN->3090 33, 3090->TITAN 20, against 95, 83,
83 and 25 cold.
Safety: after ``check_after`` target results, the sources-only ranking of the target's measured
points is compared with the measurements (Spearman); below ``min_rho`` the source data is left
out of the model (ordinary target-only model-guided search), so a poor source costs about the
``top_k`` probes. Without sources it is an ordinary model-guided search.

``sources`` is a list of :class:`SourceData` (a device's measurements, and a weight).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from autotune.algorithms.base import Option, SearchAlgorithm, union_moves
from autotune.algorithms.model_guided import ModelGuided
from autotune.cost_models.pooled import PROPS, PooledModel, device_vector, row_keys
from autotune.types import Candidate, Device, Measurement


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
    description = "source devices' best configurations first, then a model on all devices' data guides the search"
    no_repeats = True
    options = {
        "top_k": Option(8, "source best configurations measured first"),
        "min_rho": Option(0.2, "leave the sources out while their Spearman with the target's results is lower"),
        "check_after": Option(8, "target results needed before the sources are checked"),
        "epsilon": Option(0.1, "share of each model-guided batch given to random points"),
        "retrain_every": Option(4, "retrain the model after this many new results"),
        "init": Option(8, "random points measured after the top-k, before the model is used"),
    }

    def __init__(self, inner: SearchAlgorithm, sources: list[SourceData], target_device: Device | None = None,
                 **kwargs):
        super().__init__(**kwargs)
        self.target_device = target_device
        self.inner = inner
        self.sources = list(sources)
        self.name = f"warm-start+{inner.name}"
        self.guided: ModelGuided | None = None

    @property
    def on_retrain(self):
        return self.guided.on_retrain if self.guided is not None else None

    @on_retrain.setter
    def on_retrain(self, fn) -> None:
        self._on_retrain = fn
        if self.guided is not None:
            self.guided.on_retrain = fn

    @property
    def cost_model(self) -> PooledModel | None:
        return self.guided.cost_model if self.guided is not None else None

    @property
    def predicted(self) -> dict[str, float]:
        return self.guided.predicted if self.guided is not None else {}

    def required_moves(self) -> tuple[str, ...]:
        return union_moves(self.needs, self.inner.required_moves())

    def setup(self) -> None:
        space = self.space
        usable = [s for s in self.sources if s.measurements]
        rows = [(np.asarray(space.features([m.candidate for m in s.measurements]), dtype=float),
                 np.array([m.objective for m in s.measurements]), device_vector(s.device)) for s in usable]
        target = device_vector(self.target_device) if self.target_device else np.full(len(PROPS), np.nan)
        model = PooledModel(rows, target, seed=int(self.rng.integers(2**31)), min_rho=float(self.config["min_rho"]),
                            check_after=int(self.config["check_after"]))
        self.queue: list[Candidate] = self._top_configs(usable)
        if self.queue:
            model.exclude = set(row_keys(np.asarray(space.features(self.queue), dtype=float)))
        self.guided = ModelGuided(self.inner, model, init=max(1, len(self.queue) + int(self.config["init"])),
                                  epsilon=float(self.config["epsilon"]),
                                  retrain_every=int(self.config["retrain_every"]), holdout=0.0)
        self.guided.on_retrain = getattr(self, "_on_retrain", None)
        self.guided.bind(space, np.random.default_rng(int(self.rng.integers(2**63))))
        self.told = 0

    def _top_configs(self, sources: list[SourceData]) -> list[Candidate]:
        """Up to top_k distinct source-best configurations that are points of the space, round-robin
        over the sources' rankings, heaviest source first."""
        k = int(self.config["top_k"])
        if k <= 0:
            return []
        lists = [[m.candidate for m in s.ranked() if self.space.contains(m.candidate)][:k]
                 for s in sorted(sources, key=lambda s: -s.weight)]
        out: dict[str, Candidate] = {}
        for i in range(k):
            for lst in lists:
                if i < len(lst) and len(out) < k:
                    out.setdefault(lst[i].key, lst[i])
        return list(out.values())

    def ask(self, n: int) -> list[Candidate]:
        out: list[Candidate] = []
        while self.queue and len(out) < n:
            c = self.queue.pop(0)
            if c.key not in self.guided.seen:
                out.append(c)
                self.guided.seen.add(c.key)
        if len(out) < n and (self.told > 0 or not out):
            out.extend(self.guided.ask(n - len(out)))
        return out

    def tell(self, results: list[Measurement]) -> None:
        self.told += len(results)
        self.guided.tell(results)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "queue": [c.payload for c in self.queue], "told": self.told,
                "guided": self.guided.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.queue = [Candidate(p) for p in state.get("queue", [])]
        self.told = int(state.get("told", self.told))
        if state.get("guided") is not None:
            self.guided.load_state_dict(state["guided"])
