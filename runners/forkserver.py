"""The fork server behind runners.workers.IsolatedWorker (run as ``python -m autotune.runners.forkserver``).

Reads length-prefixed pickled ``(fn, args)`` requests on stdin; for each, forks a child
that runs ``fn(*args)`` and writes ``("ok", result)`` or ``("error", text)`` to a private
pipe, then answers on stdout with the child's pid and, once the child has exited,
``(result bytes or None, exit code)``. A child killed by a signal has a negative code.

Each child leads its own process group, and the whole group is killed once the child has
answered or died, so processes a kernel forks never outlive its measurement. The server
dies with its parent (SIGTERM through PR_SET_PDEATHSIG: it kills the running child's group
first), and each child dies with the server. A request may carry a memory limit (RLIMIT_AS)
for the child.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import traceback

import autotune.runners.child  # noqa: F401 - preload numpy and ctypes before forking
from autotune.runners.processes import die_with_parent, kill_group, limit_memory
from autotune.runners.workers import read_frame, write_frame

_running: int | None = None  # the child being measured: its pid is also its process group


def _on_parent_death(signum, frame) -> None:  # noqa: ANN001
    kill_group(_running)
    os._exit(1)


def _child(request: bytes, w: int) -> None:
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # the candidate runs with Python's usual disposition
        die_with_parent(signal.SIGKILL)
        os.dup2(2, 1)  # a kernel that prints must not corrupt the message stream
        try:
            fn, args, memory_limit = pickle.loads(request)
            limit_memory(memory_limit)
            reply = ("ok", fn(*args))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent as data
            reply = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}")
        write_frame(w, pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL))
    finally:
        os._exit(0)


def serve(inp: int, out: int) -> None:
    global _running
    while True:
        request = read_frame(inp)
        if request is None:
            return
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            _child(request, w)
        _running = pid
        try:
            os.setpgid(pid, pid)  # also here, so the group exists before the parent can kill it
        except (ProcessLookupError, PermissionError):
            pass
        os.close(w)
        write_frame(out, pickle.dumps(pid))
        data = read_frame(r)
        os.close(r)
        _, status = os.waitpid(pid, 0)
        kill_group(pid)  # whatever the candidate forked
        _running = None
        write_frame(out, pickle.dumps((data, os.waitstatus_to_exitcode(status))))


if __name__ == "__main__":
    # Ctrl-C on a terminal signals the whole foreground group, this server too: the parent handles it
    # (stores what was measured, then closes or kills the server), so here it is no error to report
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_parent_death)
    die_with_parent(signal.SIGTERM)
    if os.getppid() == 1:  # the parent died before the request above took effect
        sys.exit(1)
    serve(sys.stdin.fileno(), sys.stdout.fileno())
