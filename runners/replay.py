"""ReplayRunner: answers measurements from a recorded Kernel Tuner cache.

Each measurement charges the recorded compile + benchmark time to a simulated
clock, so search can be studied (and time-to-solution reported) without a GPU.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from autotune.runners.base import Runner
from autotune.search_spaces.replay import KT_FAILURES, KTCache
from autotune.types import Candidate, Device, Measurement, Status, Task

MS = 1e-3
#: the time, in ms, Kernel Tuner gives a configuration that failed; caches of some of its versions hold it in place
#: of the failure's name
KT_ERROR_TIME_MS = 1e20
#: the status of each failure name of a cache (a name not here, or no name: RUNTIME_ERROR)
_FAILURE_STATUS = {name: status for status, name in KT_FAILURES.items()}


def replay_device(cache: KTCache) -> Device:
    """The recorded GPU, with its known properties (autotune.gpus) where the name is known."""
    from autotune.gpus import gpu_properties

    return Device(cache.device_name, "cuda", {"source": "kernel_tuner_cache", **gpu_properties(cache.device_name)})


def record_measurement(cache: KTCache, candidate: Candidate, rec: dict | None) -> Measurement:
    """The Measurement a cache record stands for (INVALID when there is no record)."""
    if rec is None:
        return Measurement(candidate, Status.INVALID, error="configuration not in the recorded space")
    sim = (float(rec.get("compile_time") or 0) + float(rec.get("benchmark_time") or 0)) * MS
    build = float(rec.get("compile_time") or 0) * MS
    run = float(rec.get("benchmark_time") or 0) * MS
    t = rec.get("time")
    if isinstance(t, str):
        status = _FAILURE_STATUS.get(t, Status.COMPILE_ERROR if "Compil" in t else Status.RUNTIME_ERROR)
        return Measurement(candidate, status, error=t or "RuntimeFailedConfig", build_s=build, run_s=run,
                           simulated_s=sim, meta={"source": "replay"})
    if math.isfinite(float(t)) and float(t) >= KT_ERROR_TIME_MS:
        return Measurement(candidate, Status.RUNTIME_ERROR, error=f"recorded time {t:g} ms: Kernel Tuner's value for a "
                           "failed configuration", build_s=build, run_s=run, simulated_s=sim, meta={"source": "replay"})
    times = [float(x) * MS for x in (rec.get("times") or [t])]
    if not times or not all(math.isfinite(x) for x in times):
        return Measurement(candidate, Status.RUNTIME_ERROR, error="recorded time is not finite",
                           build_s=build, run_s=run, simulated_s=sim)
    return Measurement(candidate, Status.OK, times=times, build_s=build, run_s=run, simulated_s=sim,
                       meta={"source": "replay", "recorded_mean_s": float(t) * MS})


class ReplayRunner(Runner):
    """``delay_s``: wall seconds each measurement takes (load tests of the engine and of scale-out,
    where the measurement, not the engine, must be the bottleneck); 0 answers at once."""

    def __init__(self, cache: KTCache | str | Path, delay_s: float = 0.0):
        self.cache = cache if isinstance(cache, KTCache) else KTCache.load(cache)
        self.device = replay_device(self.cache)
        self.clock = 0.0  # simulated seconds charged so far
        self.delay_s = float(delay_s)

    def measure(self, task: Task, candidates: list[Candidate]) -> list[Measurement]:
        names = self.cache.param_names
        out = []
        for c in candidates:
            p = c.payload if isinstance(c.payload, dict) else {}
            rec = self.cache.records.get(tuple(p.get(n) for n in names))
            m = record_measurement(self.cache, c, rec)
            if self.delay_s > 0:
                time.sleep(self.delay_s)
            self.clock += m.simulated_s
            out.append(m)
        return out
