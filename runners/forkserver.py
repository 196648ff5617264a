"""The fork server behind runners.workers.IsolatedWorker (run as ``python -m autotune.runners.forkserver``).

Reads length-prefixed pickled ``(fn, args)`` requests on stdin; for each, forks a child
that runs ``fn(*args)`` and writes ``("ok", result)`` or ``("error", text)`` to a private
pipe, then answers on stdout with the child's pid and, once the child has exited,
``(result bytes or None, exit code)``. A child killed by a signal has a negative code.
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback

import autotune.runners.child  # noqa: F401 - preload numpy and ctypes before forking
from autotune.runners.workers import read_frame, write_frame


def _child(request: bytes, w: int) -> None:
    try:
        os.dup2(2, 1)  # a kernel that prints must not corrupt the message stream
        try:
            fn, args = pickle.loads(request)
            reply = ("ok", fn(*args))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent as data
            reply = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}")
        write_frame(w, pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL))
    finally:
        os._exit(0)


def serve(inp: int, out: int) -> None:
    while True:
        request = read_frame(inp)
        if request is None:
            return
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            _child(request, w)
        os.close(w)
        write_frame(out, pickle.dumps(pid))
        data = read_frame(r)
        os.close(r)
        _, status = os.waitpid(pid, 0)
        write_frame(out, pickle.dumps((data, os.waitstatus_to_exitcode(status))))


if __name__ == "__main__":
    serve(sys.stdin.fileno(), sys.stdout.fileno())
