"""The timing protocol shared by the kernel runners: warm-up, then repeat until a minimum
measured time, keeping every repeat (the cost is their median); interleaved timing of several
callables, and the verdicts on two timings (faster, slower or within noise)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from autotune.types import median


@dataclass(frozen=True)
class Protocol:
    warmup: int = 1           # untimed calls first (caches, page faults, lazy loading)
    min_repeats: int = 3      # at least this many timed calls ...
    max_repeats: int = 100    # ... at most this many ...
    min_time_s: float = 0.1   # ... and repeat until their sum reaches this
    budget_s: float = 5.0     # stop repeating when the next repeat would pass this many seconds
    flush_l2: bool = False    # CUDA: overwrite the L2 cache between launches

    def to_json(self) -> dict:
        return {"statistic": "median", **asdict(self)}

def repeat(timed: Callable[[], float], protocol: Protocol) -> list[float]:
    """Warm up, then call ``timed`` (which runs the kernel once and returns its seconds) until the
    protocol is satisfied; every repeat in seconds.

    Stops once there are ``min_repeats`` repeats summing to ``min_time_s``, at ``max_repeats``,
    or when one more repeat would overrun ``budget_s`` (a slow kernel is timed fewer times)."""
    for _ in range(protocol.warmup):
        timed()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < max(1, protocol.max_repeats):
        dt = timed()
        times.append(dt)
        if len(times) >= protocol.min_repeats and sum(times) >= protocol.min_time_s:
            break
        if time.perf_counter() - start + dt > protocol.budget_s:
            break
    return times


def time_calls(call: Callable[[], object], protocol: Protocol) -> list[float]:
    """``repeat`` for a host function, timed with the wall clock (time.perf_counter)."""

    def timed() -> float:
        t0 = time.perf_counter()
        call()
        return time.perf_counter() - t0

    return repeat(timed, protocol)


def interleaved(timed: list[Callable[[], float]], rounds: int, warmup: int = 2) -> list[dict]:
    """Compare several callables (each runs once and returns its seconds): warm each up, then in every
    round run each once, alternating who goes first. Median, spread (IQR), minimum and every time per callable."""
    for t in timed:
        for _ in range(warmup):
            t()
    times: list[list[float]] = [[] for _ in timed]
    for r in range(rounds):
        order = list(enumerate(timed))
        for i, t in (order if r % 2 == 0 else order[::-1]):
            times[i].append(t())
    return [{**summary(ts), "times": ts} for ts in times]


def summary(times: list[float]) -> dict:
    """Median, spread (IQR) and minimum of a list of times, in seconds."""
    q1, q3 = np.percentile(times, [25, 75])
    return {"median_s": median(times), "iqr_s": float(q3 - q1), "min_s": min(times)}


def faster_beyond_noise(before: list[float], after: list[float], min_gain: float = 0.01, alpha: float = 0.05):
    """Paired one-sided sign test over interleaved rounds, plus a minimum median gain.

    Interleaving makes round i of both models see the same machine load, so the sign
    of each paired difference is robust to load drift on a shared machine."""
    n = len(before)
    wins = sum(a < b for a, b in zip(after, before))
    p = sum(math.comb(n, k) for k in range(wins, n + 1)) / 2 ** n
    gain = float(np.median(before)) / float(np.median(after)) - 1.0
    return bool(p < alpha and gain >= min_gain), p


def compare_blocks(before: list[float], after: list[float], min_gain: float = 0.01, alpha: float = 0.05) -> str:
    """"faster", "slower" or "within noise": per-block medians of ``after`` against ``before`` (each block its
    own sessions, :func:`~autotune.runners.onnx_ops.blocked_latency`): a two-sided one-sample t-test of the
    log ratios across blocks, and a mean gain of at least ``min_gain`` either way."""
    from scipy import stats

    r = np.log(np.asarray(before, dtype=float) / np.asarray(after, dtype=float))
    if len(r) < 2 or abs(float(r.mean())) < math.log1p(min_gain):
        return "within noise"
    if np.ptp(r) == 0:
        return "faster" if r[0] > 0 else "slower"
    p = stats.ttest_1samp(r, 0.0).pvalue
    return "within noise" if p >= alpha else "faster" if r.mean() > 0 else "slower"
