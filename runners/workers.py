"""Isolated execution: run one function in a fresh process, so a segfault or a hang costs
one RUNTIME_ERROR or TIMEOUT, never the caller.

A small fork server (``python -m autotune.runners.forkserver``, numpy and ctypes
preloaded, BLAS held to one thread) forks one child per call, so a fresh process costs
milliseconds, not a Python start-up, and - unlike multiprocessing's forkserver - never
re-imports the caller's main script. Messages are length-prefixed pickles over the
server's stdin/stdout; the child's own stdout goes to stderr.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.types import Candidate, Measurement, Status

HEADER = struct.Struct("<Q")


@dataclass
class Outcome:
    kind: str            # "ok", "error" (the child raised), "crash" (died), "timeout"
    payload: Any = None  # what the function returned, for "ok"
    error: str = ""
    wall_s: float = 0.0

    def failure(self, candidate: Candidate, **fields) -> Measurement | None:
        """The failed trial of a call that did not return (TIMEOUT, or RUNTIME_ERROR for an error or a
        crash), with ``fields`` (build_s, meta); None when it returned."""
        if self.kind == "ok":
            return None
        status = Status.TIMEOUT if self.kind == "timeout" else Status.RUNTIME_ERROR
        return Measurement(candidate, status, error=self.error, run_s=self.wall_s, **fields)


def write_frame(fd: int, data: bytes) -> None:
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_exact(fd: int, n: int, deadline: float | None = None) -> bytes | None:
    """n bytes from fd, or None at EOF; raises TimeoutError past the deadline."""
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.perf_counter()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(n - got, 1 << 22))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, deadline: float | None = None) -> bytes | None:
    head = read_exact(fd, HEADER.size, deadline)
    if head is None:
        return None
    return read_exact(fd, HEADER.unpack(head)[0], deadline)


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _kill_child(pid: int) -> None:
    """SIGKILL a child of the fork server and every process in its group."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class IsolatedWorker:
    """A handle on one fork server; ``call`` runs a function in a fresh child of it."""

    def __init__(self, memory_limit: int | None = None):
        self.proc: subprocess.Popen | None = None
        self.memory_limit = memory_limit  # RLIMIT_AS of each child, in bytes (None: no limit)

    def _start(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
            self.proc = subprocess.Popen([sys.executable, "-m", "autotune.runners.forkserver"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, env=env, bufsize=0)
        return self.proc

    def call(self, fn: Callable, args: tuple, timeout_s: float) -> Outcome:
        """``fn(*args)`` in a fresh process; ``fn`` must be importable (module level), args picklable."""
        t0 = time.perf_counter()
        proc = self._start()
        try:
            write_frame(proc.stdin.fileno(), pickle.dumps((fn, args, self.memory_limit),
                                                          protocol=pickle.HIGHEST_PROTOCOL))
            pid = pickle.loads(read_frame(proc.stdout.fileno(), time.perf_counter() + 30.0))
        except (OSError, TimeoutError, TypeError, pickle.PickleError) as exc:
            self.close()
            return Outcome("crash", error=f"the fork server failed: {exc}", wall_s=time.perf_counter() - t0)
        timed_out = False
        try:
            frame = read_frame(proc.stdout.fileno(), t0 + timeout_s)
        except TimeoutError:
            timed_out = True
            _kill_child(pid)  # the server reaps the child and reports
            try:
                frame = read_frame(proc.stdout.fileno(), time.perf_counter() + 10.0)
            except TimeoutError:
                frame = None
        except BaseException:  # Ctrl-C while the child runs: it stops now, not once it has finished
            _kill_child(pid)
            self.close()
            raise
        wall = time.perf_counter() - t0
        if frame is None:
            self.close()
            if timed_out:
                return Outcome("timeout", error=f"did not finish within {timeout_s:g} s; the worker was killed",
                               wall_s=wall)
            return Outcome("crash", error="the fork server died", wall_s=wall)
        result, code = pickle.loads(frame)
        if timed_out:
            return Outcome("timeout", error=f"did not finish within {timeout_s:g} s; the worker was killed",
                           wall_s=wall)
        if result is None:
            if code < 0:
                return Outcome("crash", error=f"the worker process was killed by {_signal_name(code)}", wall_s=wall)
            return Outcome("crash", error=f"the worker process exited with status {code} without a result",
                           wall_s=wall)
        kind, payload = pickle.loads(result)
        if kind == "ok":
            return Outcome("ok", payload=payload, wall_s=wall)
        return Outcome("error", error=str(payload), wall_s=wall)

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(5)
            if self.proc.stdout:
                self.proc.stdout.close()
            self.proc = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown
            pass
