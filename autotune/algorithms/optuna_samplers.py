"""Optuna's samplers (TPE, CMA-ES, GP) through its ask-and-tell interface, on knob spaces.

Each knob is one Optuna parameter: the *index* of its value (an integer range, so ordered
knobs keep their order for CMA-ES and GP) when the values are numbers, a categorical otherwise.
Points that break the space's constraints, and points already measured, are answered inside
``ask`` (told as failed / with their known cost), so they cost no measurement; after
``50 * n`` such answers in one ``ask`` the rest of the batch is random samples.

Optuna's study state is not JSON, so ``state_dict`` keeps the sequence of asks and tells (and
the rng state before the study was created); ``load_state_dict`` replays them against the
results told since ``bind`` (the history a resumed campaign passes), which rebuilds the study
exactly (CMA-ES's optimiser and GP's caches included), so a resumed search continues the same
way. Needs a knob space (``knobs``: ``names`` and ``values``, checked when it is bound); CMA-ES
needs the ``cmaes`` package and GP needs ``torch``. The GP sampler is not a model-guided search's
inner search (``unguided``): its Gaussian process is a cost model of its own.
"""

from __future__ import annotations

import importlib.util
import math
from typing import ClassVar

from autotune.algorithms.base import Option, SearchAlgorithm
from autotune.algorithms.support import exhausted, fresh_sample
from autotune.errors import MissingDependencyError
from autotune.types import Candidate, Measurement


class _OptunaBase(SearchAlgorithm):
    no_repeats = True
    needs = ("sample", "knobs")
    requires: ClassVar[tuple[str, ...]] = ()
    options = {"n_startup_trials": Option(10, "random trials before the sampler's model is used")}

    def _sampler(self, seed: int):  # pragma: no cover - overridden
        raise NotImplementedError

    def check_space(self, space) -> None:
        """As every algorithm's, and a package the sampler needs must be installed (checked with the space, so
        a campaign refuses before it stores anything)."""
        super().check_space(space)
        for module in self.requires:
            if importlib.util.find_spec(module) is None:
                raise MissingDependencyError(f"algorithm {self.name!r} needs the package {module!r}; pip install {module}")

    def setup(self) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.rng0 = self.rng.bit_generator.state
        self.ops: list = []
        self.seen: set[str] = set()
        self.measured: dict[str, float] = {}
        self.open: dict[str, int] = {}  # candidate key -> trial number waiting for its result
        self.pending: list[str] = []
        self._results: dict[str, Measurement] = {}  # every result told, to replay the study on resume
        self._new_study()

    def _new_study(self) -> None:
        import optuna
        from optuna.distributions import CategoricalDistribution, IntDistribution

        self.dists = {}
        self.numeric = []
        for name, vals in zip(self.space.names, self.space.values):
            numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)
            self.numeric.append(numeric)
            self.dists[name] = IntDistribution(0, len(vals) - 1) if numeric else CategoricalDistribution(vals)
        seed = int(self.rng.integers(2**31))
        self.study = optuna.create_study(direction="minimize", sampler=self._sampler(seed))

    def _decode(self, params: dict) -> Candidate:
        cfg = {n: (vals[params[n]] if num else params[n])
               for n, vals, num in zip(self.space.names, self.space.values, self.numeric)}
        return Candidate(cfg)

    def _encode(self, payload: dict) -> dict | None:
        try:
            return {n: (vals.index(payload[n]) if num else payload[n])
                    for n, vals, num in zip(self.space.names, self.space.values, self.numeric)}
        except (KeyError, ValueError, TypeError):
            return None

    # -- ask / tell ------------------------------------------------------------------
    def _ask(self, n: int) -> list[Candidate]:
        from optuna.trial import TrialState

        out: list[Candidate] = []
        answered = 0
        while len(out) < n and answered < 50 * n and not exhausted(self.space, self.seen):
            trial = self.study.ask(self.dists)
            c = self._decode(trial.params)
            if c.key in self.measured and math.isfinite(self.measured[c.key]):
                self.study.tell(trial, self.measured[c.key])
            elif c.key in self.seen or not self.space.contains(c):
                self.study.tell(trial, state=TrialState.FAIL)
            else:
                self.open[c.key] = trial.number
                self.seen.add(c.key)
                out.append(c)
                continue
            answered += 1
        while len(out) < n and not exhausted(self.space, self.seen):
            c = fresh_sample(self.space, self.rng, self.seen)
            if c is None:
                break
            self.seen.add(c.key)
            out.append(c)
        return out

    def _tell(self, results: list[Measurement]) -> None:
        import optuna
        from optuna.trial import TrialState

        for m in results:
            key = m.candidate.key
            if key in self.measured:
                continue
            self.measured[key] = m.objective
            self.seen.add(key)
            value = m.objective
            state = TrialState.COMPLETE if math.isfinite(value) else TrialState.FAIL
            if key in self.open:
                number = self.open.pop(key)
                self.study.tell(number, value if state is TrialState.COMPLETE else None, state=state)
            else:
                params = self._encode(m.candidate.payload) if isinstance(m.candidate.payload, dict) else None
                if params is None:
                    continue
                self.study.add_trial(optuna.trial.create_trial(
                    params=params, distributions=self.dists, state=state,
                    value=value if state is TrialState.COMPLETE else None))

    def ask(self, n: int) -> list[Candidate]:
        out = self._ask(n)
        self.ops.append(["ask", n])
        self.pending.extend(c.key for c in out)
        return out

    def tell(self, results: list[Measurement]) -> None:
        for m in results:
            self._results.setdefault(m.candidate.key, m)
        self._tell(results)
        self.ops.append(["tell", [m.candidate.key for m in results]])
        done = {m.candidate.key for m in results}
        self.pending = [k for k in self.pending if k not in done]

    # -- state -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {**super().state_dict(), "rng0": self.rng0, "ops": self.ops, "pending": list(self.pending)}

    def load_state_dict(self, state: dict) -> None:
        """Replay the recorded asks and tells against the results told so far (the resumed history)."""
        if "ops" not in state:
            return super().load_state_dict(state)
        known = dict(self._results)
        self.rng.bit_generator.state = state["rng0"]
        self.rng0 = state["rng0"]
        self.seen, self.measured, self.open = set(), {}, {}
        self._new_study()
        for op, arg in state["ops"]:
            if op == "ask":
                self._ask(int(arg))
            else:
                self._tell([known[k] for k in arg if k in known])
        self.ops = [list(o) for o in state["ops"]]
        told = [m for k, m in known.items() if k not in self.measured]
        if told:  # history entries the recorded tells did not cover
            self._tell(told)
        self.pending = list(state.get("pending", []))
        self.seen.update(self.pending)
        super().load_state_dict(state)



class OptunaTPE(_OptunaBase):
    name = "optuna-tpe"
    description = "Optuna's Tree-structured Parzen Estimator (ask-and-tell)"

    def _sampler(self, seed: int):
        import optuna

        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=int(self.config["n_startup_trials"]))


class OptunaCmaEs(_OptunaBase):
    name = "optuna-cmaes"
    description = "Optuna's CMA-ES on knob indices (ask-and-tell; needs the cmaes package)"
    requires = ("cmaes",)

    def _sampler(self, seed: int):
        import optuna

        return optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=int(self.config["n_startup_trials"]),
                                            warn_independent_sampling=False)


class OptunaGP(_OptunaBase):
    name = "optuna-gp"
    description = "Optuna's Gaussian-process sampler (ask-and-tell; needs torch)"
    requires = ("torch",)
    unguided = ("its Gaussian process is a cost model of its own, left nothing to search on a space the model "
                "scores whole (at most score_all points) and refitted for each of the model's pool evaluations per "
                "batch on a larger one (over 10 minutes a batch)")

    def _sampler(self, seed: int):
        import optuna

        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=int(self.config["n_startup_trials"]))
