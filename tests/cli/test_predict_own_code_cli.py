"""`autotune predict` on the campaigns of one's own code (autotune.minimize, tune command, a space file), on a
CPU kernel tuned on another host, and on campaigns without a model."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from autotune.algorithms.model_guided import make_search
from autotune.campaign import Campaign
from autotune.cli.main import app
from autotune.cli.models import space_for_task
from autotune.db import open_database
from autotune.drivers.function import minimize
from autotune.runners.function import FunctionRunner
from autotune.search_spaces.knobs import KnobSpace
from autotune.search_spaces.space_file import load_space_file
from autotune.types import Task

cli = CliRunner()
KNOBS = {"x": list(range(12)), "y": [1, 2, 4, 8, 16]}
VALID = [{"x": x, "y": y} for x in KNOBS["x"] for y in KNOBS["y"] if x + y <= 14]


def bowl(config: dict) -> float:
    return (config["x"] - 6) ** 2 + abs(config["y"] - 4) + 0.5


def run(*args):
    return cli.invoke(app, [str(a) for a in args])


def ranked(*args) -> list[dict]:
    r = run("predict", *args, "--format", "json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def one_line_error(r, *words) -> str:
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and all(w in r.stderr for w in words), r.stderr
    return r.stderr


def test_predict_ranks_the_space_of_a_minimize_campaign_and_its_untried_points(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    minimize(bowl, KNOBS, trials=10, db=url, campaign="other")  # another task's trials: not counted as tried
    minimize(bowl, KnobSpace(KNOBS, ["x + y <= 14"]), trials=24, db=url, campaign="bowl")
    every = ranked("--campaign", "bowl", "--top", 1000, "--db", url)
    # every valid point once (none breaking the constraint), the model's best near the optimum x=6
    assert sorted((c["config"]["x"], c["config"]["y"]) for c in every) == sorted((c["x"], c["y"]) for c in VALID)
    assert abs(every[0]["config"]["x"] - 6) <= 2
    untried = ranked("--campaign", "bowl", "--untried", "--top", 1000, "--db", url)
    assert len(untried) == len(VALID) - 24
    assert {json.dumps(c["config"]) for c in untried} < {json.dumps(c["config"]) for c in every}
    r = run("predict", "--campaign", "bowl", "--untried", "--db", url)
    assert r.exit_code == 0 and f"the best 10 of the {len(VALID) - 24} untried points of the task's space" in r.stdout
    one_line_error(run("predict", "--campaign", "bowl", "--config", '{"x": 11, "y": 16}', "--db", url),
                   "breaks the space's constraint 'x + y <= 14'")
    one_line_error(run("predict", "--campaign", "bowl", "--config", '{"x": 3, "y": 3}', "--db", url),
                   "y=3 is not a value of knob 'y'")


def test_a_constraint_written_as_code_is_named_and_given_configurations_still_rank(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    minimize(bowl, KnobSpace(KNOBS, [lambda c: c["x"] + c["y"] <= 14]), trials=24, db=url, campaign="code")
    one_line_error(run("predict", "--campaign", "code", "--db", url), "written as Python code", "--config")
    r = run("predict", "--campaign", "code", "--config", '{"x": 6, "y": 4}', "--config", '{"x": 0, "y": 16}',
            "--format", "json", "--db", url)
    assert r.exit_code == 0 and "not checked" in r.stderr, r.output
    assert [c["config"] for c in json.loads(r.stdout)] == [{"x": 6, "y": 4}, {"x": 0, "y": 16}]


BENCH = 'import sys; b = int(sys.argv[1]); u = int(sys.argv[2]); print(f"time: {abs(b - 32) / 8 + abs(u - 2) + 1} ms")'
SPACE = """\
name: bench
knobs:
  block: [8, 16, 32, 64, 128]
  unroll: [1, 2, 4, 8]
constraints:
  - block * unroll <= 256
objective:
  regex: "time: ([0-9.]+) ms"
  scale: 1e-3
"""


def test_predict_ranks_the_space_of_a_tune_command_campaign(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bench.py").write_text(BENCH)
    (tmp_path / "space.yaml").write_text(SPACE)
    url = f"sqlite:///{tmp_path / 'c.db'}"
    r = run("tune", "command", "--space", "space.yaml", "--trials", 12, "--campaign", "cmd", "--db", url,
            "--no-progress", "--", sys.executable, "bench.py", "{block}", "{unroll}")
    assert r.exit_code == 0, r.output
    every = ranked("--campaign", "cmd", "--top", 100, "--db", url)
    assert len(every) == 17 and all(c["config"]["block"] * c["config"]["unroll"] <= 256 for c in every)
    assert len(ranked("--campaign", "cmd", "--untried", "--top", 100, "--db", url)) == 17 - 12


def test_predict_ranks_the_space_of_a_space_file_campaign(tmp_path):
    (tmp_path / "space.yaml").write_text(SPACE)
    space, _ = load_space_file(tmp_path / "space.yaml")
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = open_database(url)
    runner = FunctionRunner(lambda c: abs(c["block"] - 32) / 8 + c["unroll"])
    try:
        Campaign("file", space, make_search("random", "xgb"), runner, db, trials=16, progress=False).run()
    finally:
        runner.close()
        db.close()
    assert space.task.kind == "knobs"
    every = ranked("--campaign", "file", "--top", 100, "--db", url)
    assert len(every) == 17 and {c["config"]["block"] for c in every[:3]} <= {16, 32, 64}


def test_a_cpu_kernel_model_ranks_the_space_of_the_host_it_was_trained_on():
    """A CPU kernel's knobs (threads, vector widths) follow the host: a model trained on a 48-core AVX-512
    host ranks that host's space, whatever host predict runs on."""
    task = Task("kernel", "gemm", {"shape": {"M": 64, "N": 64, "K": 64}, "target": "cpu", "dtype": "float32"})
    other_host = {"model": "big", "cores": 48, "flags": ["avx", "avx2", "avx512f", "fma"], "l1d_bytes": 49152,
                  "l2_bytes": 2097152}
    space = space_for_task(None, task, {"device_properties": other_host}).space
    values = dict(zip(space.names, space.values))
    assert 48 in values["threads"] and 16 in values["VW"]


@pytest.mark.parametrize(("algorithm", "cost_model", "trials", "words"), [
    ("evolutionary", "xgb", 5, ("has no stored cost model yet", "after 8 results")),
    ("random", "none", 12, ("stores no cost model", "not guided by one")),
])
def test_a_campaign_without_a_model_says_why(tmp_path, algorithm, cost_model, trials, words):
    url = f"sqlite:///{tmp_path / 'n.db'}"
    minimize(bowl, KNOBS, trials=trials, db=url, campaign="c", algorithm=algorithm,
             cost_model=None if cost_model == "none" else cost_model)
    one_line_error(run("predict", "--campaign", "c", "--db", url), "campaign 'c'", *words)


def test_a_space_too_large_to_list_ranks_random_points_and_an_empty_configs_file_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'b.db'}"
    minimize(lambda c: abs(c["a"] - 50) + c["b"] + 1, {k: list(range(100)) for k in "abcd"}, trials=12, db=url,
             campaign="big")
    r = run("predict", "--campaign", "big", "--top", 3, "--db", url)
    assert r.exit_code == 0 and "the best 3 of the 20,000 random points of the task's space" in r.stdout, r.output
    (tmp_path / "empty.jsonl").write_text("\n")
    one_line_error(run("predict", "--campaign", "big", "--configs", tmp_path / "empty.jsonl", "--db", url),
                   "holds no configuration")
