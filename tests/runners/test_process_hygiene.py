"""No process of a measurement outlives it, no helper outlives a killed campaign, and a candidate's
memory is capped (runners/processes.py, runners/forkserver.py)."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autotune.runners.processes import private_workdir, sweep_stale
from autotune.runners.workers import IsolatedWorker
from autotune.testing import processes as fake

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead, only not yet reaped
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def wait_dead(pids, seconds=10.0) -> list[int]:
    deadline = time.time() + seconds
    while time.time() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def pids_in(path: Path, role: str, seconds: float = 30.0) -> list[int]:
    """The pids noted in ``path`` as ``role`` (lines "ROLE PID"), waiting until one appears."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if path.exists():
            found = [int(line.split()[1]) for line in path.read_text().splitlines() if line.split()[:1] == [role]]
            if found:
                return found
        time.sleep(0.05)
    raise AssertionError(f"no {role} pid appeared in {path}")


@linux_only
def test_processes_a_kernel_forks_die_with_its_measurement(tmp_path):
    notes = tmp_path / "pids"
    worker = IsolatedWorker()
    try:
        out = worker.call(fake.fork_and_return, (str(notes), 60.0), timeout_s=30)
        assert out.kind == "ok" and out.payload == "returned"
        grandchildren = pids_in(notes, "grandchild")
        assert wait_dead(grandchildren) == []
        assert worker.call(fake.fork_and_return, (str(notes), 60.0), timeout_s=30).kind == "ok"  # server still serves
    finally:
        worker.close()


@linux_only
def test_a_timed_out_candidate_and_its_children_are_killed(tmp_path):
    notes = tmp_path / "pids"
    worker = IsolatedWorker()
    try:
        out = worker.call(fake.spin_forever, (str(notes), True), timeout_s=2)
        assert out.kind == "timeout"
        assert wait_dead(pids_in(notes, "grandchild") + pids_in(notes, "child")) == []
    finally:
        worker.close()


KILLED_CAMPAIGN = textwrap.dedent("""
    import sys
    from autotune.runners.workers import IsolatedWorker
    from autotune.testing import processes as fake
    IsolatedWorker().call(fake.spin_forever, (sys.argv[1], True), timeout_s=600)
""")


@linux_only
def test_nothing_survives_a_campaign_killed_while_a_kernel_hangs(tmp_path):
    """SIGKILL the process that owns the worker while its kernel (and a process the kernel forked) spin."""
    notes = tmp_path / "pids"
    owner = subprocess.Popen([sys.executable, "-c", KILLED_CAMPAIGN, str(notes)])
    try:
        server, child = pids_in(notes, "server")[0], pids_in(notes, "child")[0]
        grandchild = pids_in(notes, "grandchild")[0]
        assert alive(server) and alive(child) and alive(grandchild)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
    assert wait_dead([server, child, grandchild]) == []


@linux_only
def test_a_candidate_past_its_memory_limit_fails_alone():
    worker = IsolatedWorker(memory_limit=1 << 30)
    try:
        out = worker.call(fake.allocate, (4 << 30,), timeout_s=60)
        assert out.kind == "error" and "MemoryError" in out.error
        assert worker.call(fake.allocate, (64 << 20,), timeout_s=60).payload == 64 << 20
    finally:
        worker.close()


def test_build_folders_are_removed_at_exit_and_after_a_kill(tmp_path):
    prefix = f"autotune-test-{os.getpid()}-"
    code = ("import sys, time; from autotune.runners.processes import private_workdir; "
            f"p = private_workdir({prefix!r}); (p / 'k.so').write_text('x'); print(p, flush=True); "
            "time.sleep(float(sys.argv[1]))")
    clean = subprocess.run([sys.executable, "-c", code, "0"], capture_output=True, text=True, timeout=60)
    assert not Path(clean.stdout.strip()).exists()  # normal exit: removed
    killed = subprocess.Popen([sys.executable, "-c", code, "60"], stdout=subprocess.PIPE, text=True)
    left = Path(killed.stdout.readline().strip())
    killed.kill()
    killed.wait(10)
    assert left.exists()  # SIGKILL: nothing could clean up...
    private_workdir(prefix)  # ...so the next runner removes it
    assert not left.exists()
    assert sweep_stale(prefix) == 0


def test_ctrl_c_to_the_foreground_group_leaves_the_fork_server_serving_in_silence(tmp_path):
    """A terminal's Ctrl-C signals every process of the foreground group, the fork server too: the
    parent decides what happens (it stores what was measured and closes the server), so the server
    neither dies nor prints a traceback."""
    worker = IsolatedWorker()
    try:
        assert worker.call(fake.allocate, (1024,), timeout_s=30).kind == "ok"
        worker.proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        assert worker.proc.poll() is None
        assert worker.call(fake.allocate, (2048,), timeout_s=30).payload == 2048
    finally:
        worker.close()
