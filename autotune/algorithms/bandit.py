"""An ensemble sharing the budget among sub-algorithms by their recent success (OpenTuner's AUC
bandit meta-technique).

Each sub-algorithm ("arm") is bound to the same space with its own rng and is told *every*
result, so all arms learn from all measurements. Each slot of a batch goes to the arm with the
highest score ``AUC(credits in the window) + c * sqrt(2 ln(uses in window) / arm uses in window)``
(an arm not used in the window goes first), where a proposal earns credit 1 when its result
improves the best cost found so far, and AUC weights recent credits more (OpenTuner's
``AUCBanditMetaTechnique``). A proposal another arm already made is asked again (a few tries),
an arm with nothing left is skipped. The window of (arm, credit) pairs, the total credit of
each arm, the owner of each pending proposal, and every arm's own state are in ``state_dict``.

Arms named in ``algorithms`` must all fit the space (binding refuses one that does not). Left at
its default, ``algorithms`` is those of the default arms that can search the space (on a graph or
parallelization space, whose points are not knob values, evolutionary, mcmc and random without
optuna-tpe); the option is then set to them when the bandit is checked against the space, so
the options a campaign stores, the arms its state names and the arms that run are the same.
"""

from __future__ import annotations

import math

import numpy as np

from autotune.algorithms.base import Option, SearchAlgorithm, offered_moves, union_moves
from autotune.errors import UsageError
from autotune.search_spaces.base import Space
from autotune.types import Candidate, Measurement

DEFAULT_ARMS = "evolutionary,mcmc,optuna-tpe,random"


class AUCBandit(SearchAlgorithm):
    name = "bandit"
    description = "OpenTuner's AUC bandit over sub-algorithms, credit = new bests"
    no_repeats = True
    #: its own; ``required_moves`` adds those of its arms
    needs = ("sample",)
    options = {
        "algorithms": Option(DEFAULT_ARMS, "comma-separated sub-algorithms (registered names); by default those of "
                                           "evolutionary, mcmc, optuna-tpe and random that can search the space"),
        "window": Option(50, "recent proposals the credit is computed on", low=1),
        "c": Option(0.05, "exploration constant"),
    }

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.default_arms = "algorithms" not in kwargs  # the arms are then those of the defaults that fit the space

    def _arm_names(self) -> list[str]:
        listed = DEFAULT_ARMS if self.default_arms else str(self.config["algorithms"])
        names = [n.strip() for n in listed.split(",") if n.strip()]
        if not names or "bandit" in names or len(set(names)) != len(names):
            raise UsageError("bandit needs a comma-separated list of distinct other algorithms, e.g. 'evolutionary,mcmc,random'")
        return names

    def arms_for(self, space: Space | None = None) -> list[str]:
        """The arms this bandit runs on ``space``: those named in ``algorithms``; left at the default, those of
        the default arms whose moves ``space`` offers (all of them when none does, or without a space)."""
        from autotune.algorithms.registry import make_algorithm

        names = self._arm_names()
        if space is None or not self.default_arms:
            return names
        offered = set(offered_moves(space))
        fit = [n for n in names if set(make_algorithm(n).required_moves(space)) <= offered]
        return fit or names

    def required_moves(self, space: Space | None = None) -> tuple[str, ...]:
        from autotune.algorithms.registry import make_algorithm

        return union_moves(self.needs, *(make_algorithm(n).required_moves(space) for n in self.arms_for(space)))

    def guidance_refusal(self) -> str | None:
        from autotune.algorithms.registry import make_algorithm

        for n in self._arm_names():
            reason = make_algorithm(n).guidance_refusal()
            if reason:
                return f"its arm {n!r} cannot be: {reason}"
        return None

    def check_space(self, space: Space) -> None:
        """As every algorithm's, each arm's too (an Optuna arm's package), and the ``algorithms`` option is
        set to the arms it runs on ``space``."""
        from autotune.algorithms.registry import make_algorithm

        super().check_space(space)
        arms = self.arms_for(space)
        for n in arms:
            make_algorithm(n).check_space(space)
        self.config["algorithms"] = ",".join(arms)

    def setup(self) -> None:
        from autotune.algorithms.registry import make_algorithm

        names = self.arms_for(self.space)
        self.arm_names = names
        self.arms = [make_algorithm(n).bind(self.space, np.random.default_rng(int(self.rng.integers(2**63))), [])
                     for n in names]
        self.window: list[list] = []  # [arm index, credit]
        self.credit = [0] * len(names)
        self.owner: dict[str, int] = {}
        self.seen: set[str] = set()
        self.best = math.inf
        self.dead: set[int] = set()

    def _score(self, i: int) -> float:
        hits = [c for a, c in self.window if a == i]
        if not hits:
            return math.inf
        n = len(hits)
        auc = sum(c * (k + 1) for k, c in enumerate(hits)) / (n * (n + 1) / 2)
        return auc + float(self.config["c"]) * math.sqrt(2 * math.log(len(self.window)) / n)

    def _order(self) -> list[int]:
        live = [i for i in range(len(self.arms)) if i not in self.dead]
        return sorted(live, key=lambda i: (-self._score(i), i))

    def ask(self, n: int) -> list[Candidate]:
        out: list[Candidate] = []
        used: list[int] = []
        while len(out) < n:
            got = None
            for i in self._order():
                for _ in range(4):
                    batch = self.arms[i].ask(1)
                    if not batch:
                        self.dead.add(i)
                        break
                    if batch[0].key not in self.seen:
                        got = (i, batch[0])
                        break
                if got:
                    break
            if got is None:
                break
            i, c = got
            self.seen.add(c.key)
            self.owner[c.key] = i
            out.append(c)
            # a pending proposal counts as a use, so the next slot may go to another arm
            self.window.append([i, 0])
            used.append(i)
        self.window = self.window[-int(self.config["window"]):]
        return out

    def tell(self, results: list[Measurement]) -> None:
        for m in results:
            key = m.candidate.key
            self.seen.add(key)
            improved = m.objective < self.best
            self.best = min(self.best, m.objective)
            i = self.owner.pop(key, None)
            if i is not None and improved:
                self.credit[i] += 1
                for entry in reversed(self.window):  # credit the arm's latest pending use
                    if entry[0] == i and entry[1] == 0:
                        entry[1] = 1
                        break
        for arm in self.arms:
            arm.tell(results)

    def credits(self) -> dict[str, int]:
        return dict(zip(self.arm_names, self.credit))

    def state_dict(self) -> dict:
        return {**super().state_dict(), "window": self.window, "credit": self.credits(), "owner": self.owner,
                "dead": sorted(self.dead), "arms": {n: a.state_dict() for n, a in zip(self.arm_names, self.arms)}}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.window = [list(e) for e in state.get("window", [])]
        self.credit = [int(state.get("credit", {}).get(n, 0)) for n in self.arm_names]
        self.owner = {k: int(v) for k, v in state.get("owner", {}).items()}
        self.seen.update(self.owner)
        self.dead = set(state.get("dead", []))
        for n, arm in zip(self.arm_names, self.arms):
            if n in state.get("arms", {}):
                arm.load_state_dict(state["arms"][n])
