"""FunctionRunner: measure a configuration by calling the user's Python function on it.

``objective(config: dict)`` returns the cost to minimise (a finite number >= 0, seconds or any
cost) or a Measurement. In process, an exception is a RUNTIME_ERROR trial holding its type and
message; nothing escapes ``measure``. With ``isolate=True`` each call runs in a fresh process forked
from a small server (runners/workers.py), so a hang past ``timeout_s`` is a TIMEOUT and a crash
(segfault, ``os._exit``) a RUNTIME_ERROR. The objective then travels by pickle: it must be a
module-level function (or another picklable callable). The worker process gets this process's
``sys.path``; an objective defined in the main script is found by running that script again under
the name ``__mp_main__`` in the worker (as multiprocessing's spawn does), so the script must guard
its entry point with ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import functools
import math
import numbers
import os
import pickle
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import replace

from autotune.errors import UsageError
from autotune.runners.base import Runner, measure_each
from autotune.runners.workers import IsolatedWorker
from autotune.types import Candidate, Device, Measurement, Status, Task

NO_TIMEOUT_S = 30 * 86400.0  # "no limit" for an isolated call
_IN_WORKER = False  # set in the worker process that runs an isolated objective


def host_device(name: str) -> Device:
    """A Device for work run on this host's CPU: the CPU model, machine, cores and Python version."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return Device(name, "cpu", {
        "model": model or "unknown", "machine": platform.machine(), "cores": os.cpu_count() or 1,
        "system": platform.system(), "python": f"{platform.python_implementation()} {platform.python_version()}",
    })


def unpartial(fn: Callable) -> Callable:
    """The function a functools.partial (of a partial...) wraps; any other callable itself."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def function_name(fn: Callable) -> str:
    """``module.qualname`` of a callable (of the function a functools.partial wraps); a function of the main
    script is named after the script's file."""
    fn = unpartial(fn)
    module = getattr(fn, "__module__", None) or type(fn).__module__
    qual = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    if module == "__main__":
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        module = os.path.splitext(os.path.basename(main_file))[0] if main_file else "__main__"
    return f"{module}.{qual}"


def error_text(exc: BaseException, limit: int = 2000) -> str:
    """``Type: message``, then the last frames of the traceback, at most ``limit`` characters."""
    head = f"{type(exc).__name__}: {exc}"
    tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3))
    text = head if len(head) >= limit else head + "\n" + tail[-(limit - len(head) - 1):]
    return text[:limit]


def _scalar(value):
    """A one-number value as a Python number: a 0-d array or tensor (numpy, torch, jax) by ``item()``, a
    Decimal by ``float()``; anything else as it is."""
    try:
        if getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):
            return value.item()
        if isinstance(value, numbers.Number) and not isinstance(value, numbers.Complex):
            return float(value)
    except Exception:  # noqa: BLE001 - not one number after all (a signalling NaN): refused as it is
        pass
    return value


def to_measurement(candidate: Candidate, value, wall_s: float) -> Measurement:
    """The objective's return value as a Measurement: a number (or a 0-d array) is the cost; a Measurement
    is kept (for this candidate); anything else, or a cost that is not finite and >= 0, is a failed trial."""
    value = _scalar(value)
    if isinstance(value, Measurement):
        m = replace(value, candidate=candidate)
        if not m.run_s:
            m.run_s = wall_s
        why = _unfit(m)
        return m if why is None else Measurement(candidate, Status.RUNTIME_ERROR, error=why, run_s=m.run_s)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if _is_cost(value):
            return Measurement(candidate, Status.OK, times=[float(value)], cost=float(value), run_s=wall_s)
        why = f"the objective returned {_shown(value)}; a cost must be a finite number >= 0"
        if value < 0:
            why += " (to maximise a score, return e.g. 1 / score)"
    else:
        why = (f"the objective returned {_shown(value)} ({type(value).__name__}); it must return a number "
               "(the cost) or a Measurement")
    return Measurement(candidate, Status.RUNTIME_ERROR, error=why, run_s=wall_s)


def _is_cost(v) -> bool:
    """Whether ``v`` is a cost: a real number (not a bool) that is finite and >= 0 as a float."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return False
    try:
        f = float(v)
    except (OverflowError, TypeError, ValueError):  # 10**400, or a Real float() cannot take
        return False
    return math.isfinite(f) and f >= 0


def _shown(v) -> str:
    text = repr(v)
    return text if len(text) <= 100 else text[:97] + "..."


def _unfit(m: Measurement) -> str | None:
    """Why a Measurement the objective returned cannot be stored as it is (None: it can). A successful one
    needs a cost (given, or the median of its times) that is a finite number >= 0, and times that are too."""
    if not m.ok:
        return None if m.status is not Status.OK else "the objective returned a Measurement with status OK but no cost or times"
    bad = [t for t in [m.cost, *m.times] if not _is_cost(t)]
    if bad:
        return (f"the objective returned a Measurement with cost or times {_shown(bad[0])}; "
                "each must be a finite number >= 0")
    return None


def _load_main(path: str) -> None:
    """Make the parent's main script importable as ``__main__`` here (without running its guarded part)."""
    import runpy
    import types

    module = types.ModuleType("__mp_main__")
    module.__dict__.update(runpy.run_path(path, run_name="__mp_main__"))
    sys.modules["__main__"] = sys.modules["__mp_main__"] = module


def _call_isolated(path: list[str], main_path: str | None, blob: bytes, config: dict):
    """Runs in the worker process: the parent's import path, its main script if needed, then the call."""
    global _IN_WORKER
    _IN_WORKER = True
    sys.path[:] = list(path) + [p for p in sys.path if p not in path]
    if main_path:
        _load_main(main_path)
    fn = pickle.loads(blob)
    t0 = time.perf_counter()
    value = fn(config)
    return value, time.perf_counter() - t0


class FunctionRunner(Runner):
    """Call ``objective(config)`` for each candidate (``config`` is the candidate's knob dict)."""

    def __init__(self, objective: Callable, isolate: bool = False, timeout_s: float | None = None,
                 memory_limit: int | None = None, device_name: str = "python-function"):
        if not callable(objective):
            raise UsageError(f"the objective must be a callable taking a configuration dict, not "
                             f"{type(objective).__name__}")
        if timeout_s is not None and not (isinstance(timeout_s, (int, float)) and math.isfinite(timeout_s)
                                          and timeout_s > 0):
            raise UsageError(f"the timeout must be a positive number of seconds, not {timeout_s!r}")
        if timeout_s is not None and not isolate:
            raise UsageError("a timeout needs isolate=True: an objective running in this process cannot be stopped")
        if memory_limit is not None and not (isinstance(memory_limit, numbers.Integral)
                                             and not isinstance(memory_limit, bool) and memory_limit > 0):
            raise UsageError(f"the memory limit must be a positive whole number of bytes, not {memory_limit!r}")
        if memory_limit is not None and not isolate:
            raise UsageError("a memory limit needs isolate=True")
        self.objective, self.isolate = objective, bool(isolate)
        self.timeout_s, self.memory_limit = timeout_s, memory_limit
        self.name = function_name(objective)
        self.device = host_device(device_name)
        self._worker: IsolatedWorker | None = None
        self._blob = b""
        self._main: str | None = None
        self._told = False  # whether the user was told of a failed call (once: every one is in the database)
        if self.isolate:
            if _IN_WORKER:
                raise UsageError("the main script started a campaign again in its isolated worker process; guard the "
                                 "script's entry point with `if __name__ == \"__main__\":`")
            self._blob = self._pickled(objective)
            if getattr(objective, "__module__", None) == "__main__":
                main_file = getattr(sys.modules.get("__main__"), "__file__", None)
                if not main_file:
                    raise UsageError(f"isolate=True needs an objective that can be imported: {self.name} is defined in "
                                     "an interactive session; define it in a module or script file")
                self._main = os.path.abspath(main_file)

    def _pickled(self, objective: Callable) -> bytes:
        try:
            return pickle.dumps(objective, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - PicklingError, AttributeError, TypeError...
            raise UsageError(f"isolate=True sends the objective to a worker process by pickle, and {self.name} cannot "
                             f"be pickled ({type(exc).__name__}: {str(exc)[:100]}); use a module-level function "
                             "(not a lambda or a nested function)") from None

    def measure(self, task: Task, candidates: list[Candidate]) -> list[Measurement]:
        out = measure_each(candidates, self._one)  # Ctrl-C: BatchInterrupted, with the calls completed
        failed = next((m for m in out if not m.ok), None)
        if failed is not None and not self._told:
            self._told = True  # an objective that fails everywhere (a bug, a negative cost) is seen at once
            print(f"autotune: {self.name} failed at {_shown(failed.candidate.payload)}: "
                  f"{failed.error.splitlines()[0] if failed.error else failed.status.value} (a failed trial; the "
                  "campaign goes on, and each failure's message is in its trial's error column)", file=sys.stderr)
        return out

    def _one(self, c: Candidate) -> Measurement:
        config = dict(c.payload) if isinstance(c.payload, dict) else c.payload
        if self.isolate:
            return self._isolated(c, config)
        t0 = time.perf_counter()
        try:
            value = self.objective(config)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - errors are data; KeyboardInterrupt stops the run
            return Measurement(c, Status.RUNTIME_ERROR, error=error_text(exc), run_s=time.perf_counter() - t0)
        return to_measurement(c, value, time.perf_counter() - t0)

    def _isolated(self, c: Candidate, config) -> Measurement:
        if self._worker is None:
            self._worker = IsolatedWorker(self.memory_limit)
        timeout = self.timeout_s if self.timeout_s is not None else NO_TIMEOUT_S
        out = self._worker.call(_call_isolated, (list(sys.path), self._main, self._blob, config), timeout)
        if out.kind == "ok":
            try:
                value, run_s = out.payload
            except (TypeError, ValueError):
                value, run_s = out.payload, out.wall_s
            return to_measurement(c, value, run_s)
        status = Status.TIMEOUT if out.kind == "timeout" else Status.RUNTIME_ERROR
        return Measurement(c, status, error=out.error[:2000], run_s=out.wall_s)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
