"""Peers for scripts/bench_search.py: Optuna's TPE used directly, and Kernel Tuner's strategies
in its simulation mode. Both are scored with the bench's counting rule (a Tracker)."""

from __future__ import annotations

import gzip
import json
import logging
import math
import os
import shutil
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
    """Kernel Tuner reads plain JSON caches: a decompressed copy in a temporary folder."""
    if path not in _plain:
        folder = tempfile.mkdtemp(prefix="bench_kt_")
        out = os.path.join(folder, "cache.json")
        with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
        _plain[path] = out
    return _plain[path]


def run_kt(strategy: str, cache, space, seed: int, budget: int, Tracker):
    """Kernel Tuner's ``strategy`` in simulation mode on the cache; the order of its evaluations
    is scored with the counting rule."""
    import random as _random

    import kernel_tuner
    from kernel_tuner.util import StopCriterionReached

    path = _plain_cache(cache.path)
    with open(path) as f:
        doc = json.load(f)
    keys = set(cache.records)
    names = cache.param_names
    tracker = Tracker(space, budget)
    from autotune.runners.replay import record_measurement

    def restrict(p):
        return tuple(p[n] for n in names) in keys

    t = time.perf_counter()
    restart = 0
    # a strategy that stops before the budget (its own convergence) is restarted with a new seed;
    # repeats cost nothing under the counting rule, so the restarts just continue the count
    while not tracker.done and restart < 50:
        run_seed = seed + 1000 * restart
        np.random.seed(run_seed)
        _random.seed(run_seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.disable(logging.WARNING)
            try:
                results = []
                results, _ = kernel_tuner.tune_kernel(
                    doc.get("kernel_name", "kernel"), "__global__ void k() {}", doc.get("problem_size") or [1],
                    [], {n: cache.param_values[n] for n in names}, restrictions=[restrict],
                    strategy=strategy, strategy_options={"max_fevals": max(20, budget - len(tracker.trace))},
                    cache=path,
                    simulation_mode=True, quiet=True, verbose=False, seed=run_seed,
                )
            except StopCriterionReached:  # raised by some strategies' first evaluation of a restart
                break
            finally:
                logging.disable(logging.NOTSET)
        before = len(tracker.trace)
        for r in results:
            values = tuple(r[n] for n in names)
            c = space._make(dict(zip(names, values)))
            m = record_measurement(cache, c, cache.records.get(values))
            tracker.record(c.key, values in keys, m.objective, m.simulated_s)
        restart += 1
        if len(tracker.trace) == before:
            break
    wall = time.perf_counter() - t
    return tracker, wall / max(1, len(tracker.trace))
