"""`autotune tune command` and `autotune space check` on the command line: results, JSON output,
exit status 2 with one sentence on bad input."""

from __future__ import annotations

import json
import re
import sys

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import open_database, queries

cli = CliRunner()

BENCH = r'''
import sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
block, unroll = int(args["--block"]), int(args["--unroll"])
if block == 64 and unroll == 4:
    sys.exit("planted: this configuration fails")
print(f"kernel took time: {abs(block - 32) / 8 + abs(unroll - 2) + 1.5} ms")
'''

SPACE = """\
name: bench
knobs:
  block: {pow2: [8, 64]}
  unroll: [1, 2, 4]
constraints:
  - block * unroll <= 128
objective:
  regex: "time: ([0-9.]+) ms"
  scale: 1e-3
"""


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bench.py").write_text(BENCH)
    (tmp_path / "space.yaml").write_text(SPACE)
    return tmp_path


def _last_json(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


def _one_sentence_error(r) -> str:
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = [line for line in r.output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    return lines[0]


def test_tune_command_finds_the_best_and_prints_json(files):
    url = f"sqlite:///{files / 't.db'}"
    r = cli.invoke(app, ["tune", "command", "--space", "space.yaml", "--db", url, "--json", "--no-progress",
                         "--algorithm", "grid", "--cost-model", "none", "--campaign", "cli",
                         "--", sys.executable, "bench.py", "--block", "{block}", "--unroll", "{unroll}"])
    assert r.exit_code == 0, r.output
    out = _last_json(r.output)
    # 4 blocks x 3 unrolls, minus 64x4 (> 128): 11 points; the best is block 32, unroll 2: 1.5 ms
    assert out["trials"] == 11 and out["status"] == "exhausted" and out["device"] == "program"
    assert out["best_config"] == {"block": 32, "unroll": 2} and out["best_cost"] == pytest.approx(0.0015)
    df = queries.trials(open_database(url), campaign="cli")
    assert len(df) == 11 and (df["status"] == "OK").all()


def test_a_failing_configuration_is_a_trial_with_the_stderr_tail(files):
    (files / "space.yaml").write_text(SPACE.replace("block * unroll <= 128", "block * unroll <= 256"))
    url = f"sqlite:///{files / 't.db'}"
    r = cli.invoke(app, ["tune", "command", "--space", "space.yaml", "--db", url, "--json", "--no-progress",
                         "--algorithm", "grid", "--cost-model", "none", "--campaign", "f",
                         "--", sys.executable, "bench.py", "--block", "{block}", "--unroll", "{unroll}"])
    assert r.exit_code == 0, r.output
    df = queries.trials(open_database(url), campaign="f")
    failed = df[df["status"] != "OK"]
    assert len(df) == 12 and len(failed) == 1 and failed["config"].iloc[0] == {"block": 64, "unroll": 4}
    assert failed["status"].iloc[0] == "RUNTIME_ERROR" and "planted: this configuration fails" in failed["error"].iloc[0]


def test_a_hanging_program_is_a_timeout_trial(files):
    (files / "hang.py").write_text("import sys, time\nif sys.argv[1] == '2': time.sleep(60)\nprint('time: 1 ms')\n")
    url = f"sqlite:///{files / 't.db'}"
    r = cli.invoke(app, ["tune", "command", "--space", "space.yaml", "--db", url, "--json", "--no-progress",
                         "--algorithm", "grid", "--cost-model", "none", "--campaign", "h", "--trials", "3",
                         "--timeout", "1", "--", sys.executable, "hang.py", "{unroll}"])
    assert r.exit_code == 0, r.output
    df = queries.trials(open_database(url), campaign="h")
    statuses = {c["unroll"]: s for c, s in zip(df["config"], df["status"])}
    assert statuses == {1: "OK", 2: "TIMEOUT", 4: "OK"}


def test_arguments_reach_the_program_literally(files):
    (files / "echo.py").write_text("import sys\nopen('seen.txt', 'w').write(sys.argv[1])\nprint('time: 1 ms')\n")
    (files / "s.yaml").write_text('knobs:\n  v: ["; rm -rf seen.txt", "$(touch pwned)"]\n'
                                  'objective: {regex: "time: ([0-9.]+) ms"}\n')
    url = f"sqlite:///{files / 't.db'}"
    r = cli.invoke(app, ["tune", "command", "--space", "s.yaml", "--db", url, "--json", "--no-progress",
                         "--algorithm", "grid", "--cost-model", "none", "--", sys.executable, "echo.py", "{v}"])
    assert r.exit_code == 0 and _last_json(r.output)["trials"] == 2, r.output
    assert (files / "seen.txt").read_text() in ("; rm -rf seen.txt", "$(touch pwned)")
    assert not (files / "pwned").exists()


@pytest.mark.parametrize("command, expected", [
    (["./no-such-bench", "{block}"], "does not exist"),
    (["no-such-program-xyz", "{block}"], "not found on PATH"),
    (["bench.py", "{block}"], "not found on PATH"),
    (["./bench.py", "{block}"], "not executable"),
    ([sys.executable, "bench.py", "--block", "{blok}"], "{blok}"),
    ([], "command is empty"),
], ids=["missing-path", "missing-on-path", "bare-name", "not-executable", "unknown-placeholder", "no-command"])
def test_bad_commands_exit_2_before_anything_runs(files, command, expected):
    url = f"sqlite:///{files / 't.db'}"
    args = ["tune", "command", "--space", "space.yaml", "--db", url, "--no-progress"]
    r = cli.invoke(app, args + (["--", *command] if command else []))
    if command:
        assert expected in _one_sentence_error(r)
    else:  # typer's own usage message for a missing argument
        assert r.exit_code == 2
    assert not (files / "t.db").exists()


def test_bad_space_file_and_options_exit_2(files):
    (files / "bad.yaml").write_text("knobs: {x: []}\n")
    for args, expected in [(["--space", "bad.yaml"], "no values"), (["--space", "missing.yaml"], "does not exist"),
                           (["--space", "space.yaml", "--timeout", "0"], "timeout"),
                           (["--space", "space.yaml", "--algorithm", "nope"], "nope")]:
        r = cli.invoke(app, ["tune", "command", *args, "--db", f"sqlite:///{files / 't.db'}", "--",
                             sys.executable, "bench.py", "--block", "{block}", "--unroll", "{unroll}"])
        assert expected in _one_sentence_error(r)


def test_space_check_prints_the_size_knobs_and_constraints(files):
    r = cli.invoke(app, ["space", "check", "space.yaml"])
    assert r.exit_code == 0, r.output
    assert "11 valid points of 12 combinations" in r.output
    assert "block: 8, 16, 32, 64" in r.output and "block * unroll <= 128" in r.output
    r = cli.invoke(app, ["space", "check", "space.yaml", "--json"])
    info = _last_json(r.output)
    assert info["size"] == 11 and info["knobs"] == {"block": [8, 16, 32, 64], "unroll": [1, 2, 4]}
    assert info["constraints"] == ["block * unroll <= 128"] and info["objective"]["scale"] == 0.001


def test_space_check_summarises_a_long_knob_and_lists_every_value_on_request(files):
    """A 100,000-value range is its first values, count, min, max and step, in the text and in the JSON;
    a short knob is its list; --all-values gives every value."""
    (files / "long.yaml").write_text("knobs:\n  n: {range: [0, 99999]}\n  p: {pow2: [1, 65536]}\n"
                                     "  w: [a, b, c, d, e, f, g, h, i, j, k, l, m]\n  mode: [x, y]\n"
                                     "constraints:\n  - n < 3\n")  # counted at once
    r = cli.invoke(app, ["space", "check", "long.yaml", "--json"])
    assert r.exit_code == 0, r.output
    assert len(r.output) < 2000
    knobs = _last_json(r.output)["knobs"]
    assert knobs["n"] == {"count": 100000, "first": list(range(12)), "min": 0, "max": 99999, "step": 1}
    assert knobs["p"] == {"count": 17, "first": [2 ** i for i in range(12)], "min": 1, "max": 65536}  # no step
    assert knobs["w"] == {"count": 13, "first": list("abcdefghijkl")}
    assert knobs["mode"] == ["x", "y"]
    text = cli.invoke(app, ["space", "check", "long.yaml"]).output
    assert "  n: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, ... (100,000 values, min 0, max 99999, step 1)\n" in text
    assert "  mode: x, y\n" in text and len(text) < 2000
    every = _last_json(cli.invoke(app, ["space", "check", "long.yaml", "--json", "--all-values"]).output)["knobs"]
    assert every["n"] == list(range(100000)) and every["mode"] == ["x", "y"]
    assert "99998, 99999\n" in cli.invoke(app, ["space", "check", "long.yaml", "--all-values"]).output


HUGE = "knobs:\n  x: {range: [1, 99999]}\n  y: {range: [1, 99999]}\nconstraints:\n  - %s\n"


def test_space_check_answers_in_bounded_time_on_a_tight_constraint_over_huge_ranges(files, monkeypatch):
    """10^10 combinations: no valid one among random ones is refused, a loose constraint is estimated."""
    monkeypatch.setattr("autotune.search_spaces.knobs.CHECK_LIMIT", 500_000)
    (files / "tight.yaml").write_text(HUGE % "x * y == 7")
    error = _one_sentence_error(cli.invoke(app, ["space", "check", "tight.yaml"]))
    assert "9,999,800,001 combinations" in error and "too many to check" in error and "narrow" in error
    (files / "loose.yaml").write_text(HUGE % "x % 7 == y % 7")
    r = cli.invoke(app, ["space", "check", "loose.yaml"])
    assert r.exit_code == 0, r.output
    assert re.search(r"about [0-9,]+ valid points of 9,999,800,001 combinations", r.output), r.output
    r = cli.invoke(app, ["space", "check", "loose.yaml", "--json"])
    info = _last_json(r.output)
    assert info["size"] is None and abs(info["estimated_size"] / info["combinations"] - 1 / 7) < 0.01


@pytest.mark.parametrize("text, expected", [
    ("knobs: {x: []}\n", "no values"),
    ("knobs: {x: [1]}\nconstraint: [x > 0]\n", "did you mean 'constraints'"),
    ("knobs: {x: [1]}\nconstraints: [y > 0]\n", "unknown name"),
    ("knobs: {x: [1, 2]}\nconstraints: [x > 5]\n", "no valid point"),
    ("knobs: [1, 2\n", "not valid YAML"),
])
def test_space_check_exits_2_on_bad_files(files, text, expected):
    (files / "bad.yaml").write_text(text)
    assert expected in _one_sentence_error(cli.invoke(app, ["space", "check", "bad.yaml"]))
    assert "does not exist" in _one_sentence_error(cli.invoke(app, ["space", "check", "missing.yaml"]))


def test_retry_failed_runs_a_crashed_configuration_again_and_its_resume_keeps_the_switch(files):
    """Configurations that crashed once (here: while a file says so) are looked up as failed by the next
    campaign, and run again by one with --retry-failed, whose resume command and recipe keep the switch."""
    (files / "flaky.py").write_text("import os, sys\nif os.path.exists('down') and sys.argv[1] == '2':\n"
                                    "    sys.exit('device busy')\nprint(f'time: {sys.argv[1]} ms')\n")
    (files / "down").write_text("")
    url = f"sqlite:///{files / 't.db'}"
    base = ["tune", "command", "--space", "space.yaml", "--db", url, "--json", "--no-progress", "--algorithm", "grid",
            "--cost-model", "none", "--trials", "11"]  # the whole space: 4 blocks x 3 unrolls, but 64 x 4
    program = ["--", sys.executable, "flaky.py", "{unroll}"]
    assert cli.invoke(app, [*base, "--campaign", "first", *program]).exit_code == 0
    (files / "down").unlink()
    r = cli.invoke(app, [*base, "--campaign", "looked-up", *program])
    assert r.exit_code == 0 and _last_json(r.output)["measured_here"] == 0, r.output
    r = cli.invoke(app, [*base, "--campaign", "again", "--retry-failed", *program])
    assert r.exit_code == 0 and _last_json(r.output)["measured_here"] == 4, r.output
    db = open_database(url)
    df = queries.trials(db, campaign="again")
    retried = df[[c["unroll"] == 2 for c in df["config"]]]
    assert len(retried) == 4 and (retried["status"] == "OK").all()
    assert (queries.trials(db, campaign="first")["status"] == "OK").all()  # the failures were written over
    from autotune.campaign import resume_command

    recipe = db.campaign("again").options["recipe"]
    assert recipe["args"]["retry_failed"] is True
    assert " --retry-failed " in resume_command("again", recipe, db)
