"""Bad input to a benchmark script is one line on stderr and exit status 2, as in the CLI, not a
traceback (autotune.errors.run_script is every script's entry point)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autotune.errors import UsageError, run_script

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def test_run_script_exits_with_main_s_status_and_turns_a_usage_error_into_one_line(capsys):
    with pytest.raises(SystemExit) as done:
        run_script(lambda: 3)
    assert done.value.code == 3

    def bad():
        raise UsageError("cache file 'x.json' does not exist")
    with pytest.raises(SystemExit) as done:
        run_script(bad)
    assert done.value.code == 2
    assert capsys.readouterr().err == "error: cache file 'x.json' does not exist\n"


def test_a_bug_still_shows_its_traceback():
    def bug():
        raise KeyError("x")
    with pytest.raises(KeyError):
        run_script(bug)


@pytest.mark.parametrize("args", [["bench_search.py", "--cache", "missing.json.gz", "--seeds", "1"],
                                  ["trace_runs.py", "search", "missing.json.gz", "--seeds", "1"],
                                  ["transfer_noise_floor.py", "--cache", "missing.json.gz", "--seeds", "1", "--pool", "2"]])
def test_a_script_given_a_missing_cache_names_it_without_a_traceback(args, tmp_path):
    run = subprocess.run([sys.executable, str(SCRIPTS / args[0]), *args[1:]], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert run.stderr.startswith("error: cache file 'missing.json.gz' does not exist")
