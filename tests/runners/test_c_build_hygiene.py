"""CRunner's builds and runs leave nothing behind: a compile past its timeout is killed with every process
the compiler started, its temporary files are in the runner's build folder, an interrupted batch builds no
more candidates, and Ctrl-C while a candidate runs stops it at once. The compiler is a fake (a shell script
named as $CC) and so is the interrupt, so the tests take seconds."""

import signal
import sys
import threading
import time
from concurrent.futures import CancelledError
from pathlib import Path

import pytest

from autotune.runners import workers
from autotune.runners.c import CRunner
from autotune.runners.processes import Compilers, run_compiler
from autotune.search_spaces.kernels import Softmax
from autotune.testing import processes as fake
from autotune.types import Candidate

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and /proc: Linux")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def fake_compiler(tmp_path: Path, body: str) -> Path:
    """A stand-in for gcc: answers --version, else runs ``body`` (sh)."""
    cc = tmp_path / "fake-cc"
    cc.write_text(f'#!/bin/sh\ncase "$1" in --version) echo "fake-cc 1"; exit 0;; esac\n{body}\n')
    cc.chmod(0o755)
    return cc


def softmax_runner(monkeypatch, cc: Path, **kw) -> tuple[Softmax, CRunner]:
    monkeypatch.setenv("CC", str(cc))
    t = Softmax("4,64", "cpu", threads=1)
    return t, CRunner(t, **kw)


@linux_only
def test_a_compile_past_its_timeout_is_killed_with_its_children_and_files(tmp_path, monkeypatch):
    notes, system_tmp = tmp_path / "notes", tmp_path / "system-tmp"
    system_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(system_tmp))  # where the compiler's files went, before its build folder
    # like gcc: the driver starts a child (cc1) that writes a temporary file and runs on
    cc = fake_compiler(tmp_path, f'touch "$TMPDIR/ccFAKE$$.s"\nsleep 60 &\necho $! > {notes}\nwait')
    t, runner = softmax_runner(monkeypatch, cc, compile_timeout_s=1.0)
    try:
        so, err, _ = runner.build(t.default_config())
        assert so is None and "did not finish within 1 s" in err
        child = int(notes.read_text())
        deadline = time.time() + 10
        while alive(child) and time.time() < deadline:
            time.sleep(0.05)
        assert not alive(child), "the compiler's child outlived the timeout"
        assert list(system_tmp.glob("cc*")) == []
        assert list(runner.workdir.glob("ccFAKE*.s"))  # in the build folder, removed with it
    finally:
        runner.close()
    assert not runner.workdir.exists()


def test_a_runner_closed_while_it_builds_waits_for_no_compiler(tmp_path, monkeypatch):
    """Closed in the middle of a batch's builds, as after Ctrl-C: the build running is killed and the builds
    not yet started are dropped, rather than run one after another before the command can exit."""
    calls = tmp_path / "calls"
    cc = fake_compiler(tmp_path, f'echo start >> {calls}\nsleep 3\necho done >> {calls}\nexit 1')
    t, runner = softmax_runner(monkeypatch, cc, build_workers=1)
    batch = [Candidate({**t.default_config(), "ACC": acc}) for acc in (1, 2, 4, 8, 16, 32)]
    ended = []

    def measure():
        try:
            runner.measure(t.task, batch)
        except CancelledError:  # the batch's builds were dropped under it
            ended.append("cancelled")

    measuring = threading.Thread(target=measure, daemon=True)
    measuring.start()
    try:
        deadline = time.time() + 30
        while not calls.exists() and time.time() < deadline:
            time.sleep(0.01)
    finally:
        runner.close()
    measuring.join(30)
    assert ended == ["cancelled"]
    lines = calls.read_text().splitlines()
    assert "done" not in lines  # the running compile was killed, not waited for
    assert lines.count("start") <= 2  # at most one more had been taken from the queue


@linux_only
def test_a_compiler_registered_after_the_runner_stopped_is_killed_not_waited_for(tmp_path):
    """A build thread that was starting its compiler as the runner closed registers it after stop(): it is
    killed then, with its process group, rather than left for close() to wait out."""
    compilers = Compilers()
    compilers.stop()
    t0 = time.monotonic()
    done = run_compiler(["sh", "-c", f"sleep 5; echo done > {tmp_path / 'done'}"], 30, running=compilers)
    assert done.returncode == -signal.SIGKILL and not (tmp_path / "done").exists()
    assert time.monotonic() - t0 < 4


@linux_only
def test_ctrl_c_while_a_candidate_runs_stops_it_at_once(tmp_path, monkeypatch):
    """The interrupt reaches the process that waits for the candidate's result, not the candidate (a process
    group of its own): the candidate is killed then, not left to run until the worker is closed."""
    notes = tmp_path / "pids"
    real_read_frame, frames = workers.read_frame, []

    def fake_ctrl_c_once_the_child_runs(fd, deadline=None):
        frames.append(fd)
        if len(frames) == 2:  # the wait for the result, the child's pid already read
            while "child" not in (notes.read_text() if notes.exists() else ""):
                time.sleep(0.01)
            raise KeyboardInterrupt
        return real_read_frame(fd, deadline)

    monkeypatch.setattr(workers, "read_frame", fake_ctrl_c_once_the_child_runs)
    worker = workers.IsolatedWorker()
    try:
        with pytest.raises(KeyboardInterrupt):
            worker.call(fake.spin_forever, (str(notes), False), timeout_s=600)
        child = next(int(line.split()[1]) for line in notes.read_text().splitlines() if line.startswith("child"))
        deadline = time.time() + 10
        while alive(child) and time.time() < deadline:
            time.sleep(0.05)
        assert not alive(child), "the candidate ran on after Ctrl-C"
    finally:
        worker.close()
