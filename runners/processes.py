"""Process hygiene for the runners' helper processes: die with the parent, leave nothing behind.

- ``die_with_parent(sig)``: Linux's PR_SET_PDEATHSIG, so a helper (fork server, GPU worker,
  candidate process) is signalled when the process that started it dies, even by SIGKILL;
- ``limit_memory(nbytes)``: RLIMIT_AS for a candidate process (an allocation past it fails
  in the candidate, not in the machine);
- ``private_workdir(prefix)``: a build folder named after this process, removed at exit;
  folders of processes that no longer exist (killed before they could clean up) are removed
  the next time a runner starts;
- ``run_compiler(cmd, timeout_s, tmpdir, running)``: a compiler run in its own process group with
  its temporary files in ``tmpdir``; past the timeout, or at ``running.stop()`` (a :class:`Compilers`), the
  whole group is killed (a compiler driver's own children, gcc's cc1 and as, too), so a timed-out or
  interrupted build leaves no process and no file behind.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from autotune.errors import UsageError

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def limit_memory(nbytes: int | None) -> None:
    """Cap this process's address space at ``nbytes`` (None: leave it)."""
    if nbytes:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = int(nbytes) if hard == resource.RLIM_INFINITY else min(int(nbytes), hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def process_alive(pid: int) -> bool:
    """Whether a process with this pid runs on this host (a zombie, dead and not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # Linux: the state field follows the parenthesised command name
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def temp_root() -> str:
    """The temporary folder (Python's choice: $TMPDIR, else /tmp, /var/tmp, ...), or UsageError saying that
    none of them is writable, not a traceback."""
    try:
        return tempfile.gettempdir()
    except OSError as exc:
        raise UsageError(f"no writable temporary folder for the builds ({exc.strerror or exc}); set TMPDIR "
                         "to a writable folder") from None


def sweep_stale(prefix: str, root: str | None = None) -> int:
    """Remove ``<root>/<prefix><pid>-*`` folders whose process is gone; returns how many."""
    base = Path(root or temp_root())
    removed = 0
    for d in base.glob(f"{prefix}*-*"):
        pid = d.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)) and d.is_dir():
            shutil.rmtree(d, ignore_errors=True)
            removed += 1
    return removed


def private_workdir(prefix: str) -> Path:
    """A new temporary folder ``<prefix><pid>-XXXX``, removed when this process exits normally."""
    sweep_stale(prefix)
    root = temp_root()
    try:
        path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=root))
    except OSError as exc:  # writable when Python chose it, no longer (or full) now
        raise UsageError(f"cannot make a build folder in the temporary folder {root!r}: {exc.strerror or exc}; "
                         "set TMPDIR to a writable folder") from None
    atexit.register(shutil.rmtree, path, True)
    return path


class Compilers:
    """The compilers a runner has running. ``stop()`` kills them, with their process groups, and every one
    registered after it as it is registered: a runner closed while it builds (Ctrl-C reaches only the
    foreground process group, not theirs) waits for none of them, not even for one whose build thread was
    starting it at that moment."""

    def __init__(self):
        self._running: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._stopped = False

    def add(self, proc: subprocess.Popen) -> None:
        with self._lock:
            if not self._stopped:
                self._running.add(proc)
                return
        _kill_compiler(proc)

    def discard(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._running.discard(proc)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            running = list(self._running)
        for proc in running:
            _kill_compiler(proc)


def run_compiler(cmd: list[str], timeout_s: float, tmpdir: str | Path | None = None,
                 running: Compilers | None = None) -> subprocess.CompletedProcess:
    """Run ``cmd`` (text output captured) in a process group of its own, with TMPDIR set to ``tmpdir``;
    subprocess.TimeoutExpired once it has run ``timeout_s`` seconds, after the whole group is killed.
    While it runs it is in ``running``, whose ``stop()`` kills it."""
    env = {**os.environ, "TMPDIR": str(tmpdir)} if tmpdir is not None else None
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          process_group=0) as proc:
        if running is not None:
            running.add(proc)
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except BaseException:  # the timeout, or Ctrl-C in the thread that waits: nothing of the build stays
            _kill_compiler(proc)
            proc.communicate()
            raise
        finally:
            if running is not None:
                running.discard(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _kill_compiler(proc: subprocess.Popen) -> None:
    if proc.returncode is None:  # not yet reaped: its pid is still its group's
        kill_group(proc.pid)


def kill_group(pgid: int | None) -> None:
    """SIGKILL every process of the process group ``pgid`` (nothing when it is None or already gone)."""
    if pgid:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
