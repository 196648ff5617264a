"""`autotune tune kernel` end to end on the CPU (real gcc builds, small shapes), and the Python entry point."""

import json

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.drivers.kernel import tune_template

cli = CliRunner()
KEYS = {"campaign", "task", "device", "trials", "best_cost", "best_config", "simulated_s", "wall_s",
        "gflops", "default_cost", "speedup_over_default"}


def run(*args):
    return cli.invoke(app, [str(a) for a in args])


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path / 'k.db'}"


def test_tune_kernel_json_resume_and_source(url, tmp_path):
    src = tmp_path / "best.c"
    args = ("tune", "kernel", "softmax", "--shape", "16,96", "--target", "cpu", "--trials", 6, "--batch", 3,
            "--seed", 1, "--db", url, "--json", "--no-progress", "--source", src)
    r = run(*args)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(out) >= KEYS
    assert out["trials"] == 6 and out["best_cost"] > 0 and out["gflops"] > 0
    assert out["default_cost"] > 0 and out["speedup_over_default"] == pytest.approx(out["default_cost"] / out["best_cost"])
    text = src.read_text()
    # the fastest known configuration: the search's, or a look-up (the default's) that beat it
    fastest = out.get("best_including_reused", {}).get("config") or out["best_config"]
    assert "void kernel(" in text and f"#define ACC {fastest['ACC']}" in text
    # the same campaign again: the budget is already spent, nothing new is measured
    again = json.loads(run(*args).stdout.strip().splitlines()[-1])
    assert again["campaign"] == out["campaign"] and again["trials"] == 6
    assert again["default_cost"] == out["default_cost"]  # the baseline is read back from the database


@pytest.mark.parametrize("args,word", [
    (("fft",), "unknown kernel"),
    (("gemm", "--shape", "8,8"), "missing"),
    (("gemm", "--shape", "8,8,8", "--target", "tpu"), "unknown target"),
    (("gemm", "--shape", "8,8,8", "--algorithm", "nope"), "unknown algorithm"),
    (("gemm", "--shape", "8,8,8", "--threads", 999), "threads"),
    (("gemm", "--shape", "8,8,8", "--backend", "foo"), "unknown CUDA backend 'foo'"),
    (("gemm", "--shape", "8,8,8", "--ray-actors", 2), "--ray-actors needs --ray"),
    (("gemm", "--shape", "8,8,8", "--seed", -1), "seed must be a whole number >= 0"),
    (("gemm", "--shape", "1000000,1000000,1000000"), "needs 32.7 TiB of memory"),
    (("softmax", "--shape", "1000000,1000000"), "choose a smaller shape"),
])
def test_bad_input_exits_2_with_one_sentence(url, args, word):
    r = run("tune", "kernel", *args, "--trials", 2, "--db", url, "--no-progress")
    assert r.exit_code == 2
    assert word in r.output and "Traceback" not in r.output


def test_python_entry_point_tunes_gemm(url):
    result, template, extra = tune_template("gemm", "48,40,24", "cpu", trials=4, batch=4, db=url, threads=1)
    assert result.trials == 4 and result.best is not None
    assert extra["gflops"] > 0 and extra["default_cost"] > 0
    assert "void kernel(" in template.source(result.best.candidate.payload)


def test_tune_kernel_model_guided_and_transfer_options(url):
    from autotune.db import open_database, queries

    r = run("tune", "kernel", "softmax", "--shape", "16,96", "--trials", 12, "--batch", 4, "--algorithm", "mcmc",
            "--cost-model", "xgb", "--db", url, "--json", "--no-progress")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert "mcmc+xgb" in out["campaign"] and out["trials"] == 12
    assert not queries.cost_models(open_database(url)).empty
    r = run("tune", "kernel", "softmax", "--shape", "16,96", "--trials", 4, "--transfer-from", "No Such GPU",
            "--db", url, "--no-progress")
    assert r.exit_code == 2 and "No Such GPU" in r.stderr
