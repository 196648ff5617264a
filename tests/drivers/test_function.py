"""autotune.minimize: the user's own Python function as the objective of a logged, resumable campaign."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from sqlalchemy import select

from autotune.db import open_database, queries
from autotune.db.models import TrialRow
from autotune.drivers.function import minimize
from autotune.errors import UsageError
from autotune.runners.function import FunctionRunner
from autotune.types import Candidate, Measurement, Status, Task

KNOBS = {"x": list(range(10)), "y": [1, 2, 4, 8, 16]}


def bowl(config: dict) -> float:
    """A known landscape over KNOBS: the minimum 0.5 is at x=6, y=4."""
    return (config["x"] - 6) ** 2 + abs(config["y"] - 4) / 4 + 0.5


def _keys(db, campaign: str) -> list[str]:
    camp = db.campaign(campaign)
    with db.session() as s:
        return s.scalars(select(TrialRow.candidate_key).where(TrialRow.campaign_id == camp.id)
                         .order_by(TrialRow.id)).all()


def test_minimize_finds_the_optimum_and_logs_every_trial(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    res = minimize(bowl, KNOBS, trials=30, db=url, campaign="bowl", seed=3)
    all_costs = sorted(bowl({"x": x, "y": y}) for x in KNOBS["x"] for y in KNOBS["y"])
    assert res.trials == 30 and res.status == "finished" and res.device.name == "python-function"
    assert res.best.cost == all_costs[0] and res.best.candidate.payload == {"x": 6, "y": 4}
    df = queries.trials(open_database(url), campaign="bowl")
    assert len(df) == 30 and df["candidate_key"].is_unique and (df["status"] == "OK").all()
    assert all(cost == bowl(cfg) for cfg, cost in zip(df["config"], df["cost"]))
    assert res.task.kind == "function" and res.task.name.endswith("bowl")
    # the same call again resumes the campaign: nothing is evaluated twice
    again = minimize(bowl, KNOBS, trials=30, db=url, campaign="bowl", seed=3)
    assert again.resumed and again.trials == 30 and again.measured_here == 0


def test_a_finite_space_without_budget_is_exhausted_and_the_default_name_tells_spaces_apart(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    small = {"x": [4, 5, 6, 7], "y": [4]}
    res = minimize(bowl, small, db=url, cost_model=None, algorithm="grid")
    assert res.status == "exhausted" and res.trials == 4 and res.best.candidate.payload == {"x": 6, "y": 4}
    other = minimize(bowl, {"x": [5, 6], "y": [4, 8]}, db=url, cost_model=None, algorithm="grid")
    assert other.campaign != res.campaign and other.task.key != res.task.key and other.trials == 4


def test_another_function_is_not_mixed_into_a_campaign(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    minimize(bowl, KNOBS, trials=5, db=url, campaign="c", cost_model=None, algorithm="random")

    def other(config):
        return 1.0

    with pytest.raises(UsageError):
        minimize(other, KNOBS, trials=5, db=url, campaign="c", cost_model=None, algorithm="random")


def test_lambdas_and_closures_are_told_apart_by_their_code(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    space = {"a": [1, 2, 3]}
    first = minimize(lambda c: c["a"], space, db=url, algorithm="grid", cost_model=None)
    second = minimize(lambda c: 10 - c["a"], space, db=url, algorithm="grid", cost_model=None)
    assert first.best.candidate.payload == {"a": 1} and second.best.candidate.payload == {"a": 3}
    assert second.trials == 3 and first.task.key != second.task.key  # measured, not looked up

    def distance_to(k):
        return lambda c: abs(c["a"] - k)

    near = [minimize(distance_to(k), space, db=url, algorithm="grid", cost_model=None) for k in (2, 3, 3)]
    assert [r.best.candidate.payload["a"] for r in near] == [2, 3, 3]
    assert near[2].task.key == near[1].task.key and near[2].resumed and near[2].measured_here == 0
    assert "code" in first.task.params and "code" not in minimize(bowl, KNOBS, trials=1, db=url).task.params
    from autotune.search_spaces.knobs import KnobSpace

    above, below = (minimize(bowl, KnobSpace(KNOBS, constraints=[c]), db=url, algorithm="grid", cost_model=None)
                    for c in (lambda c: c["x"] > 6, lambda c: c["x"] < 6))
    assert above.task.key != below.task.key and above.best.candidate.payload["x"] == 7
    assert below.best.candidate.payload["x"] == 5  # measured under its own constraint, nothing looked up


def planted(config: dict) -> float:
    if config["x"] == 2:
        raise ValueError("planted failure at x=2")
    if config["x"] == 3:
        return float("nan")
    if config["x"] == 4:
        return "fast"  # not a number
    if config["x"] == 5:
        return Measurement(Candidate({}), Status.OK, times=[0.25, 0.75, 0.5])  # cost: the median
    return float(config["x"] + 1)


def test_errors_are_failed_trials_and_the_campaign_goes_on(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    res = minimize(planted, {"x": list(range(8))}, db=url, campaign="p", algorithm="grid", cost_model=None)
    assert res.trials == 8 and res.errors == 3 and res.status == "exhausted"
    df = queries.trials(open_database(url), campaign="p").set_index(
        queries.trials(open_database(url), campaign="p")["config"].map(lambda c: c["x"]))
    assert df.loc[2, "status"] == "RUNTIME_ERROR" and df.loc[2, "error"].startswith(
        "ValueError: planted failure at x=2")
    assert df.loc[3, "status"] == "RUNTIME_ERROR" and "nan" in df.loc[3, "error"] and "finite" in df.loc[3, "error"]
    assert df.loc[4, "status"] == "RUNTIME_ERROR" and "'fast'" in df.loc[4, "error"]
    assert df.loc[5, "status"] == "OK" and df.loc[5, "cost"] == 0.5  # a returned Measurement is kept
    assert res.best.cost == 0.5 and (df.loc[[0, 1, 6, 7], "cost"] == [1.0, 2.0, 7.0, 8.0]).all()


@pytest.mark.parametrize("value,needle", [
    (Measurement(Candidate({}), Status.OK, times=[-1.0]), "-1.0"),
    (Measurement(Candidate({}), Status.OK, cost=float("inf")), "inf"),
    (Measurement(Candidate({}), Status.OK, cost=float("nan")), "nan"),
    (Measurement(Candidate({}), Status.OK), "no cost or times"),
    (Measurement(Candidate({}), Status.OK, cost="fast"), "'fast'"),
    (10**400, "a cost must be a finite number"),
])
def test_a_returned_value_that_is_no_cost_is_a_failed_trial(tmp_path, value, needle):
    res = minimize(lambda c: value, {"x": [0, 1]}, db=f"sqlite:///{tmp_path / 'f.db'}", algorithm="grid",
                   cost_model=None)
    assert res.status == "exhausted" and res.trials == 2 and res.errors == 2 and res.best is None
    df = queries.trials(open_database(f"sqlite:///{tmp_path / 'f.db'}"))
    assert (df["status"] == "RUNTIME_ERROR").all() and df["error"].str.contains(needle, regex=False).all()


def test_usage_errors_before_anything_runs(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    with pytest.raises(UsageError, match="isolate=True"):
        minimize(bowl, KNOBS, trials=3, db=url, timeout_s=1.0)  # an in-process call cannot be stopped
    with pytest.raises(UsageError, match="cannot be pickled"):
        minimize(lambda c: 1.0, KNOBS, trials=3, db=url, isolate=True)
    with pytest.raises(UsageError, match="callable"):
        minimize(3, KNOBS, trials=3, db=url)
    with pytest.raises(UsageError, match="KnobSpace, a dict of knobs"):
        minimize(bowl, [1, 2, 3], trials=3, db=url)
    with pytest.raises(UsageError, match="does not exist"):
        minimize(bowl, str(tmp_path / "missing.yaml"), trials=3, db=url)
    assert not (tmp_path / "f.db").exists()


def test_space_file_path_as_space(tmp_path):
    (tmp_path / "s.yaml").write_text("knobs:\n  x: {range: [0, 9]}\n  y: [1, 2, 4, 8, 16]\nconstraints: ['x > 3']\n")
    res = minimize(bowl, str(tmp_path / "s.yaml"), db=f"sqlite:///{tmp_path / 'f.db'}", algorithm="grid",
                   cost_model=None)
    assert res.trials == 30 and res.best.candidate.payload == {"x": 6, "y": 4}


HELPERS = '''
import os
import time


def objective(config):
    if config["x"] == 1:
        time.sleep(60)          # hangs
    if config["x"] == 2:
        os._exit(3)             # dies without a word
    if config["x"] == 3:
        import ctypes
        ctypes.string_at(0)     # segfault
    if config["x"] == 4:
        raise KeyError("planted")
    return config["x"] + 0.5
'''


def test_isolated_objective_hang_crash_and_segfault_are_failed_trials(tmp_path, monkeypatch):
    (tmp_path / "iso_helpers.py").write_text(HELPERS)
    monkeypatch.syspath_prepend(str(tmp_path))  # the worker process gets this sys.path
    import iso_helpers

    url = f"sqlite:///{tmp_path / 'f.db'}"
    t0 = time.perf_counter()
    res = minimize(iso_helpers.objective, {"x": [0, 1, 2, 3, 4, 5]}, db=url, campaign="iso", algorithm="grid",
                   cost_model=None, isolate=True, timeout_s=1.5)
    assert time.perf_counter() - t0 < 30
    df = queries.trials(open_database(url), campaign="iso")
    by_x = {c["x"]: (s, e, cost) for c, s, e, cost in zip(df["config"], df["status"], df["error"], df["cost"])}
    assert by_x[1][0] == "TIMEOUT" and "1.5 s" in by_x[1][1]
    assert by_x[2][0] == "RUNTIME_ERROR" and "status 3" in by_x[2][1]
    assert by_x[3][0] == "RUNTIME_ERROR" and "SIGSEGV" in by_x[3][1]
    assert by_x[4][0] == "RUNTIME_ERROR" and by_x[4][1].startswith("KeyError: 'planted'")
    assert by_x[0][0] == by_x[5][0] == "OK" and by_x[0][2] == 0.5 and res.best.cost == 0.5


def test_isolated_runner_finds_an_objective_of_the_main_script(tmp_path):
    """A script's own function runs isolated (the script is loaded under __mp_main__, its guarded part not run)."""
    script = tmp_path / "my_tuning.py"
    script.write_text(textwrap.dedent(f'''
        import autotune
        print("top level runs in each worker too")

        def objective(config):
            return abs(config["x"] - 2) + 1.0

        if __name__ == "__main__":
            r = autotune.minimize(objective, {{"x": [0, 1, 2, 3]}}, db="sqlite:///{tmp_path / 'm.db'}",
                                  isolate=True, timeout_s=20, algorithm="grid", cost_model=None)
            print("RESULT", r.best.candidate.payload["x"], r.best.cost, r.errors, r.task.name)
    '''))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "RESULT 2 1.0 0 my_tuning.objective" in out.stdout


def test_runner_in_process_never_raises():
    runner = FunctionRunner(planted)
    ms = runner.measure(Task("function", "planted"), [Candidate({"x": x}) for x in (0, 2, 3)])
    assert [m.status for m in ms] == [Status.OK, Status.RUNTIME_ERROR, Status.RUNTIME_ERROR]
    assert runner.device.kind == "cpu" and runner.device.properties["cores"] >= 1


KILL_SCRIPT = '''
import sys, time
from autotune.drivers.function import minimize

def objective(config):
    time.sleep(0.04)
    return (config["x"] - 17) ** 2 + config["y"] + 1.0

if __name__ == "__main__":
    minimize(objective, {"x": list(range(30)), "y": [0, 1, 2, 3]}, trials=int(sys.argv[2]), db=sys.argv[1],
             campaign="k", algorithm="evolutionary", cost_model=None, batch=4, seed=7)
'''


def test_sigkill_mid_campaign_then_resume_reaches_the_budget_without_duplicates(tmp_path, monkeypatch):
    (tmp_path / "killme.py").write_text(KILL_SCRIPT)
    url, trials = f"sqlite:///{tmp_path / 'k.db'}", 36
    db = open_database(url)
    proc = subprocess.Popen([sys.executable, str(tmp_path / "killme.py"), url, str(trials)], cwd=tmp_path)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and db.count_trials() < trials // 3:
        time.sleep(0.02)
    assert proc.poll() is None, "the campaign ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    committed = _keys(db, "k")
    assert trials // 3 <= len(committed) < trials
    monkeypatch.syspath_prepend(str(tmp_path))
    import killme  # the same function (killme.objective): the same task, so the campaign resumes

    res = minimize(killme.objective, {"x": list(range(30)), "y": [0, 1, 2, 3]}, trials=trials, db=url,
                   campaign="k", algorithm="evolutionary", cost_model=None, batch=4, seed=7)
    after = _keys(db, "k")
    assert res.resumed and res.trials == trials
    assert after[:len(committed)] == committed and len(after) == len(set(after)) == trials
