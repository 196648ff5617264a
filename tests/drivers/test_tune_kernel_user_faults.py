"""`autotune tune kernel` and autotune.tune_template as a user meets them on the CPU: a broken $CC said once
before anything is stored, a GPU index given for the CPU, a campaign resumed with another shape or compiler
refused naming what differs, a default configuration that times out, the summary's units, and Ctrl-C with
--json (autotune/drivers/kernel.py, autotune/cli/tune_kernel.py). Real gcc builds of tiny shapes."""

import json
import os
import re

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.drivers.kernel import tune_template
from autotune.errors import UsageError
from autotune.runners import workers
from autotune.runners.c import CRunner

cli = CliRunner()


def run(*args):
    return cli.invoke(app, [str(a) for a in args])


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path / 'k.db'}"


def test_a_compiler_that_builds_nothing_is_one_message_and_nothing_is_stored(tmp_path, url, monkeypatch):
    cc = tmp_path / "broken-cc"
    cc.write_text('#!/bin/sh\ncase "$1" in --version) echo "broken 1"; exit 0;; esac\n'
                  'echo "broken-cc: error: unsupported option" >&2\nexit 1\n')
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    r = run("tune", "kernel", "softmax", "--shape", "4,8", "--trials", 4, "--db", url, "--no-progress", "--json")
    assert r.exit_code == 2, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert "cannot build a shared object" in out["error"] and "broken-cc: error: unsupported option" in out["error"]
    assert not (tmp_path / "k.db").exists()  # refused before the database: no failed trial stored per configuration


@pytest.mark.parametrize("kw,words", [
    ({"device_index": 1}, "device_index (a GPU index) applies to target='cuda' only"),
    ({"device_index": -1, "target": "cuda"}, "device_index is a GPU index, a whole number 0 or more, not -1"),
    ({"device_index": 1.5}, "not 1.5"),
])
def test_a_gpu_index_that_would_be_ignored_or_is_not_one_is_refused(url, kw, words):
    with pytest.raises(UsageError) as refused:
        tune_template("softmax", "4,8", trials=1, db=url, progress=False, **kw)
    assert words in str(refused.value)


def test_device_on_the_cpu_target_is_refused_by_its_flag(url):
    r = run("tune", "kernel", "softmax", "--shape", "4,8", "--device", 3, "--trials", 1, "--db", url, "--no-progress")
    assert r.exit_code == 2 and "--device (a GPU index) applies to --target cuda only" in r.output


def test_a_campaign_resumed_with_another_shape_or_compiler_is_refused_naming_it(tmp_path, url, monkeypatch):
    tune_template("softmax", "4,8", trials=1, batch=1, campaign="c", db=url, progress=False, threads=1)
    with pytest.raises(UsageError, match=r"\(task softmax \[\w+\], not softmax \[\w+\]: shape rows=4,cols=8, not "
                                         r"rows=4,cols=16\)"):
        tune_template("softmax", "4,16", trials=1, batch=1, campaign="c", db=url, progress=False, threads=1)
    with pytest.raises(UsageError, match=r": threads 1, not unset\)"):
        tune_template("softmax", "4,8", trials=1, batch=1, campaign="c", db=url, progress=False)
    monkeypatch.setenv("CC", "gcc -O1")  # the same compiler, another build: the device says which option differs
    with pytest.raises(UsageError, match=r"\(device .*: cflags -O3 -march=native .*, not -O1 -O3 -march=native"):
        tune_template("softmax", "4,8", trials=1, batch=1, campaign="c", db=url, progress=False, threads=1)


def test_a_default_that_times_out_is_said_before_the_campaign_with_why(url, monkeypatch, capsys):
    def every_run_times_out(self, fn, args, timeout_s):
        return workers.Outcome("timeout", error=f"did not finish within {timeout_s:g} s; the worker was killed")

    monkeypatch.setattr(workers.IsolatedWorker, "call", every_run_times_out)
    _, _, extra = tune_template("softmax", "4,8", trials=2, batch=2, db=url, progress=False, threads=1)
    assert extra["default_status"] == "TIMEOUT"
    assert extra["default_error"] == "did not finish within 20 s; the worker was killed"
    err = capsys.readouterr().err
    assert "note: the default configuration of softmax 4x8 timed out (did not finish within 20 s" in err
    assert "a smaller shape measures in less time" in err


def test_the_summary_shows_the_default_cost_in_the_unit_of_the_best(url):
    r = run("tune", "kernel", "softmax", "--shape", "4,8", "--trials", 2, "--batch", 2, "--threads", 1, "--db", url,
            "--no-progress")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert re.fullmatch(r"default_cost [\d.]+ (ns|µs|ms|s)", next(x for x in lines if x.startswith("default_cost")))
    assert "default_error" not in r.stdout  # only when the default failed


def _interrupt_run(monkeypatch, at: int):
    """Ctrl-C at the ``at``-th measurement (1: the default configuration's, measured before the campaign)."""
    real, calls = CRunner._run, []

    def run_then_interrupt(self, cand, build):
        calls.append(cand)
        if len(calls) == at:
            raise KeyboardInterrupt
        return real(self, cand, build)

    monkeypatch.setattr(CRunner, "_run", run_then_interrupt)


def test_ctrl_c_in_the_campaign_ends_the_json_output_with_how_to_resume(url, monkeypatch):
    _interrupt_run(monkeypatch, at=3)
    r = run("tune", "kernel", "softmax", "--shape", "4,8", "--trials", 6, "--batch", 2, "--threads", 1, "--db", url,
            "--no-progress", "--json")
    assert r.exit_code == 130
    said = json.loads(r.stdout.strip().splitlines()[-1])["error"]
    assert said.startswith("interrupted: ") and "resume with: autotune tune kernel softmax --shape 4,8" in said
    assert said in r.stderr  # the JSON says what stderr did


def test_ctrl_c_before_the_campaign_says_what_stderr_says_not_the_batch_internals(url, monkeypatch):
    _interrupt_run(monkeypatch, at=1)
    r = run("tune", "kernel", "softmax", "--shape", "4,8", "--trials", 6, "--threads", 1, "--db", url,
            "--no-progress", "--json")
    assert r.exit_code == 130
    assert json.loads(r.stdout.strip().splitlines()[-1])["error"] == r.stderr.strip()
    assert "batch" not in r.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full, a device that is always full")
def test_a_source_file_that_cannot_be_written_after_the_search_is_one_message(url):
    r = run("tune", "kernel", "softmax", "--shape", "4,8", "--trials", 2, "--threads", 1, "--db", url, "--no-progress",
            "--json", "--source", "/dev/full")
    assert r.exit_code == 2 and "Traceback" not in r.output
    said = json.loads(r.stdout.strip().splitlines()[-1])["error"]
    assert said.startswith("cannot write the --source file '/dev/full': No space left on device; the trials are stored")
