"""Fake kernels for the process-hygiene tests: functions an isolated worker runs that fork, hang
or allocate. Used only in tests."""

from __future__ import annotations

import os
import time


def _note(path: str, what: str) -> None:
    with open(path, "a") as f:
        f.write(f"{what} {os.getpid()}\n")


def fork_and_return(path: str, seconds: float = 60.0) -> str:
    """Fork a grandchild that sleeps (noting its pid in ``path``), and return once it has noted it."""
    r, w = os.pipe()
    if os.fork() == 0:
        try:
            _note(path, "grandchild")
            os.write(w, b"x")
            time.sleep(seconds)
        finally:
            os._exit(0)
    os.read(r, 1)
    return "returned"


def spin_forever(path: str, fork_first: bool = False) -> None:
    """Note this process's pid (and its parent's, the fork server) and spin; optionally fork a spinner first."""
    if fork_first and os.fork() == 0:
        _note(path, "grandchild")
        while True:
            pass
    with open(path, "a") as f:
        f.write(f"server {os.getppid()}\nchild {os.getpid()}\n")
    while True:
        pass


def allocate(nbytes: int) -> int:
    """Allocate and touch ``nbytes``; returns the size allocated."""
    block = bytearray(nbytes)
    block[::4096] = b"x" * len(block[::4096])
    return len(block)
