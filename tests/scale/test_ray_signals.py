"""Signals and a process connected to Ray, with stand-ins for the ray module (so Ray need not be installed).

Ctrl-C or SIGTERM while Ray shuts down at the exit of a process that started it (a local cluster takes seconds
to stop, after the command's summary is printed) is held off until the shutdown is done: cut short, Ray's exit
handler prints a traceback and the process often dies of a segmentation fault. The stand-in (on PYTHONPATH)
registers its exit handler at import, as Ray does, and its shutdown receives the signal.

ray.init sets a SIGTERM handler that exits at once; the command line's own (SIGTERM as Ctrl-C: the campaigns on
the cluster are interrupted and store what they measured) is kept."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

FAKE_RAY = textwrap.dedent("""
    import atexit, os, signal

    _up = False

    def init(**kwargs):
        global _up
        _up = True

    def is_initialized():
        return _up

    def shutdown(_exiting_interpreter=False):
        global _up
        if not _up:
            return
        os.kill(os.getpid(), int(os.environ["FAKE_RAY_SIGNAL"]))  # Ctrl-C (or SIGTERM) while the cluster stops
        sum(range(1000))  # Python code after it: where a KeyboardInterrupt would be raised
        _up = False
        print("shut down", flush=True)

    atexit.register(shutdown, _exiting_interpreter=True)
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_while_ray_shuts_down_at_exit_waits_for_the_shutdown(tmp_path, sig):
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text(FAKE_RAY)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "FAKE_RAY_SIGNAL": str(int(sig))}
    r = subprocess.run([sys.executable, "-c", "from autotune.runners.ray import ray_init; ray_init('local')"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, "shut down\n", ""), r


class FakeRayTakingSigterm:
    """What ray_init uses of the ray module; its init sets a SIGTERM handler of its own, as ray.init does."""

    def is_initialized(self):
        return False

    def init(self, **kwargs):
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))


def test_ray_init_keeps_the_programs_own_sigterm_handler(monkeypatch):
    from autotune.runners import ray as ray_runner

    monkeypatch.setattr(ray_runner, "_ray", FakeRayTakingSigterm)

    def own(signum, frame):
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, own)
    try:
        ray_runner.ray_init("local")
        assert signal.getsignal(signal.SIGTERM) is own
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a program without a handler of its own: Ray's stays
        ray_runner.ray_init("local")
        assert signal.getsignal(signal.SIGTERM) not in (own, signal.SIG_DFL)
    finally:
        signal.signal(signal.SIGTERM, before)
