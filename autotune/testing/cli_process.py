"""The `autotune` command line run as a separate process, and waiting on what it writes, for tests that
kill or signal such a process. Used only in tests."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

#: the command line as a process of this interpreter (whatever `autotune` is on PATH)
CLI = [sys.executable, "-c", "from autotune.cli.main import main; main()"]


def wait_until(what: str, predicate: Callable[[], object], timeout_s: float = 120.0):
    """``predicate()``'s first true value, polled every 50 ms; AssertionError naming ``what`` after
    ``timeout_s``."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
