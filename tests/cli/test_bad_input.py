"""Malformed input to the commands: exit status 2 and one sentence naming what was wrong, checked before
any work is done (an unwritable output path fails before the campaign runs)."""

import gzip
import json

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import open_database

cli = CliRunner()


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path / 'b.db'}"


def bad_cache(tmp_path, doc) -> str:
    path = tmp_path / "bad.json.gz"
    with gzip.open(path, "wt") as f:
        f.write(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


GOOD = {"tune_params_keys": ["a"], "tune_params": {"a": [1, 2]},
        "cache": {"1": {"a": 1, "time": 1.0, "times": [1.0]}, "2": {"a": 2, "time": 2.0, "times": [2.0]}}}

BAD_CACHES = {
    "cache is a list": ({**GOOD, "cache": [1, 2]}, "cache must be an object"),
    "compile_time a word": ({**GOOD, "cache": {"1": {"a": 1, "time": 1.0, "compile_time": "slow"}}}, "compile_time"),
    "deep nesting": ("[" * 100_000 + "]" * 100_000, "not readable JSON"),
    "huge integer": ('{"tune_params_keys": ["a"], "tune_params": {"a": [' + "1" * 5000 + "]}, \"cache\": {}}",
                     "not readable JSON"),
    "time an object": ({**GOOD, "cache": {"1": {"a": 1, "time": {}}}}, "has time"),
    "times words": ({**GOOD, "cache": {"1": {"a": 1, "time": 1.0, "times": ["x"]}}}, "times"),
    "negative time": ({**GOOD, "cache": {"1": {"a": 1, "time": -1.0}}}, "has time"),
    "tune_params a list": ({**GOOD, "tune_params": [1]}, "tune_params must be an object"),
    "tune_params missing": ({k: v for k, v in GOOD.items() if k != "tune_params"}, "missing tune_params"),
    "top level a list": ([1, 2, 3], "top level is a list"),
}


@pytest.mark.parametrize("what", list(BAD_CACHES))
def test_malformed_caches_exit_2_with_one_sentence(tmp_path, url, what):
    doc, message = BAD_CACHES[what]
    r = cli.invoke(app, ["tune", "replay", "--cache", bad_cache(tmp_path, doc), "--db", url, "--no-progress"])
    assert r.exit_code == 2, r.output
    assert message in r.output and r.output.startswith("error:") and len(r.output.strip().splitlines()) == 1


def test_a_cache_folder_is_named_a_folder(tmp_path, url):
    r = cli.invoke(app, ["tune", "replay", "--cache", str(tmp_path), "--db", url, "--no-progress"])
    assert r.exit_code == 2 and "is a folder, not a file" in r.output, r.output
    r = cli.invoke(app, ["tune", "replay", "--cache", str(tmp_path / "none.json"), "--db", url, "--no-progress"])
    assert r.exit_code == 2 and "does not exist" in r.output, r.output


def test_output_paths_are_checked_before_the_work(tmp_path, url):
    missing = tmp_path / "no-such-folder" / "out"
    r = cli.invoke(app, ["tune", "replay", "--cache", "example:pnpoly-rtx3090", "--trials", 5, "--db", url,
                         "--no-progress", "--campaign", "c"])
    assert r.exit_code == 0
    cases = [
        (["plot", "convergence", "--campaign", "c", "-o", f"{missing}.png"], "does not exist"),
        (["plot", "convergence", "--campaign", "c", "-o", str(tmp_path / "plot.bmp")], "must end in"),
        (["export", "-o", f"{missing}.jsonl"], "does not exist"),
        (["export", "-o", str(tmp_path)], "it is a folder"),
        (["tune", "kernel", "softmax", "--shape", "4,32", "--trials", 2, "--source", f"{missing}.c", "--no-progress"],
         "does not exist"),
    ]
    db = open_database(url)
    before = db.count_trials()
    db.close()
    for args, message in cases:
        r = cli.invoke(app, [*args, "--db", url])
        assert r.exit_code == 2 and message in r.output, (args, r.output)
    db = open_database(url)
    assert db.count_trials() == before  # the kernel campaign did not run
    db.close()


def test_predict_with_bad_json_config(tmp_path, url):
    r = cli.invoke(app, ["tune", "replay", "--cache", "example:pnpoly-rtx3090", "--trials", 20, "--db", url,
                         "--no-progress", "--campaign", "m"])
    assert r.exit_code == 0, r.output
    for config, message in (("{bad json", "is not valid JSON"), ("[1, 2]", "must be a JSON object")):
        r = cli.invoke(app, ["predict", "--campaign", "m", "--config", config, "--db", url])
        assert r.exit_code == 2 and message in r.output, r.output


onnx = pytest.importorskip("onnx", reason="ONNX models need the graphs extra (pip install 'autotune[graphs]')")


def test_bad_onnx_models_and_outputs_exit_2(tmp_path, url):
    from onnx import TensorProto, helper

    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a protobuf at all \x00\xff")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [100000, 100000, 100000])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [100000, 100000, 100000])
    huge = tmp_path / "huge.onnx"
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])), huge)
    for model, message in ((empty, "no nodes"), (garbage, "cannot read ONNX model"), (huge, "the limit is")):
        r = cli.invoke(app, ["tune", "graph", str(model), "-o", str(tmp_path / "out.onnx"), "--db", url])
        assert r.exit_code == 2 and message in r.output, r.output
    r = cli.invoke(app, ["tune", "graph", str(empty), "-o", str(tmp_path / "missing" / "o.onnx"), "--db", url])
    assert r.exit_code == 2 and "does not exist" in r.output  # checked before the model is read
    r = cli.invoke(app, ["tune", "graph", str(empty), "-o", str(tmp_path / "o.onnx"), "--trials", "-1", "--db", url])
    assert r.exit_code == 2


def test_parallel_outputs_are_checked_before_the_search(tmp_path, url):
    for args, message in ((["-o", str(tmp_path / "missing" / "s.json")], "does not exist"),
                          (["--timeline", str(tmp_path / "t.bmp")], "must end in")):
        r = cli.invoke(app, ["tune", "parallel", "--model", "mlp", "-c", "dgx-a100-x1", *args, "--db", url])
        assert r.exit_code == 2 and message in r.output, r.output
    db = open_database(url)
    assert db.count_trials() == 0
    db.close()


@pytest.mark.parametrize("args", [["optimize-graph", "missing.onnx", "-o", "out.onnx", "--json"],
                                  ["parallelize", "-m", "no-such-model", "-c", "dgx-a100-x1", "--json"]])
def test_errors_under_json_are_one_json_object_on_standard_output(tmp_path, args, monkeypatch):
    """A script asking for --json gets the error as JSON (and exit status 2), not only a sentence on stderr."""
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["exit_code"] == 2 and doc["kind"] == "UsageError" and doc["error"]


REFUSALS = [
    (["--algorithm", "taso-queue"], "searches graph spaces only"),
    (["--algorithm", "optuna-gp"], "cannot be guided by the xgb cost model"),
    (["--trials", "0"], "trial budget must be a positive number"),
    (["--batch", "0"], "batch size must be a positive number"),
    (["--seed", "-1"], "seed must be a whole number"),
]


def tune_args(command: str, tmp_path) -> list[str]:
    if command == "replay":
        return ["replay", "--cache", "example:pnpoly-rtx3090"]
    if command == "parallel":
        return ["parallel", "--model", "mlp-unity", "--cluster", "p3.16xlarge-x2", "--trials", "5"]
    if command == "kernel":
        return ["kernel", "gemm", "--shape", "16,16,16", "--target", "cpu"]
    (tmp_path / "space.yaml").write_text("knobs:\n  x: [1, 2, 3]\n")
    return ["command", "--space", str(tmp_path / "space.yaml")]


@pytest.mark.parametrize("command, args, message", [
    *[(command, args, message) for command in ("replay", "kernel", "command") for args, message in REFUSALS],
    ("replay", ["--simulated-budget", "0"], "simulated-time budget must be a positive number"),
    ("parallel", ["--algorithm", "taso-queue"], "searches graph spaces only"),
    ("parallel", ["--algorithm", "optuna-tpe"], "it needs a space with knobs"),
    ("parallel", ["--seed", "-1"], "seed must be a whole number")])
def test_a_refused_tune_command_leaves_no_database_file(tmp_path, command, args, message):
    """Every refusal a campaign makes comes before the database is opened (autotune.campaign.check_run)."""
    db = tmp_path / "refused.db"
    argv = ["tune", *tune_args(command, tmp_path), "--db", f"sqlite:///{db}", "--no-progress", *args]
    if command == "command":
        argv += ["--", "true"]
    r = cli.invoke(app, argv)
    assert r.exit_code == 2 and message in r.output, r.output
    assert not db.exists()
