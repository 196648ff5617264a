"""`autotune parallelize` end to end: every built-in model, every preset (full matrix marked slow)."""

import json

import pytest
from autotune.search_spaces.parallel.clusters import preset_names
from autotune.search_spaces.parallel.models import MODELS
from typer.testing import CliRunner

from autotune.cli.main import app

runner = CliRunner()
BUILTIN = ["mlp-unity", "bert-large", "gpt-350m", "gpt-1.3b", "gpt-2.6b", "gpt-6.7b", "resnet101", "inception-v3",
           "dlrm", "rnnlm", "nmt"]
PRESETS = ["p100-4x4", "k80-16x4", "p3.16xlarge-x2", "dgx-a100-x2", "dgx-h100-x1"]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default --db is autotune.db in the working directory


def run(*args):
    return runner.invoke(app, ["parallelize", *map(str, args)])


def check(model, cluster, budget):
    r = run("--model", model, "--cluster", cluster, "--budget", budget, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["model"] == model and out["devices"] > 0
    assert set(out["baselines"]) == {"data-parallel", "megatron", "model-parallel"}
    valid = [b["iteration_s"] for b in out["baselines"].values() if b["iteration_s"] is not None]
    if valid:
        assert out["best"]["iteration_s"] <= min(valid)
        assert out["best"]["peak_memory_bytes"] > 0 and out["best"]["strategy"]["ops"]
    return out


def test_list_names_every_model_and_preset():
    r = run("--list", "--json")
    assert r.exit_code == 0
    out = json.loads(r.stdout)
    assert set(out["models"]) >= set(BUILTIN) and out["clusters"] == preset_names()
    assert set(BUILTIN) <= set(MODELS)


@pytest.mark.parametrize("model,cluster", [(m, PRESETS[i % len(PRESETS)]) for i, m in enumerate(BUILTIN)])
def test_every_model_on_some_preset(model, cluster):
    check(model, cluster, 3)


def test_output_strategy_and_timeline(tmp_path):
    strat, png = tmp_path / "s.json", tmp_path / "t.png"
    r = run("-m", "rnnlm", "-c", "p100-4x4", "-n", 30, "-o", strat, "--timeline", png)
    assert r.exit_code == 0, r.output
    assert "speed-up over data parallelism" in r.output and "data-parallel" in r.output
    s = json.loads(strat.read_text())
    assert s["devices"] == 16 and set(s["ops"]) == {"tokens", "embed", "lstm0", "lstm1", "proj", "loss"}
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("args,msg", [
    (["--model", "alexnet", "--cluster", "p100-4x4"], "unknown model"),
    (["--model", "dlrm", "--cluster", "tpu"], "unknown cluster"),
    (["--model", "dlrm"], "required"),
    (["--model", "dlrm", "--cluster", "p100-4x4", "--algorithm", "nope"], "unknown algorithm"),
    (["--model", "dlrm", "--cluster", "p100-4x4", "--batch", "0"], "batch"),
])
def test_bad_input_exits_2_with_one_sentence(args, msg):
    r = run(*args)
    assert r.exit_code == 2 and msg in r.output


@pytest.mark.slow
@pytest.mark.parametrize("cluster", PRESETS)
@pytest.mark.parametrize("model", BUILTIN)
def test_full_matrix(model, cluster):
    check(model, cluster, 10)


def test_measured_db_overrides(tmp_path):
    from autotune.db import open_database
    from autotune.db.calibration import record

    from autotune.types import Device

    url = f"sqlite:///{tmp_path / 'm.db'}"
    db = open_database(url)
    record(db, Device("Tesla P100-SXM2-16GB", "cuda", {}), collectives=[("allreduce", 16, 1e3, 1.0), ("allreduce", 16, 1e9, 10.0)])
    db.close()
    plain = check("rnnlm", "p100-4x4", 0)
    r = run("-m", "rnnlm", "-c", "p100-4x4", "-n", 0, "--measured-db", url, "--json")
    assert r.exit_code == 0, r.output
    slow = json.loads(r.stdout.strip().splitlines()[-1])
    # a measured 16-way all-reduce of >= 1 s makes data parallelism far slower than estimated
    assert slow["baselines"]["data-parallel"]["iteration_s"] > plain["baselines"]["data-parallel"]["iteration_s"] + 1.0


def test_search_is_logged_as_a_resumable_campaign(tmp_path):
    db = f"sqlite:///{tmp_path / 'p.db'}"
    args = ("--model", "rnnlm", "--cluster", "p100-4x4", "--budget", 20, "--campaign", "rnn", "--db", db, "--json")
    first = json.loads(run(*args).stdout.strip().splitlines()[-1])
    assert first["campaign"] == "rnn"
    r = runner.invoke(app, ["trials", "--campaign", "rnn", "--db", db, "--format", "json"])
    assert r.exit_code == 0, r.output
    trials = json.loads(r.stdout)
    assert 3 < len(trials) <= 23  # the three baselines, then up to 20 new strategies (repeats are looked up)
    best = min(t["cost"] for t in trials if t["status"] == "OK")
    assert best == pytest.approx(first["best"]["iteration_s"])
    # the same name resumes: the budget is spent, so nothing more is simulated
    again = json.loads(run(*args).stdout.strip().splitlines()[-1])
    assert again["best"]["iteration_s"] == pytest.approx(first["best"]["iteration_s"])
    r = runner.invoke(app, ["trials", "--campaign", "rnn", "--db", db, "--format", "json"])
    assert len(json.loads(r.stdout)) == len(trials)


def test_microbatches_add_a_pipeline_baseline_and_reject_uneven_splits():
    r = run("--model", "gpt-350m", "--cluster", "dgx-a100-x2", "--batch", 64, "--microbatches", 8, "--budget", 5,
            "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["batch"] == 64 and out["microbatches"] == 8
    assert out["baselines"]["megatron-pipeline"]["iteration_s"] > 0
    assert out["best"]["iteration_s"] <= min(b["iteration_s"] for b in out["baselines"].values() if b["iteration_s"])
    r = run("--model", "gpt-350m", "--cluster", "dgx-a100-x2", "--batch", 64, "--microbatches", 3)
    assert r.exit_code == 2 and "micro-batches" in r.output
