"""MCMC / simulated annealing over ``Space.neighbor`` moves (FlexFlow-style Metropolis-Hastings).

A chain holds a current point. ``ask(n)`` proposes ``n`` unseen neighbours of it (short random
walks when the direct neighbourhood is explored); ``tell`` applies the Metropolis rule to each
result in order: a better point is always accepted, a worse one with probability
``exp(-(cost/current - 1) / T)``. Acceptance uses the *relative* cost difference, so the search
behaves the same whether costs are microseconds or seconds; the two costs are read through
``positive_costs``, so a cost of 0 counts as half the other one (the best, at a finite ratio). The
temperature ``T`` is multiplied by ``cooling`` after every result down to ``t_min``; after
``restart_after`` results without a new best the chain restarts from the best point with the
initial temperature. The chain starts from ``space.initial()`` when the space has one. Failures
have infinite cost and are never accepted. Uses only the Space interface (sample, neighbor,
initial, contains, size).
"""

from __future__ import annotations

import math

from autotune.algorithms.base import Option, SearchAlgorithm
from autotune.algorithms.support import (
    cand_from_json,
    cand_to_json,
    exhausted,
    finite,
    fresh_sample,
    fresh_walk,
    start_point,
    unfinite,
)
from autotune.cost_models.features import positive_costs
from autotune.types import Candidate, Measurement


class MCMC(SearchAlgorithm):
    name = "mcmc"
    description = "Metropolis-Hastings / simulated annealing over neighbor moves, restarts from the best"
    no_repeats = True
    needs = ("sample", "neighbor")
    options = {
        "t0": Option(0.1, "initial temperature, in relative cost (0.1: a 10% worse point is accepted with p=1/e)"),
        "cooling": Option(0.97, "temperature multiplier after each result", high=1),
        "t_min": Option(0.002, "lowest temperature"),
        "restart_after": Option(60, "results without a new best before restarting from the best point"),
    }

    def setup(self) -> None:
        self.seen: set[str] = set()
        self.pending: list[str] = []
        self.current: Candidate | None = None
        self.current_cost = math.inf
        self.best: Candidate | None = None
        self.best_cost = math.inf
        self.temperature = float(self.config["t0"])
        self.stale = 0
        self.restarts = 0

    # -- proposals -------------------------------------------------------------------
    def _start(self) -> Candidate | None:
        return start_point(self.space, self.rng, self.seen)

    def ask(self, n: int) -> list[Candidate]:
        out: list[Candidate] = []
        while len(out) < n and not exhausted(self.space, self.seen):
            c = None
            if self.current is None and not out:
                c = self._start()
            else:
                base = self.current if self.current is not None else out[0]
                c = fresh_walk(self.space, base, self.rng, self.seen)
                if c is None:
                    c = fresh_sample(self.space, self.rng, self.seen)
            if c is None:
                break
            self.seen.add(c.key)
            self.pending.append(c.key)
            out.append(c)
        return out

    # -- feedback --------------------------------------------------------------------
    def tell(self, results: list[Measurement]) -> None:
        pending = set(self.pending)
        for m in results:
            key = m.candidate.key
            self.seen.add(key)
            pending.discard(key)
            cost = m.objective
            if cost < self.best_cost:
                self.best, self.best_cost, self.stale = m.candidate, cost, 0
            else:
                self.stale += 1
            if self.current is None or not math.isfinite(self.current_cost):
                if self.current is None or math.isfinite(cost):
                    self.current, self.current_cost = m.candidate, cost
            elif math.isfinite(cost):
                ratio, current = positive_costs([cost, self.current_cost])  # a cost of 0 is finitely best
                delta = ratio / current - 1.0
                if delta <= 0 or self.rng.random() < math.exp(-delta / max(self.temperature, 1e-12)):
                    self.current, self.current_cost = m.candidate, cost
            self.temperature = max(self.temperature * float(self.config["cooling"]), float(self.config["t_min"]))
            if self.stale >= int(self.config["restart_after"]) and self.best is not None:
                self.current, self.current_cost = self.best, self.best_cost
                self.temperature = float(self.config["t0"])
                self.stale = 0
                self.restarts += 1
        self.pending = [k for k in self.pending if k in pending]

    # -- state -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            **super().state_dict(),
            "pending": list(self.pending),
            "current": cand_to_json(self.current), "current_cost": finite(self.current_cost),
            "best": cand_to_json(self.best), "best_cost": finite(self.best_cost),
            "temperature": self.temperature, "stale": self.stale, "restarts": self.restarts,
        }

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.pending = list(state.get("pending", []))
        self.seen.update(self.pending)
        self.current = cand_from_json(state.get("current"))
        self.current_cost = unfinite(state.get("current_cost"))
        self.best = cand_from_json(state.get("best"))
        self.best_cost = unfinite(state.get("best_cost"))
        self.temperature = float(state.get("temperature", self.temperature))
        self.stale = int(state.get("stale", 0))
        self.restarts = int(state.get("restarts", 0))
