"""Ctrl-C during a campaign: what was measured is stored, the campaign is marked "interrupted", this
worker's claim and reservations are given back, stderr says how to resume, and the interrupt goes on
(the command line exits 130). Rerunning the campaign continues it to "finished"."""

from __future__ import annotations

import json
import shlex

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from autotune.algorithms.registry import make_algorithm
from autotune.campaign import Campaign, resume_command
from autotune.cli.main import app
from autotune.db import open_database, queries
from autotune.db.models import TrialRow
from autotune.errors import UsageError
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import ReplaySpace

CACHE = "example:pnpoly-rtx3090"
RECIPE = {"kind": "replay", "args": {"cache": CACHE, "algorithm": "random", "cost_model": None, "trials": 60,
                                     "time_budget": None, "simulated_budget": None, "seed": 4, "batch": 8,
                                     "measure_delay": 0.0}}


class FakeInterruptingRunner(ReplayRunner):
    """A replay runner whose measure call number ``after + 1`` raises KeyboardInterrupt, as Ctrl-C would
    while a batch is being measured (a fake: for unit tests only)."""

    def __init__(self, cache, after: int):
        super().__init__(cache)
        self.after, self.calls = after, 0

    def measure(self, task, candidates):
        self.calls += 1
        if self.calls > self.after:
            raise KeyboardInterrupt
        return super().measure(task, candidates)


class FakeFailingRunner(FakeInterruptingRunner):
    """The same, raising an error of the runner's own instead (a fake: for unit tests only)."""

    def measure(self, task, candidates):
        try:
            return super().measure(task, candidates)
        except KeyboardInterrupt:
            raise RuntimeError("planted runner failure") from None


def _keys(db, name):
    with db.session() as s:
        return s.scalars(select(TrialRow.candidate_key).where(TrialRow.campaign_id == db.campaign(name).id)
                         .order_by(TrialRow.id)).all()


def test_ctrl_c_stores_marks_interrupted_and_a_rerun_finishes(db_url, tmp_path, capsys):
    space = ReplaySpace(CACHE)
    db = open_database(db_url)
    with pytest.raises(KeyboardInterrupt):
        Campaign("c", space, "random", FakeInterruptingRunner(space.cache, after=3), db, trials=60, batch=8, seed=4,
                 recipe=RECIPE).run()
    err = capsys.readouterr().err
    row = db.campaign("c")
    assert row.status == "interrupted"
    assert len(_keys(db, "c")) == 24  # three batches were stored; the fourth was being measured
    assert db.campaign_workers(row.id) == [] and db.pending_keys(row.id) == {}  # claim and reservations given back
    assert (f"interrupted: 24 trials stored; resume with: autotune tune replay --cache {CACHE} --algorithm random "
            f"--cost-model none --trials 60 --seed 4 --campaign c --db {db_url}") in err
    assert queries.campaigns(db).set_index("campaign").loc["c", "status"] == "interrupted"

    res = Campaign("c", space, "random", ReplayRunner(space.cache), db, trials=60, batch=8, seed=4, recipe=RECIPE).run()
    assert res.resumed and res.status == "finished" and res.trials == 60 and res.measured_here == 36
    assert db.campaign("c").status == "finished"
    # the runner stopped before the fourth batch's first candidate, so nothing of it was measured, as in a killed
    # run: the search goes on where it was
    ref = open_database(f"sqlite:///{tmp_path / 'ref.db'}")
    Campaign("c", space, "random", ReplayRunner(space.cache), ref, trials=60, batch=8, seed=4).run()
    assert _keys(db, "c") == _keys(ref, "c")


def test_results_measured_before_ctrl_c_are_stored(sqlite_url, capsys):
    """Ctrl-C after a batch was measured and before it was stored (here: while the algorithm is told
    its results): the batch is stored all the same."""
    space = ReplaySpace(CACHE)
    db = open_database(sqlite_url)
    algo = make_algorithm("random")
    tell, calls = algo.tell, []

    def interrupting_tell(results):
        calls.append(len(results))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return tell(results)

    algo.tell = interrupting_tell
    with pytest.raises(KeyboardInterrupt):
        Campaign("m", space, algo, ReplayRunner(space.cache), db, trials=40, batch=8, seed=2).run()
    # a campaign run from a script: the script says how a script resumes it (a script has no --campaign)
    assert ("interrupted: 24 trials stored; resume with: rerun the script, or call it again with the campaign name 'm'"
            in capsys.readouterr().err)
    assert db.campaign("m").status == "interrupted" and len(set(_keys(db, "m"))) == 24
    res = Campaign("m", space, "random", ReplayRunner(space.cache), db, trials=40, batch=8, seed=2).run()
    assert res.status == "finished" and res.trials == 40 and len(set(_keys(db, "m"))) == 40


def test_cli_exits_130_and_the_printed_command_resumes(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setattr("autotune.drivers.replay.ReplayRunner", lambda cache, delay: FakeInterruptingRunner(cache, 2))
    cli = CliRunner()
    args = ["tune", "replay", "--cache", CACHE, "--db", url, "--campaign", "k", "--trials", "40", "--cost-model", "none",
            "-a", "mcmc", "--option", "t0=0.2", "--no-progress", "--json"]
    r = cli.invoke(app, args)
    assert r.exit_code == 130, r.output
    line = [x for x in r.stderr.splitlines() if x.startswith("interrupted: ")][-1]
    assert line.startswith("interrupted: 16 trials stored; resume with: autotune tune replay ")
    command = shlex.split(line.split("resume with: ", 1)[1])
    assert command[:3] == ["autotune", "tune", "replay"] and "--campaign" in command and "t0=0.2" in command
    db = open_database(url)
    assert db.campaign("k").status == "interrupted" and len(_keys(db, "k")) == 16
    monkeypatch.undo()
    again = cli.invoke(app, command[1:] + ["--json", "--no-progress"])
    assert again.exit_code == 0, again.output
    out = json.loads(again.stdout.strip().splitlines()[-1])
    assert out["status"] == "finished" and out["trials"] == 40 and out["measured_here"] == 24
    assert db.campaign("k").status == "finished"
    db.close()


def test_a_run_measured_on_ray_actors_says_to_resume_on_them(tmp_path, capsys):
    """The recipe does not say where a run measures (workers on other hosts share it): the resume command of a
    run on Ray actors names the cluster and actors it was given, as the command that started it did."""
    space = ReplaySpace(CACHE)
    url = f"sqlite:///{tmp_path / 'r.db'}"
    db = open_database(url)
    runner = FakeInterruptingRunner(space.cache, after=1)
    runner.ray_address, runner.ray_actors_asked = "auto", 4  # what RayRunner keeps of --ray auto --ray-actors 4
    with pytest.raises(KeyboardInterrupt):
        Campaign("r", space, "random", runner, db, trials=60, batch=8, seed=4, recipe=RECIPE).run()
    assert capsys.readouterr().err == (
        f"interrupted: 8 trials stored; resume with: autotune tune replay --cache {CACHE} --algorithm random "
        f"--cost-model none --trials 60 --seed 4 --ray auto --ray-actors 4 --campaign r --db {url}\n")
    db.close()
    kernel = {"kind": "kernel", "args": {"name": "gemm", "shape": "64,64,64", "cost_model": "xgb", "trials": 20}}
    assert resume_command("k", kernel, ray="local") == (
        "autotune tune kernel gemm --shape 64,64,64 --trials 20 --ray local --campaign k")
    command = {"kind": "command", "args": {"argv": ["./bench"], "space_file": "/x/s.yaml", "trials": 5}}
    assert "--ray" not in resume_command("c", command, ray="local")  # tune command has no --ray


def test_resume_commands_of_each_kind():
    kernel = {"kind": "kernel", "args": {"name": "gemm", "shape": "64,64,64", "target": "cpu", "algorithm": "random",
                                         "cost_model": "xgb", "trials": 20, "time_budget": None, "seed": 0, "batch": 8,
                                         "threads": 2, "device_index": 0, "backend": "auto",
                                         "options": {"init": 4}}}
    assert resume_command("k1", kernel) == ("autotune tune kernel gemm --shape 64,64,64 --algorithm random --trials 20 "
                                            "--threads 2 --option init=4 --campaign k1")
    command = {"kind": "command", "args": {"argv": ["./bench", "--block", "{block}"], "space_file": "/x/space yaml",
                                           "trials": 5, "algorithm": "evolutionary", "cost_model": "xgb"}}
    assert resume_command("c1", command) == ("autotune tune command --space '/x/space yaml' --trials 5 --campaign c1 "
                                             "-- ./bench --block '{block}'")
    assert resume_command("g", {"kind": "graph", "args": {}}, command_line=True) == (
        "rerun the same command with --campaign g (or: autotune worker --campaign g)")
    assert resume_command("s", None, command_line=True) == "rerun the same command with --campaign s"
    assert resume_command("s", None, command_line=False) == "rerun the script, or call it again with the campaign name 's'"


def test_resume_commands_of_graph_and_parallel_campaigns():
    """`tune graph` and `tune parallel` are spelled with their own defaults left out, their input shapes and
    the files they write; a recipe the command line cannot spell (no output model, a threads count) says
    to rerun the command or run a worker."""
    graph = {"kind": "graph", "args": {
        "model": "my model.onnx", "device": "cpu", "algorithm": "mcmc", "alpha": None, "trials": 3000, "time_budget": 45,
        "seed": 0, "batch": 8, "rules_file": "r.json", "max_measure": 400, "rounds": 25, "threads": 1, "fusion": None,
        "tolerance": 1e-3, "options": {"t0": 0.2}, "input_shapes": {"input_ids": [1, 128]}},
        "files": {"output": "out.onnx"}}
    assert resume_command("g1", graph) == (
        "autotune tune graph 'my model.onnx' --algorithm mcmc --trials 3000 --time-budget 45 --batch 8 --rules r.json "
        "--max-measure 400 -o out.onnx --input-shape input_ids=1x128 --option t0=0.2 --campaign g1")
    no_output = {**graph, "files": {}}
    threads = {**graph, "args": {**graph["args"], "threads": 4}}
    for recipe in (no_output, threads):
        assert resume_command("g1", recipe, command_line=True) == (
            "rerun the same command with --campaign g1 (or: autotune worker --campaign g1)")
    parallel = {"kind": "parallel", "args": {
        "model": "nmt", "cluster": "p100-4x4", "batch": 8, "algorithm": "mcmc", "trials": 1000, "seed": 0,
        "time_budget": None, "options": {}, "microbatches": 1, "measured_db": "sqlite:///m.db", "measured_device": None},
        "files": {"output": "s.json", "timeline": "t.png"}}
    assert resume_command("p1", parallel) == (
        "autotune tune parallel --model nmt --cluster p100-4x4 --batch 8 --trials 1000 --measured-db sqlite:///m.db "
        "-o s.json --timeline t.png --campaign p1")


def test_a_resume_command_never_prints_a_password_and_runs_with_autotune_db(monkeypatch, tmp_path):
    from types import SimpleNamespace

    replay = {"kind": "replay", "args": {"cache": CACHE, "trials": 60}}
    secret = SimpleNamespace(url="postgresql+psycopg://me:s3cret@db.example/tuning")
    monkeypatch.delenv("AUTOTUNE_DB", raising=False)
    line = resume_command("r", replay, secret)
    assert "s3cret" not in line and line.endswith('--campaign r --db "$AUTOTUNE_DB"')
    assert resume_command("r", None, secret, command_line=True) == 'rerun the same command with --campaign r'
    assert resume_command("g", {"kind": "graph"}, secret).endswith('--campaign g --db "$AUTOTUNE_DB")')
    plain = SimpleNamespace(url="postgresql+psycopg://me@db.example/tuning")
    assert resume_command("r", replay, plain).endswith("--campaign r --db postgresql+psycopg://me@db.example/tuning")
    monkeypatch.setenv("AUTOTUNE_DB", secret.url)  # the variable names the database again: no --db at all
    assert resume_command("r", replay, secret).endswith("--campaign r")
    # and every command reads it
    url = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("AUTOTUNE_DB", url)
    r = CliRunner().invoke(app, ["tune", "replay", "--cache", CACHE, "--trials", "8", "--cost-model", "none",
                                 "--campaign", "e", "--no-progress"])
    assert r.exit_code == 0 and (tmp_path / "env.db").exists(), r.output
    assert CliRunner().invoke(app, ["campaigns", "--format", "csv"]).stdout.splitlines()[1].startswith("e,")


def test_an_error_out_of_the_runner_marks_the_campaign_failed_and_a_rerun_finishes(db_url):
    space = ReplaySpace(CACHE)
    db = open_database(db_url)
    with pytest.raises(RuntimeError, match="planted"):
        Campaign("f", space, "random", FakeFailingRunner(space.cache, after=2), db, trials=40, batch=8, seed=4).run()
    row = db.campaign("f")
    assert row.status == "failed" and len(_keys(db, "f")) == 16  # not "running" for good; what was stored stays
    assert db.campaign_workers(row.id) == []
    res = Campaign("f", space, "random", ReplayRunner(space.cache), db, trials=40, batch=8, seed=4).run()
    assert res.resumed and res.status == "finished" and res.trials == 40


class FakeDeletingRunner(ReplayRunner):
    """A replay runner that, before its measure call number ``after + 1``, deletes the campaign and opens
    a new one of the same name, as `autotune campaigns delete --force` and a rerun would while it measures
    (a fake: for unit tests only)."""

    def __init__(self, cache, after: int, db, space):
        super().__init__(cache)
        self.after, self.calls, self.db, self.space = after, 0, db, space

    def measure(self, task, candidates):
        self.calls += 1
        if self.calls == self.after + 1:
            self.db.delete_campaign("d", with_trials=False, force=True)
            self.db.open_campaign("d", self.space.task, self.device, "random", {})
        return super().measure(task, candidates)


def test_a_run_whose_campaign_is_deleted_stops_and_writes_nothing_into_the_next_of_that_name(db_url):
    space = ReplaySpace(CACHE)
    db = open_database(db_url)
    with pytest.raises(UsageError, match="deleted while this run measured it; its last 8 measurements are stored "
                                         "without a campaign"):
        Campaign("d", space, "random", FakeDeletingRunner(space.cache, 2, db, space), db, trials=40, batch=8,
                 seed=4).run()
    new = db.campaign("d")
    assert new.status == "running" and _keys(db, "d") == [] and db.campaign_workers(new.id) == []
    with db.session() as s:  # the 16 stored before the deletion and the 8 measured after it: none lost
        assert s.scalar(select(func.count(TrialRow.id)).where(TrialRow.campaign_id.is_(None))) == 24


def test_a_fresh_start_is_refused_while_another_run_loads_the_campaign(sqlite_url):
    space = ReplaySpace(CACHE)
    db = open_database(sqlite_url)
    Campaign("s", space, "random", ReplayRunner(space.cache), db, trials=16, batch=8, seed=4).run()
    algorithm = make_algorithm("random")
    refused = []

    def bind(*args, **kwargs):  # while the history loads, another process starts the campaign afresh
        with pytest.raises(UsageError, match="live worker") as exc:
            Campaign("s", space, "random", ReplayRunner(space.cache), db, trials=8, fresh=True).run()
        refused.append(str(exc.value))
        return type(algorithm).bind(algorithm, *args, **kwargs)

    algorithm.bind = bind
    res = Campaign("s", space, algorithm, ReplayRunner(space.cache), db, trials=24, batch=8, seed=4).run()
    assert refused and res.resumed and res.status == "finished" and res.trials == 24


def test_looking_up_stored_points_is_progress_not_a_stall(sqlite_url):
    """A new campaign over a task whose first hundreds of points are stored looks them up, then measures
    its budget: it does not stop as exhausted after 50 rounds of look-ups."""
    space = ReplaySpace(CACHE)
    db = open_database(sqlite_url)
    Campaign("first", space, "random", ReplayRunner(space.cache), db, trials=450, batch=8, seed=0).run()
    res = Campaign("second", space, "random", ReplayRunner(space.cache), db, trials=100, batch=8, seed=0).run()
    assert res.status == "finished" and res.trials == 100 and res.reused >= 400
