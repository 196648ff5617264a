"""SIGTERM as Ctrl-C while a campaign runs, so that a run ended by ``kill PID``, ``timeout``, ``docker stop``,
Slurm or Kubernetes stores what it measured, gives back its claim and says how to resume, as Ctrl-C does,
instead of dying with its batch in flight. Standard library only: the command line imports it at start-up."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


def terminate_as_interrupt(signum, frame) -> None:
    """A SIGTERM handler that raises KeyboardInterrupt (the command line's, for the whole process)."""
    raise KeyboardInterrupt


def _once(signum, frame) -> None:
    # a second SIGTERM while the first one's interrupt stores the batch is ignored, not raised into that work
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt in the main thread, when the program left SIGTERM
    at its default (which kills the process on the spot); a program with a handler of its own keeps it, as
    does a block run outside the main thread (where no handler can be set). The default is restored after."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _once)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
