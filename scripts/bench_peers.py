"""Peers for scripts/bench_search.py: Optuna's TPE used directly, and Kernel Tuner's strategies
in its simulation mode. Both are scored with the bench's counting rule (a Tracker)."""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import math
import os
import sys
import tempfile
import time
import warnings

import numpy as np


def run_optuna_direct(space, runner, seed: int, budget: int, Tracker):
    """Optuna TPE on the knobs as categorical parameters, as a user would write it: points outside
    the recorded space are told as failed (free), repeats are answered from a dict (free)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    tracker = Tracker(space, budget)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
    answered: dict[str, float] = {}
    engine, trials = 0.0, 0
    while not tracker.done and trials < 20 * budget:
        t = time.perf_counter()
        trial = study.ask()
        config = {n: trial.suggest_categorical(n, v) for n, v in zip(space.names, space.values)}
        engine += time.perf_counter() - t
        trials += 1
        c = space._make(config)
        if not space.contains(c):
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        if c.key not in answered:
            m = runner.measure(space.task, [c])[0]
            answered[c.key] = m.objective
            tracker.record(c.key, True, m.objective, m.simulated_s)
        value = answered[c.key]
        t = time.perf_counter()
        if math.isfinite(value):
            study.tell(trial, value)
        else:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        engine += time.perf_counter() - t
    return tracker, engine / max(1, len(tracker.trace))


def kt_available() -> bool:
    try:
        import kernel_tuner  # noqa: F401
    except ImportError:
        return False
    return True


_plain: dict[str, str] = {}


def _plain_cache(path: str) -> str:
    """Kernel Tuner reads plain JSON caches: a decompressed copy in a temporary folder; a T4 results file is
    written as the Kernel Tuner cache it stands for (``t4_as_cache``), each record with the timing fields
    Kernel Tuner's simulation reads (0 where the file has none)."""
    if path not in _plain:
        from pathlib import Path

        from autotune.search_spaces.replay import t4_as_cache

        folder = tempfile.mkdtemp(prefix="bench_kt_")
        out = os.path.join(folder, "cache.json")
        with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as src:
            raw = src.read()
        doc = json.loads(raw)
        if isinstance(doc, dict) and isinstance(doc.get("results"), list) and "cache" not in doc:
            doc = t4_as_cache(doc, Path(path), f"cache file {path!r}")
            doc["problem_size"] = [1]  # T4 names none; run_kt_once asks Kernel Tuner for this one
            for rec in doc["cache"].values():
                for field in ("compile_time", "benchmark_time", "verification_time", "strategy_time",
                              "framework_time"):
                    rec.setdefault(field, 0.0)
                rec.setdefault("times", [rec["time"]] if not isinstance(rec["time"], str) else [])
            raw = json.dumps(doc).encode()
        with open(out, "wb") as dst:
            dst.write(raw)
        _plain[path] = out
    return _plain[path]


# Kernel Tuner's result order (read in kernel_tuner 1.5.0's source, and in an older CostFunc that
# ran one configuration per call): tune_kernel returns what the strategy returns. The CostFunc
# strategies return ``cost_func.results``, appended in the order the strategy asked (a batch in its
# list order), every answered evaluation including repeats (a repeat is served from the cache with
# zero timings); configurations that fail the restrictions never reach the runner and are left out;
# those past the budget come back from the runner as None and are dropped. brute_force returns the
# runner's own list, None entries included. So the results are in evaluation order, but nothing in
# Kernel Tuner's documentation promises it (its docstrings say "a list of dictionaries for executed
# kernel configurations"): the bench records the order itself, every configuration the simulation
# runner answers, in the order it answers them, and scores that list (tests/benchmarks/test_protocol.py
# checks it against the order the strategy's cost function saw).


@contextlib.contextmanager
def seeded_latin_hypercube():
    """Kernel Tuner 1.5 draws differential evolution's first population (``SearchSpace.get_LHS_sample``) with
    scipy's LatinHypercube built without a seed, so that strategy's runs differed from one call to the next
    whatever the seed given: its median to 5% over 10 seeds ranged from 30 to 88.5 between reruns on one
    space. While the block runs, a LatinHypercube built without one takes its seed from numpy's global
    generator, which the bench seeds per run."""
    from scipy.stats import qmc

    original = qmc.LatinHypercube

    def seeded(*args, **kwargs):
        if kwargs.get("seed") is None and kwargs.get("rng") is None:
            kwargs["seed"] = int(np.random.randint(2**31))
        return original(*args, **kwargs)

    qmc.LatinHypercube = seeded
    try:
        yield
    finally:
        qmc.LatinHypercube = original


#: answered evaluations, repeats included, per distinct one asked for (max_fevals) after which one Kernel Tuner
#: run is ended: max_fevals counts distinct configurations, so a strategy that only repeats ones it evaluated
#: (greedy_ils on the sampled 2048x256x4096 gemm, seed 2: every neighbour it tries evaluated) never reaches it and
#: would run, and grow its recorded order, without end (its other seeds there answer 4 to 5 per distinct one)
REPEAT_CAP = 50


@contextlib.contextmanager
def recorded_evaluations(cap: int | None = None):
    """A list that receives every configuration (a tuple of values in parameter order) Kernel
    Tuner's simulation runner answers while the block runs, in evaluation order; once it holds
    ``cap`` or more, the runner ends the run (Kernel Tuner's own StopCriterionReached)."""
    from kernel_tuner.runners.simulation import SimulationRunner
    from kernel_tuner.util import StopCriterionReached

    seen: list[tuple] = []
    original = SimulationRunner.run

    def run(self, parameter_space, tuning_options):
        if cap is not None and len(seen) >= cap:
            raise StopCriterionReached(f"{len(seen)} evaluations answered")
        configs = [tuple(c) for c in parameter_space]
        results = original(self, configs, tuning_options)
        seen.extend(c for c, r in zip(configs, results) if r is not None)
        return results

    SimulationRunner.run = run
    try:
        yield seen
    finally:
        SimulationRunner.run = original


def kt_evaluations(strategy: str, cache, seed: int, max_fevals: int, cap: int | None = None) -> tuple[list[tuple], bool]:
    """The configurations Kernel Tuner's ``strategy`` evaluates in simulation mode on ``cache``, in
    order (repeats and points outside the space included), and whether it stopped on its budget
    check before its first evaluation (StopCriterionReached out of tune_kernel). A run is ended after
    ``cap`` answered evaluations (default REPEAT_CAP per distinct one asked for); what it evaluated counts,
    and run_kt restarts it as it does a strategy that converged."""
    import random as _random

    import kernel_tuner
    from kernel_tuner.util import StopCriterionReached

    path = _plain_cache(cache.path)
    with open(path) as f:
        doc = json.load(f)
    keys = set(cache.records)
    names = cache.param_names

    def restrict(p):
        return tuple(p[n] for n in names) in keys

    np.random.seed(seed)
    _random.seed(seed)
    stopped = False
    cap = REPEAT_CAP * max_fevals if cap is None else cap
    with warnings.catch_warnings(), seeded_latin_hypercube(), recorded_evaluations(cap) as seen:
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            kernel_tuner.tune_kernel(
                doc.get("kernel_name", "kernel"), "__global__ void k() {}", doc.get("problem_size") or [1],
                [], {n: cache.param_values[n] for n in names}, restrictions=[restrict],
                strategy=strategy, strategy_options={"max_fevals": max_fevals}, cache=path,
                simulation_mode=True, quiet=True, verbose=False, seed=seed,
            )
        except StopCriterionReached:  # raised by some strategies' first evaluation of a restart
            stopped = True
        except (TypeError, ValueError, IndexError) as exc:
            # a strategy's own failure on this space (greedy_ils: a configuration with no Hamming
            # neighbour among the recorded ones); what it evaluated counts, and run_kt restarts it
            print(f"kt:{strategy} seed {seed} stopped by its own error ({type(exc).__name__}: {exc}); "
                  f"restarting", file=sys.stderr)
        finally:
            logging.disable(logging.NOTSET)
    if len(seen) >= cap:  # ended by the cap, not by its budget check
        stopped = False
        print(f"kt:{strategy} seed {seed} ended after {len(seen)} evaluations, {len(set(seen))} distinct, of "
              f"{max_fevals} asked for; restarting", file=sys.stderr)
    return seen, stopped


def run_kt(strategy: str, cache, space, seed: int, budget: int, Tracker):
    """Kernel Tuner's ``strategy`` in simulation mode on the cache; the order of its evaluations
    (recorded as the simulation runner answers them) is scored with the counting rule."""
    from autotune.runners.replay import record_measurement

    canonical = {k: k for k in cache.records}  # the cache's own value tuples (plain Python types)
    tracker = Tracker(space, budget)
    t = time.perf_counter()
    restart = 0
    # a strategy that stops before the budget (its own convergence) is restarted with a new seed;
    # repeats cost nothing under the counting rule, so the restarts just continue the count
    while not tracker.done and restart < 50:
        seen, stopped = kt_evaluations(strategy, cache, seed + 1000 * restart, max(20, budget - len(tracker.trace)))
        before = len(tracker.trace)
        for values in seen:
            key = canonical.get(values)
            c = space._make(dict(zip(cache.param_names, key or values)))
            m = record_measurement(cache, c, cache.records.get(key) if key else None)
            tracker.record(c.key, key is not None, m.objective, m.simulated_s)
        restart += 1
        if stopped or len(tracker.trace) == before:
            break
    wall = time.perf_counter() - t
    return tracker, wall / max(1, len(tracker.trace))
