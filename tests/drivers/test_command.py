"""tune_command: the user's own program, run once per configuration without a shell, as the objective."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from sqlalchemy import select

from autotune.db import open_database, queries
from autotune.db.models import TrialRow
from autotune.drivers.command import tune_command
from autotune.errors import UsageError
from autotune.runners.command import CommandRunner, substitute
from autotune.runners.processes import process_alive
from autotune.search_spaces.space_file import Objective
from autotune.types import Candidate, Status, Task

BENCH = r'''
import sys, time
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
a, b = int(args["--a"]), args["--b"]
print("argv", sys.argv[1:], flush=True)
planted = args.get("--plant") == "1"
if planted and a == 3:
    print("planted failure at a=3", file=sys.stderr)
    sys.exit(1)
if planted and a == 5 and b == "y":
    time.sleep(60)
if planted and a == 6:
    print("no number here")
    sys.exit(0)
time.sleep(float(args.get("--sleep", 0)))
print(f"time: {abs(a - 4) * 10 + (5 if b == 'x' else 0) + 2}")  # milliseconds; best: a=4, b=y (2 ms)
'''

SPACE = """\
name: bench
knobs:
  a: {range: [0, 7]}
  b: [x, y]
objective: {regex: "time: ([0-9.eE+-]+)", scale: 1e-3}
"""


@pytest.fixture
def bench(tmp_path):
    (tmp_path / "bench.py").write_text(BENCH)
    (tmp_path / "space.yaml").write_text(SPACE)
    return tmp_path


def _argv(tmp_path, *extra):
    return [sys.executable, str(tmp_path / "bench.py"), "--a", "{a}", "--b", "{b}", *extra]


def _by_config(url, campaign):
    df = queries.trials(open_database(url), campaign=campaign)
    return {(c["a"], c["b"]): row for c, row in zip(df["config"], df.to_dict("records"))}


def test_finds_the_best_and_records_failures_with_the_output_tail(bench):
    url = f"sqlite:///{bench / 't.db'}"
    res = tune_command(_argv(bench, "--plant", "1"), bench / "space.yaml", campaign="c", db=url, algorithm="grid",
                       cost_model=None, timeout_s=2.0)
    assert res.status == "exhausted" and res.trials == 16
    assert res.best.candidate.payload == {"a": 4, "b": "y"} and res.best.cost == pytest.approx(0.002)
    rows = _by_config(url, "c")
    assert rows[(0, "x")]["status"] == "OK" and rows[(0, "x")]["cost"] == pytest.approx(0.047)
    failed = rows[(3, "x")]
    assert failed["status"] == "RUNTIME_ERROR" and "exit status 1" in failed["error"]
    assert "planted failure at a=3" in failed["error"]  # the stderr tail
    hung = rows[(5, "y")]
    assert hung["status"] == "TIMEOUT" and "2 s" in hung["error"] and "argv" in hung["error"]
    unparsable = rows[(6, "x")]
    assert unparsable["status"] == "RUNTIME_ERROR" and "no match" in unparsable["error"]
    assert "no number here" in unparsable["error"]
    assert res.errors == 2 + 1 + 2  # a=3 and a=6 with both b, and the hang
    assert res.task.kind == "command" and res.device.name == "program"


def test_values_reach_the_program_literally_without_a_shell(tmp_path):
    (tmp_path / "echo.py").write_text("import sys, json\nprint(json.dumps(sys.argv[1:]))\nprint('time: 1')\n")
    hostile = ["; rm -rf ~", "$(touch pwned)", "`touch pwned`", "a b  c", "*", "'\"", "x > pwned"]
    (tmp_path / "s.json").write_text(json.dumps({"knobs": {"v": hostile}, "objective": {"regex": "time: (\\d+)"}}))
    url = f"sqlite:///{tmp_path / 't.db'}"
    tune_command([sys.executable, str(tmp_path / "echo.py"), "{v}", "pre-{v}-post"], tmp_path / "s.json",
                 campaign="h", db=url, algorithm="grid", cost_model=None)
    df = queries.trials(open_database(url), campaign="h")
    assert (df["status"] == "OK").all() and len(df) == len(hostile)
    runner = CommandRunner([sys.executable, str(tmp_path / "echo.py"), "{v}", "pre-{v}-post"],
                           Objective("time: (\\d+)"), knobs=["v"])
    for value in hostile:
        assert runner.command({"v": value})[2:] == [value, f"pre-{value}-post"]
    assert not (tmp_path / "pwned").exists() and not os.path.exists("pwned")


def test_wall_time_objective_and_format_specs(tmp_path):
    (tmp_path / "s.yaml").write_text("knobs:\n  t: [0.05, 0.3]\nobjective: {wall_time: true}\n")
    url = f"sqlite:///{tmp_path / 't.db'}"
    res = tune_command([sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1]))", "{t:.2f}"],
                       tmp_path / "s.yaml", campaign="w", db=url, algorithm="grid", cost_model=None)
    costs = {c["t"]: cost for c, cost in zip(*(queries.trials(open_database(url), campaign="w")[k]
                                              for k in ("config", "cost")))}
    # the wall time includes the program's start, which a loaded machine can make long: only lower bounds and order
    assert costs[0.05] >= 0.05 and costs[0.3] >= 0.3 and costs[0.3] > costs[0.05]
    assert res.best.candidate.payload == {"t": 0.05}
    assert substitute("{t:.2f}|{{t}}|{t!r}", {"t": 0.5}) == "0.50|{t}|0.5"


def test_standard_output_is_read_before_standard_error(tmp_path):
    (tmp_path / "s.yaml").write_text('knobs:\n  t: [1, 2, 3]\nobjective: {regex: "time: ([0-9.]+)"}\n')
    program = ("import sys; t = sys.argv[1]; print(f'time: 0.{t}'); print('warning: time: 99', file=sys.stderr);"
               " sys.exit(0)")
    url = f"sqlite:///{tmp_path / 't.db'}"
    tune_command([sys.executable, "-c", program, "{t}"], tmp_path / "s.yaml", campaign="o", db=url, algorithm="grid",
                 cost_model=None)
    costs = sorted(queries.trials(open_database(url), campaign="o")["cost"])
    assert costs == [0.1, 0.2, 0.3]  # stdout's numbers, not the warning's 99
    only_stderr = "import sys; print('time: 0.5', file=sys.stderr)"
    tune_command([sys.executable, "-c", only_stderr, "{t}"], tmp_path / "s.yaml", campaign="e", db=url,
                 algorithm="grid", cost_model=None)
    assert set(queries.trials(open_database(url), campaign="e")["cost"]) == {0.5}  # stderr when stdout has none


def test_usage_errors_before_the_campaign_opens(bench):
    url = f"sqlite:///{bench / 't.db'}"
    space = bench / "space.yaml"
    with pytest.raises(UsageError, match="'/nonexistent/bench' does not exist"):
        tune_command(["/nonexistent/bench", "{a}"], space, db=url)
    with pytest.raises(UsageError, match="was not found on PATH"):
        tune_command(["no-such-program-xyz", "{a}"], space, db=url)
    with pytest.raises(UsageError, match="is not executable"):
        tune_command([str(bench / "bench.py"), "{a}"], space, db=url)
    with pytest.raises(UsageError, match=r"\{blok\}.*knobs: a, b"):
        tune_command([sys.executable, "bench.py", "--a", "{a}", "--b", "{blok}"], space, db=url)
    with pytest.raises(UsageError, match="placeholder"):
        tune_command([sys.executable, "{a.__class__}"], space, db=url)
    with pytest.raises(UsageError, match=r"not a valid template .* and \{\{ or \}\} for a literal brace$"):
        tune_command([sys.executable, "{a"], space, db=url)
    with pytest.raises(UsageError, match="argv must be a list .* not one string"):
        tune_command(f"{sys.executable} bench.py --a {{a}}", space, db=url)
    with pytest.raises(UsageError, match="timeout"):
        tune_command(_argv(bench), space, db=url, timeout_s=-1)
    with pytest.raises(UsageError, match="empty"):
        tune_command([], space, db=url)
    assert not (bench / "t.db").exists()


def test_a_format_spec_that_cannot_write_a_knobs_value_is_refused_before_the_campaign_opens(bench):
    """{b:.3f} with b a knob of strings would make every trial INVALID: refused up front, naming both."""
    url = f"sqlite:///{bench / 'f.db'}"
    space = bench / "space.yaml"  # a: 0..7, b: [x, y]
    with pytest.raises(UsageError, match=r"placeholder \{b:\.3f\} .* value 'x' \(str\) of the knob 'b': "
                                         r"Unknown format code 'f'"):
        tune_command([sys.executable, str(bench / "bench.py"), "--a", "{a}", "--b", "{b:.3f}"], space, db=url)
    with pytest.raises(UsageError, match=r"placeholder \{a!z\}.*conversion"):
        tune_command([sys.executable, str(bench / "bench.py"), "--a", "{a!z}", "--b", "{b}"], space, db=url)
    assert not (bench / "f.db").exists()
    # specs that suit every value are accepted and applied
    res = tune_command([sys.executable, str(bench / "bench.py"), "--a", "{a:d}", "--b", "{b!s:>1}"], space,
                       campaign="f", db=url, trials=3, cost_model=None)
    assert res.trials == 3 and res.errors == 0
    assert substitute("{b!r:>5}|{a:03d}", {"a": 7, "b": "x"}) == "  'x'|007"


def test_runner_kills_the_programs_process_group(tmp_path):
    """A program that starts a background child: the child dies when the program's run ends."""
    pidfile = tmp_path / "child.pid"
    code = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            f"open({str(pidfile)!r}, 'w').write(str(p.pid)); print('time: 1')")
    runner = CommandRunner([sys.executable, "-c", code], Objective("time: (\\d+)"))
    [m] = runner.measure(Task("command", "bg"), [Candidate({})])
    assert m.status is Status.OK
    child = int(pidfile.read_text())
    for _ in range(500):  # up to 10 s on a loaded machine; a killed child not yet reaped (a zombie) is dead
        if not process_alive(child):
            break
        time.sleep(0.02)
    else:
        pytest.fail("the program's background child outlived its run")


def test_time_budget_holds_within_one_run_not_one_batch(bench):
    """Runs of at least 0.5 s in batches of 8 (4 s a batch) under a 3 s budget: no run starts past it, so the
    budget ends the first batch before its 8th run, and every finished run is stored. The budget leaves the
    campaign's start-up (the database, the first program's interpreter) a second or two on a loaded machine."""
    url = f"sqlite:///{bench / 'tb.db'}"
    budget = 3.0
    t0 = time.perf_counter()
    res = tune_command(_argv(bench, "--sleep", "0.5"), bench / "space.yaml", campaign="tb", time_budget=budget, batch=8,
                       cost_model=None, db=url)
    elapsed = time.perf_counter() - t0
    assert res.status == "time-budget" and 1 <= res.trials <= budget / 0.5, res.trials  # starts at most every 0.5 s
    assert elapsed < budget + 0.5 + 3.0  # it ends with the run in flight at the budget, beside start-up and close
    assert len(queries.trials(open_database(url), campaign="tb")) == res.trials


# a program that starts three processes and notes their pids: a background child (in its group), a child
# that calls setsid (out of the group), and a daemon (double fork, setsid: re-parented away from the program)
SPAWNER = r"""
import os, subprocess, sys, time
notes = sys.argv[1]
bg = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
own = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(60)"])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(notes + ".daemon", "w") as f:
            f.write(str(os.getpid()))
        time.sleep(60)
    os._exit(0)
while not os.path.exists(notes + ".daemon"):
    time.sleep(0.01)
with open(notes, "w") as f:
    f.write("%d %d %s" % (bg.pid, own.pid, open(notes + ".daemon").read()))
sys.stdout.write("time: 1\n")
sys.stdout.flush()
time.sleep(float(sys.argv[2]))
"""


def _spawned(notes, seconds=30.0) -> list[int]:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if notes.exists() and len(notes.read_text().split()) == 3:
            return [int(p) for p in notes.read_text().split()]
        time.sleep(0.02)
    pytest.fail("the program did not start its processes")


def _all_dead(pids, seconds=10.0) -> list[int]:
    deadline = time.time() + seconds
    while time.time() < deadline and any(process_alive(p) for p in pids):
        time.sleep(0.02)
    return [p for p in pids if process_alive(p)]


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the launcher's subreaper is Linux-only")


@linux_only
@pytest.mark.parametrize("sleep, status", [("0", Status.OK), ("60", Status.TIMEOUT)])
def test_no_process_of_a_run_outlives_it_not_even_after_setsid(tmp_path, sleep, status):
    """When the program exits, and when it times out, its children die: in its group, after setsid, a daemon."""
    (tmp_path / "spawner.py").write_text(SPAWNER)
    notes = tmp_path / "pids"
    runner = CommandRunner([sys.executable, str(tmp_path / "spawner.py"), str(notes), sleep], Objective("time: (\\d+)"),
                           timeout_s=None if status is Status.OK else 5)
    [m] = runner.measure(Task("command", "spawner"), [Candidate({})])
    assert m.status is status, m.error
    assert _all_dead(_spawned(notes)) == []


INTERRUPT_SCRIPT = """
import sys
from autotune.runners.command import CommandRunner
from autotune.types import Candidate, Task
CommandRunner([sys.executable, sys.argv[1], sys.argv[2], "60"]).measure(Task("command", "spawner"), [Candidate({})])
"""


@linux_only
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "sigkill"])
def test_no_process_of_a_run_outlives_autotune_interrupted_or_killed(tmp_path, sig):
    """Ctrl-C while the program runs (KeyboardInterrupt), or autotune killed outright: its processes go too."""
    (tmp_path / "spawner.py").write_text(SPAWNER)
    notes = tmp_path / "pids"
    proc = subprocess.Popen([sys.executable, "-c", INTERRUPT_SCRIPT, str(tmp_path / "spawner.py"), str(notes)],
                            stderr=subprocess.PIPE, text=True)
    try:
        pids = _spawned(notes)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in err
    assert _all_dead(pids) == []


KILL_SCRIPT = '''
import sys
from autotune.drivers.command import tune_command
tune_command(sys.argv[3:], sys.argv[2], campaign="k", db=sys.argv[1], trials=21, algorithm="evolutionary",
             cost_model=None, batch=3, seed=5)
'''


def test_sigkill_mid_campaign_then_resume_reaches_the_budget_without_duplicates(bench):
    url, trials = f"sqlite:///{bench / 'k.db'}", 21
    (bench / "space.yaml").write_text(SPACE.replace("[0, 7]", "[0, 20]"))  # 42 points
    argv = [sys.executable, str(bench / "bench.py"), "--a", "{a}", "--b", "{b}", "--sleep", "0.05"]
    db = open_database(url)
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, url, str(bench / "space.yaml"), *argv], cwd=bench)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and db.count_trials() < trials // 3:
        time.sleep(0.02)
    assert proc.poll() is None, "the campaign ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    camp = db.campaign("k")

    def keys():
        with db.session() as s:
            return s.scalars(select(TrialRow.candidate_key).where(TrialRow.campaign_id == camp.id)
                             .order_by(TrialRow.id)).all()

    committed = keys()
    assert trials // 3 <= len(committed) < trials
    res = tune_command(argv, bench / "space.yaml", campaign="k", db=url, trials=trials, algorithm="evolutionary",
                       cost_model=None, batch=3, seed=5)
    after = keys()
    assert res.resumed and res.trials == trials
    assert after[:len(committed)] == committed and len(after) == len(set(after)) == trials


def test_another_worker_joins_a_command_campaign_from_its_recipe(bench, monkeypatch):
    """`autotune worker` runs the same program over the same space file, from any working directory."""
    from autotune.drivers.scale import join_campaign

    url = f"sqlite:///{bench / 'join.db'}"
    first = tune_command(_argv(bench), bench / "space.yaml", campaign="joined", trials=6, db=url, seed=1)
    recipe = open_database(url).campaign("joined").options["recipe"]
    assert recipe["kind"] == "command" and recipe["args"]["space_file"] == str(bench / "space.yaml")
    monkeypatch.chdir(bench.parent)
    out = join_campaign("joined", url)  # the budget is met: the worker stops at once, measuring nothing
    assert first.trials == out["trials"] == 6 and out["measured_here"] == 0
