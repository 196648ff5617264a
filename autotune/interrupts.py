"""Interrupts while a campaign runs: SIGTERM as Ctrl-C, so that a run ended by ``kill PID``, ``timeout``, ``docker
stop``, Slurm or Kubernetes stores what it measured, gives back its claim and says how to resume, as Ctrl-C does,
instead of dying with its batch in flight; and no interrupt lost where Python drops it. Standard library only: the
command line imports it at start-up.

A signal handler runs between two bytecodes of the main thread, wherever it is, and Python drops an exception
raised inside a finaliser or a weakref callback (printing "Exception ignored in ..."). A Ctrl-C, a SIGTERM or
Ray's cancel of a task (``_thread.interrupt_main``) that lands in one, as in one of SQLAlchemy's weakref
callbacks, would be lost: the campaign would run on, on a cluster with nobody to press Ctrl-C again. So the
handlers here remember the interrupt they raise until a campaign has handled it (``interrupt_handled``), and a
campaign's rounds raise one that was lost (``raise_lost_interrupt``)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_raised = threading.Event()  # an interrupt raised by a handler here that no campaign has handled yet


def _interrupt(signum, frame) -> None:
    """Ctrl-C's handler while a campaign runs: KeyboardInterrupt, remembered."""
    _raised.set()
    raise KeyboardInterrupt


def terminate_as_interrupt(signum, frame) -> None:
    """A SIGTERM handler that raises KeyboardInterrupt (the command line's, for the whole process)."""
    _interrupt(signum, frame)


def _once(signum, frame) -> None:
    # a second SIGTERM while the first one's interrupt stores the batch is ignored, not raised into that work
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _interrupt(signum, frame)


@contextmanager
def campaign_interrupts() -> Iterator[None]:
    """Within the block (a campaign's run), in the main thread: SIGTERM raises KeyboardInterrupt where the program
    left SIGTERM at its default (which kills the process on the spot), and Ctrl-C raises it as Python's own
    handler does where the program left that one in place, each remembered until ``interrupt_handled()``. A
    program with handlers of its own keeps them, as does a block run outside the main thread (where no handler
    can be set). The handlers are restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    term = signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    ctrl_c = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if ctrl_c:  # the outermost campaign (a campaign run by another's objective leaves the first one's to it)
        _raised.clear()
        signal.signal(signal.SIGINT, _interrupt)
    if term:
        signal.signal(signal.SIGTERM, _once)
    try:
        yield
    finally:
        if term:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if ctrl_c:
            signal.signal(signal.SIGINT, signal.default_int_handler)


def interrupt_handled() -> None:
    """The interrupt raised so far has reached the campaign, which stops on it."""
    _raised.clear()


def raise_lost_interrupt() -> None:
    """KeyboardInterrupt if an interrupt was raised and has not reached the campaign: Python dropped it."""
    if _raised.is_set():
        _raised.clear()
        raise KeyboardInterrupt
