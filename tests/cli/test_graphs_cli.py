"""`autotune optimize-graph` and `autotune rules generate` end to end (small models)."""

import json

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from autotune.search_spaces.graphs import model_zoo
from typer.testing import CliRunner

from autotune.cli.main import app


def test_optimize_graph_json(tmp_path):
    from autotune.db import open_database, queries

    src, out, db = tmp_path / "m.onnx", tmp_path / "o.onnx", f"sqlite:///{tmp_path / 'g.db'}"
    onnx.save(model_zoo.build("resnet50", small=True), src)
    r = CliRunner().invoke(app, ["optimize-graph", str(src), "-o", str(out), "--budget", "60", "--json", "--db", db])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output.strip().splitlines()[-1])
    assert d["check"]["passed"] and d["check"]["max_rel_error"] < 1e-3
    assert d["predicted_cost_after_s"] <= d["predicted_cost_before_s"]
    assert d["latency_before"]["median_s"] > 0 and "reason" in d
    onnx.checker.check_model(onnx.load(out))
    # every distinct op was timed once and logged as a trial of task kind "op"; a rerun measures none
    database = open_database(db)
    ops = queries.trials(database, device="cpu-onnxruntime")
    assert len(ops) == d["ops_measured"] > 0 and ops["candidate_key"].is_unique
    rules = queries.rules(database)
    assert len(rules) > 10 and set(rules["status"]) <= {"hand-written", "proved", "tested"}
    r = CliRunner().invoke(app, ["optimize-graph", str(src), "-o", str(out), "--budget", "60", "--json", "--db", db])
    assert json.loads(r.output.strip().splitlines()[-1])["ops_measured"] == 0


def test_optimize_graph_text_and_errors(tmp_path):
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(model_zoo.build("squeezenet11", small=True), src)
    r = CliRunner().invoke(app, ["optimize-graph", str(src), "-o", str(out), "--budget", "30",
                                 "--algorithm", "mcmc", "--op-cache", str(tmp_path / "ops.json")])
    assert r.exit_code == 0, r.output
    assert "numeric check" in r.output and "predicted cost" in r.output
    assert json.loads((tmp_path / "ops.json").read_text())
    bad = CliRunner().invoke(app, ["optimize-graph", str(tmp_path / "missing.onnx"), "-o", str(out)])
    assert bad.exit_code == 2 and "cannot read" in bad.output
    bad = CliRunner().invoke(app, ["optimize-graph", str(src), "-o", str(out), "--algorithm", "nope"])
    assert bad.exit_code == 2 and "valid" in bad.output
    bad = CliRunner().invoke(app, ["optimize-graph", str(src), "-o", str(out), "--device", "tpu"])
    assert bad.exit_code == 2


def test_rules_generate(tmp_path):
    out = tmp_path / "rules.json"
    db = f"sqlite:///{tmp_path / 'r.db'}"
    r = CliRunner().invoke(app, ["rules", "generate", "--max-ops", "1", "--json", "-o", str(out), "--db", db])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output.strip().splitlines()[-1])
    listed = json.loads(CliRunner().invoke(app, ["rules", "list", "--format", "json", "--db", db]).output)
    assert len(listed) == d["stored_new"] == d["rules_written"]
    assert all(x["provenance"].startswith("generated") and x["status"] in ("proved", "tested") for x in listed)
    with open(out) as f:
        assert d["graphs"] > 0 and d["rules_written"] == len(json.load(f)["rules"]) >= d["kept"]
    assert CliRunner().invoke(app, ["rules", "generate", "--max-ops", "7"]).exit_code == 2


def test_optimize_graph_predicts_beyond_the_measurement_cap(tmp_path):
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(model_zoo.build("inception_v3", small=True), src)
    r = CliRunner().invoke(app, ["optimize-graph", str(src), "-o", str(out), "--budget", "40", "--max-measure", "20",
                                 "--json", "--db", f"sqlite:///{tmp_path / 'g.db'}"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output.strip().splitlines()[-1])
    assert d["ops_estimated"] > 0 and d["ops_confirmed"] > 0 and d["check"]["passed"]
