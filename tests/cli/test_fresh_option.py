"""`--fresh`: a campaign started afresh under an existing name. The old campaign is deleted first;
the trials it measured stay in the database with no campaign, and the new campaign looks them up
(reported as ``reused``) instead of measuring them again."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

import autotune
from autotune.campaign import Campaign
from autotune.cli.main import app
from autotune.db import open_database, queries
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import ReplaySpace

CACHE = "example:pnpoly-rtx3090"
cli = CliRunner()


def last_json(r) -> dict:
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_tune_replay_fresh_deletes_the_old_campaign_and_reuses_its_trials(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    args = ["tune", "replay", "--cache", CACHE, "--db", url, "--campaign", "c", "--trials", "30", "--seed", "1",
            "-a", "random", "--cost-model", "none", "--no-progress", "--json"]
    first = last_json(cli.invoke(app, args))
    assert first["trials"] == 30 and first["reused"] == 0
    again = last_json(cli.invoke(app, args))  # without --fresh: the same campaign, resumed, nothing new
    assert again["trials"] == 30 and again["measured_here"] == 0
    db = open_database(url)
    old_created = db.campaign("c").created

    fresh = last_json(cli.invoke(app, [*args, "--fresh"]))
    # the same seed proposes the same 30 points first: looked up, then 30 measured
    assert fresh["status"] == "finished" and fresh["trials"] == 30 and fresh["reused"] == 30
    assert fresh["measured_here"] == 30
    assert db.campaign("c").created > old_created and db.count_trials() == 60
    listed = queries.campaigns(db)
    assert list(listed["campaign"]) == ["c"] and (listed["trials"].iloc[0], listed["reused"].iloc[0]) == (30, 30)
    everything = queries.trials(db, limit=1000)
    assert everything["campaign"].isna().sum() == 30 and (everything["campaign"] == "c").sum() == 30
    assert len(queries.convergence(db, "c")) == 30 and len(queries.convergence(db, "c", include_reused=True)) == 60
    db.close()


def test_fresh_on_a_new_name_just_creates_it_and_campaign_api_takes_fresh(sqlite_url):
    space = ReplaySpace(CACHE)
    db = open_database(sqlite_url)
    res = Campaign("new", space, "random", ReplayRunner(space.cache), db, trials=10, seed=3, fresh=True).run()
    assert not res.resumed and res.trials == 10 and res.reused == 0
    res = Campaign("new", space, "random", ReplayRunner(space.cache), db, trials=10, seed=3, fresh=True).run()
    assert not res.resumed and res.trials == 10 and res.reused == 10 and res.measured_here == 10
    db.close()


def test_fresh_refuses_while_the_campaign_has_live_workers(sqlite_url):
    import os
    import socket

    from autotune.errors import UsageError

    space = ReplaySpace(CACHE)
    db = open_database(sqlite_url)
    Campaign("busy", space, "random", ReplayRunner(space.cache), db, trials=5).run()
    db.heartbeat(db.campaign("busy").id, f"{socket.gethostname()}:{os.getpid()}:other")  # a live worker
    with pytest.raises(UsageError, match="live worker"):
        Campaign("busy", space, "random", ReplayRunner(space.cache), db, trials=5, fresh=True).run()
    assert queries.campaigns(db)["trials"].tolist() == [5]  # nothing was deleted
    db.close()


def objective(config):
    return (config["x"] - 3) ** 2 + config["y"] + 1.0


def test_minimize_fresh(sqlite_url):
    space = {"x": list(range(6)), "y": [0, 1, 2]}
    first = autotune.minimize(objective, space, trials=6, cost_model=None, algorithm="random", db=sqlite_url,
                              campaign="m")
    assert first.trials == 6
    again = autotune.minimize(objective, space, trials=6, cost_model=None, algorithm="random", db=sqlite_url,
                              campaign="m", fresh=True)
    assert not again.resumed and again.trials == 6 and again.reused == 6


BENCH = "import sys\nprint(f'cost: {abs(int(sys.argv[1]) - 16) + 1}')\n"
SPACE = "name: b\nknobs:\n  block: [2, 4, 8, 16, 32, 64]\nobjective:\n  regex: 'cost: ([0-9.]+)'\n"


def test_tune_command_fresh(tmp_path):
    (tmp_path / "bench.py").write_text(BENCH)
    (tmp_path / "space.yaml").write_text(SPACE)
    url = f"sqlite:///{tmp_path / 'c.db'}"
    args = ["tune", "command", "--space", str(tmp_path / "space.yaml"), "--db", url, "--campaign", "cmd", "--trials",
            "3", "-a", "random", "--cost-model", "none", "--no-progress", "--json", "--",
            sys.executable, str(tmp_path / "bench.py"), "{block}"]
    first = last_json(cli.invoke(app, args))
    assert first["trials"] == 3
    fresh = last_json(cli.invoke(app, [*args[:-4], "--fresh", *args[-4:]]))
    assert fresh["trials"] == 3 and fresh["reused"] == 3 and fresh["measured_here"] == 3


def test_tune_kernel_fresh(tmp_path):
    url = f"sqlite:///{tmp_path / 'k.db'}"
    args = ["tune", "kernel", "softmax", "--shape", "16,96", "--trials", "3", "--batch", "3", "--seed", "1",
            "--algorithm", "random", "--cost-model", "none", "--campaign", "k", "--db", url, "--json", "--no-progress"]
    first = last_json(cli.invoke(app, args))
    assert first["trials"] == 3
    fresh = last_json(cli.invoke(app, [*args, "--fresh"]))
    assert fresh["trials"] == 3 and fresh["reused"] >= 3 and fresh["measured_here"] == 3
    assert fresh["best_cost"] > 0 and fresh["gflops"] > 0


@pytest.mark.parametrize("command", [["replay"], ["kernel"], ["command"], ["graph"], ["parallel"]])
def test_the_tuning_commands_offer_fresh_and_option(command):
    r = cli.invoke(app, ["tune", *command, "--help"])
    assert r.exit_code == 0 and "--fresh" in r.stdout and "--option" in r.stdout


def test_tune_parallel_fresh_and_option(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    args = ["tune", "parallel", "--model", "mlp-unity", "--cluster", "p3.16xlarge-x2", "--trials", "12", "--db", url,
            "--campaign", "p", "--no-progress", "--json", "-a", "mcmc", "--option", "t0=0.5"]
    last_json(cli.invoke(app, args))
    db = open_database(url)
    assert db.campaign("p").options["algorithm_options"]["t0"] == 0.5
    n = queries.campaigns(db)["trials"].iloc[0]
    last_json(cli.invoke(app, [*args, "--fresh"]))
    row = queries.campaigns(db).iloc[0]
    assert (row["campaign"], row["trials"]) == ("p", n) and row["reused"] > 0  # afresh: the old trials looked up
    bad = cli.invoke(app, [*args[:-2], "--option", "t00=0.5"])
    assert bad.exit_code == 2 and "did you mean 't0'" in bad.output
    db.close()


def test_tune_graph_fresh_and_option(tmp_path):
    pytest.importorskip("onnxruntime")
    model = tmp_path / "nasrnn.onnx"
    model.write_bytes(autotune.zoo_model("nasrnn", small=True).SerializeToString())
    url = f"sqlite:///{tmp_path / 'g.db'}"
    args = ["tune", "graph", str(model), "-o", str(tmp_path / "out.onnx"), "--trials", "10", "--db", url,
            "--campaign", "g", "--no-progress", "--json", "--rounds", "3", "--option", "alpha=1.1"]
    last_json(cli.invoke(app, args))
    db = open_database(url)
    assert db.campaign("g").options["algorithm_options"]["alpha"] == 1.1
    last_json(cli.invoke(app, [*args, "--fresh"]))
    row = queries.campaigns(db).iloc[0]
    assert row["campaign"] == "g" and row["reused"] > 0
    db.close()
