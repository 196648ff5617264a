"""A batch cut short keeps what it measured: Ctrl-C part-way through a batch that a runner measures one candidate
after the other (the function, command and C runners) stores the measurements completed before it, and a runner
that returns too few results has the batch's valid ones stored before its usage error. A script's campaign says
how a script resumes it; the command line's says which command to run."""

from __future__ import annotations

import shutil
import sys

import numpy as np
import pytest
from sqlalchemy import select
from typer.testing import CliRunner

import autotune
from autotune.campaign import Campaign, resume_command
from autotune.db import open_database
from autotune.db.models import TrialRow
from autotune.errors import UsageError
from autotune.runners.base import BatchInterrupted, BatchRunner
from autotune.runners.command import CommandRunner
from autotune.runners.function import FunctionRunner
from autotune.search_spaces.knobs import KnobSpace
from autotune.types import Device, Measurement, Status

SPACE = {"x": list(range(8)), "y": [0, 1, 2]}
CALLS: list[dict] = []
STOP_AT: list[int | None] = [None]


def objective(config):
    """Records each call; Ctrl-C arrives during call number STOP_AT[0] (as it would while f runs)."""
    CALLS.append(dict(config))
    if STOP_AT[0] is not None and len(CALLS) == STOP_AT[0]:
        raise KeyboardInterrupt
    return (config["x"] - 3) ** 2 + config["y"] + 1.0


def _minimize(url: str, stop_at: int | None = None) -> list[dict]:
    """The calls of one ``minimize`` run (the last one interrupted, where ``stop_at``)."""
    CALLS.clear()
    STOP_AT[0] = stop_at
    try:
        autotune.minimize(objective, SPACE, trials=12, batch=4, algorithm="random", cost_model=None, db=url,
                          campaign="m", progress=False)
    finally:
        STOP_AT[0] = None
    return list(CALLS)


def _stored(url: str, name: str) -> list[dict]:
    db = open_database(url)
    try:
        with db.session() as s:
            rows = s.scalars(select(TrialRow).where(TrialRow.campaign_id == db.campaign(name).id)
                             .order_by(TrialRow.id)).all()
            return [dict(r.candidate) for r in rows]
    finally:
        db.close()


def test_minimize_interrupted_mid_batch_stores_the_calls_completed_and_resumes_without_them(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    with pytest.raises(KeyboardInterrupt):
        _minimize(url, stop_at=7)  # a batch of 4 stored, then 2 calls of the second completed and the third cut short
    err = capsys.readouterr().err
    done = CALLS[:6]
    assert sorted(map(str, _stored(url, "m"))) == sorted(map(str, done))
    assert "interrupted: 6 trials stored; resume with: rerun the script, or call it again with the campaign name 'm'" \
        in err and "--campaign" not in err
    again = _minimize(url)
    assert not any(c in done for c in again) and len(again) == 6  # the stored six are not measured again
    # the random search resumed where it was: the trials of an uninterrupted run, in its order
    ref = f"sqlite:///{tmp_path / 'ref.db'}"
    _minimize(ref)
    assert _stored(url, "m") == _stored(ref, "m")


def test_tune_command_interrupted_mid_batch_stores_the_runs_completed(tmp_path, monkeypatch):
    space = tmp_path / "space.yaml"
    space.write_text("knobs:\n  x: [1, 2, 3, 4, 5, 6]\n")
    run, runs = CommandRunner._run, []

    def interrupted_run(self, c, program, argv):  # Ctrl-C while the sixth program runs
        runs.append(c.payload)
        if len(runs) == 6:
            raise KeyboardInterrupt
        return run(self, c, program, argv)

    monkeypatch.setattr(CommandRunner, "_run", interrupted_run)
    url = f"sqlite:///{tmp_path / 'c.db'}"
    with pytest.raises(KeyboardInterrupt):
        autotune.tune_command([sys.executable, "-c", "print({x})"], str(space), campaign="c", trials=6, batch=4,
                              algorithm="random", cost_model=None, db=url, progress=False)
    assert len(_stored(url, "c")) == 5 and sorted(c["x"] for c in _stored(url, "c")) == sorted(r["x"] for r in runs[:5])


def test_a_batch_runner_interrupted_keeps_the_prefix_it_ran(sqlite_url):
    """A runner that prepares a batch (compiles it) and runs its candidates one after the other, as the C
    runners: Ctrl-C in its third run stores the two before it."""

    class Counting(BatchRunner):
        device = Device("counting", "cpu", {})

        def __init__(self):
            self.runs = 0

        def _prepare(self, task, candidates):
            return candidates

        def _run(self, cand, prepared):
            self.runs += 1
            if self.runs == 3:
                raise KeyboardInterrupt
            return Measurement(cand, Status.OK, times=[1.0 + cand.payload["x"]])

    space = KnobSpace({"x": list(range(10))})
    runner = Counting()
    with pytest.raises(KeyboardInterrupt) as exc:
        runner.measure(space.task, list(space.enumerate())[:4])
    assert isinstance(exc.value, BatchInterrupted) and [m.candidate.payload["x"] for m in exc.value.measured] == [0, 1]
    runner.runs = 0
    db = open_database(sqlite_url)
    with pytest.raises(KeyboardInterrupt):
        Campaign("b", space, "grid", runner, db, trials=10, batch=4, progress=False).run()
    assert [c["x"] for c in _stored(sqlite_url, "b")] == [0, 1]
    assert db.campaign("b").status == "interrupted" and db.pending_keys(db.campaign("b").id) == {}


@pytest.mark.skipif(shutil.which("g++") is None, reason="tune_kernel's C kernels are built with g++")
def test_tune_kernel_interrupted_mid_batch_stores_the_configurations_timed(tmp_path, monkeypatch, capsys):
    from autotune.runners.c import UserCRunner

    run, runs = UserCRunner._run, []

    def interrupted_run(self, cand, build):  # Ctrl-C while the third configuration is timed
        runs.append(cand.payload)
        if len(runs) == 3 and not resumed:
            raise KeyboardInterrupt
        return run(self, cand, build)

    monkeypatch.setattr(UserCRunner, "_run", interrupted_run)
    source = "void twice(float *y, const float *x, int n) { for (int i = 0; i < n; i++) y[i] = factor * x[i]; }"
    n = 64
    x = np.arange(n, dtype=np.float32)

    def tune():
        return autotune.tune_kernel("twice", source, n, [np.zeros(n, np.float32), x, np.int32(n)],
                                    {"factor": [2, 3, 4]}, answer=[2 * x, None, None], lang="C", iterations=1,
                                    db=f"sqlite:///{tmp_path / 'k.db'}", campaign="k", quiet=True, progress=False)

    resumed = False
    with pytest.raises(KeyboardInterrupt):
        tune()
    assert "interrupted: 2 trials stored; resume with: rerun the script, or call it again with the campaign name 'k'" \
        in capsys.readouterr().err
    resumed, runs[:] = True, []
    results, env = tune()
    assert len(runs) == 1 and env["trials"] == 3  # the two stored are not timed again


class ShortRunner(FunctionRunner):
    """A runner of one's own that drops the last result of every batch (a fake: for unit tests only)."""

    def measure(self, task, candidates):
        return super().measure(task, candidates)[:-1]


def test_a_runner_returning_too_few_results_has_the_valid_ones_stored(sqlite_url):
    db = open_database(sqlite_url)
    runner = ShortRunner(lambda c: c["x"] + 1.0)
    with pytest.raises(UsageError, match="returned 3 results for 4 candidates"):
        Campaign("s", KnobSpace({"x": list(range(20))}), "random", runner, db, trials=12, batch=4,
                 progress=False).run()
    assert len(_stored(sqlite_url, "s")) == 3 and db.campaign("s").status == "failed"


def test_the_resume_hint_is_a_scripts_in_a_script_and_a_commands_on_the_command_line():
    from autotune.cli.common import on_interrupt

    script = "rerun the script, or call it again with the campaign name 's'"
    command = "rerun the same command with --campaign s"
    assert resume_command("s", None) == script
    assert on_interrupt(lambda: resume_command("s", None))() == command  # as in a command of the command line
    assert resume_command("s", None) == script  # and not after it
    graph = {"kind": "graph", "args": {}}  # a recipe the command line cannot spell: a worker can run it
    assert resume_command("g", graph, command_line=False) == (
        "rerun the script, or call it again with the campaign name 'g' (or: autotune worker --campaign g)")


def test_the_summary_of_a_campaign_that_reused_every_trial_says_so_and_no_simulated_time(tmp_path):
    from autotune.cli.main import app

    (tmp_path / "space.yaml").write_text("knobs:\n  x: [1, 2, 3]\n")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    cli = CliRunner()

    def tune(name: str) -> str:
        r = cli.invoke(app, ["tune", "command", "--space", str(tmp_path / "space.yaml"), "--db", url, "--trials", "3",
                             "--campaign", name, "--no-progress", "--", sys.executable, "-c", "print(1)"])
        assert r.exit_code == 0, r.output
        return r.stdout

    first, second = tune("a"), tune("b")  # b finds all three stored by a
    assert "simulated time" not in first + second and "wall time" in first
    assert "no successful measurement" not in second
    assert "nothing measured: every trial was reused" in second and "best of the reused trials" in second
