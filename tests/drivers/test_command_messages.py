"""What a failed run of the user's program says in its trial's error column, and what the command line says
about a mistyped option before the program (runners/command.py, autotune/cli/tune_command.py)."""

from __future__ import annotations

import sys

from autotune.runners.command import CommandRunner
from autotune.search_spaces.space_file import Objective
from autotune.types import Candidate, Status, Task


def _error(code: str) -> str:
    runner = CommandRunner([sys.executable, "-c", code], Objective("time: (\\d+)"))
    try:
        [m] = runner.measure(Task("command", "messages"), [Candidate({})])
    finally:
        runner.close()
    assert m.status is Status.RUNTIME_ERROR
    return m.error


def test_a_program_killed_by_a_signal_and_one_that_exits_non_zero_are_worded_as_such():
    assert _error("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)").startswith(
        "the program was killed by SIGSEGV")
    assert _error("import sys; sys.exit(3)").startswith("the program ended with exit status 3")


def test_a_mistyped_option_before_the_program_is_refused_with_the_closest_option(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from autotune.cli.main import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "space.yaml").write_text("knobs: {x: [1, 2]}\n")
    r = CliRunner().invoke(app, ["tune", "command", "--space", "space.yaml", "--trails", "3", "--", sys.executable,
                                 "-c", "pass", "{x}"])
    assert r.exit_code == 2, r.output
    assert "'--trails' is not an option of tune command (did you mean '--trials'" in r.output
    assert not (tmp_path / "autotune.db").exists()


def test_a_cost_printed_before_more_output_than_is_read_is_said_to_be_out_of_reach(monkeypatch):
    import autotune.runners.command as command

    monkeypatch.setattr(command, "MAX_OUTPUT_BYTES", 1 << 20)
    error = _error("import sys; print('time: 5'); sys.stdout.write('x' * (3 << 19)); sys.exit(0)")
    assert error.startswith("no match of the objective regex 'time: (\\\\d+)' in the last 1 MiB of each of the "
                            "program's outputs (only their ends are read: print the cost after the rest)")
    assert _ok("import sys; sys.stdout.write('x' * (3 << 19)); print('\\ntime: 5')") == 5.0


def _ok(code: str) -> float:
    runner = CommandRunner([sys.executable, "-c", code], Objective("time: (\\d+)"))
    try:
        [m] = runner.measure(Task("command", "messages"), [Candidate({})])
    finally:
        runner.close()
    assert m.status is Status.OK, m.error[:300]
    return m.cost
