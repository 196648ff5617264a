"""The process between CommandRunner and the user's program (Linux): it runs the program and, when the run
ends, leaves none of the processes the program started.

    python -S command_launcher.py FD PARENT_PID PROGRAM [ARGS...]

Standard library only, no imports of autotune (it starts with ``-S`` in milliseconds). It

- asks to receive SIGTERM when its parent (autotune) dies (PR_SET_PDEATHSIG), and exits at once if the
  parent is already gone;
- becomes a child subreaper (PR_SET_CHILD_SUBREAPER): a process of the run whose parent exits is
  re-parented to the launcher instead of to init, also after ``setsid()`` or a daemon's double fork, so
  every process the program started stays a descendant of the launcher;
- forks the program (which dies with the launcher: PR_SET_PDEATHSIG, SIGKILL) and waits for it;
- on SIGTERM (CommandRunner's timeout or Ctrl-C, or autotune's death), and once the program has
  exited, kills every descendant with SIGKILL, again until none is left, reaping them;
- writes ``T0 T1 STATUS`` to FD and exits 0 (125 if the status was lost): T0, the monotonic time just
  before the program is executed (written by the forked child), T1 when it has exited, and its raw
  wait status.

What it cannot reach: a process that is not a descendant (one a service or daemon starts on the
program's behalf: ``systemd-run``, ``at``, a server it connects to), one that runs as another user
(a setuid program), and anything once the launcher itself is killed with SIGKILL (CommandRunner then
kills the launcher's process group).
"""

import os
import _signal as signal  # the C module: `signal` would import enum and functools, milliseconds per run
import sys
import time

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
KILL_ROUNDS_S = 5.0  # how long the launcher keeps killing (a process in uninterruptible sleep dies late)


def _prctl(option, value):
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - no prctl (not Linux, no libc): the launcher goes on without it
        return False


state = {"pid": None, "status": None, "t1": None}


def _reap():
    """Reap every exited child (noting the program's status); False when no child is left."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        if pid == state["pid"] and state["status"] is None:
            state["status"], state["t1"] = status, time.monotonic()


def _descendants():
    """The live descendants of this process, from /proc (a zombie is dead and only waits to be reaped)."""
    children, live = {}, set()
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        pid = int(name)
        children.setdefault(int(fields[1]), []).append(pid)
        if fields[0] not in (b"Z", b"X"):
            live.add(pid)
    found, todo = [], [os.getpid()]
    while todo:
        for pid in children.get(todo.pop(), ()):
            found.append(pid)
            todo.append(pid)
    return [pid for pid in found if pid in live]


def kill_all():
    """SIGKILL every descendant until none is left (a killed parent's children come back to the launcher,
    its subreaper, and are found in the next round)."""
    deadline = time.monotonic() + KILL_ROUNDS_S
    if state["pid"] is not None and state["status"] is None:
        try:
            os.kill(state["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass
    while _reap() and time.monotonic() < deadline:
        for pid in _descendants():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.002)


def _on_term(signum, frame):
    kill_all()


def main():
    fd, parent, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os._exit(137)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    signal.signal(signal.SIGTERM, _on_term)
    launcher = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            for sig in (signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ):  # as a shell starts it (Python ignores two)
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != launcher:
                os._exit(137)
            os.set_inheritable(fd, False)  # closed by the exec, after the start is noted
            os.write(fd, b"%r " % time.monotonic())
            os.execv(argv[0], argv)
        except OSError as exc:
            sys.stderr.write("cannot run %s: %s\n" % (argv[0], exc.strerror or exc))
        finally:
            os._exit(127)
    state["pid"] = pid
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # a SIGTERM that came meanwhile acts now
    while state["status"] is None:
        try:
            got, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if got == pid and state["status"] is None:
            state["status"], state["t1"] = status, time.monotonic()
    kill_all()  # whatever the program left running
    status = "-" if state["status"] is None else str(state["status"])  # "-": never seen (cannot happen)
    report = "%r %s" % (state["t1"] or time.monotonic(), status)
    try:
        os.write(fd, report.encode())
        os.close(fd)
    except OSError:  # autotune is gone (the launcher was told by PR_SET_PDEATHSIG): nobody reads it
        pass
    os._exit(0 if state["status"] is not None else 125)


if __name__ == "__main__":
    main()
