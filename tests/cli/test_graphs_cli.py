"""`autotune tune graph` (alias `optimize-graph`) and `autotune rules generate|list` end to end (small models).

Every command names a database under tmp_path (--db), and each test runs in tmp_path, so nothing is
written into the directory pytest runs in."""

import json

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.search_spaces.graphs import model_zoo


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default --db is autotune.db in the working directory


def test_optimize_graph_json(tmp_path):
    from autotune.db import open_database, queries

    src, out, db = tmp_path / "m.onnx", tmp_path / "o.onnx", f"sqlite:///{tmp_path / 'g.db'}"
    onnx.save(model_zoo.build("resnet50", small=True), src)
    r = CliRunner().invoke(app, ["optimize-graph", str(src), "-o", str(out), "--trials", "60", "--json", "--db", db])
    assert r.exit_code == 0, r.output
    assert len(r.stdout.strip().splitlines()) == 1  # --json: standard output is the one JSON line
    d = json.loads(r.stdout)
    # progress is on by default: off a terminal no bar is drawn, and the summary line goes to stderr
    summary = r.stderr.strip().splitlines()
    assert summary == [(f"optimize-graph: 60 graphs evaluated in {d['search_s']:.1f} s ({d['ops_measured']} ops timed), "
                       f"predicted {d['predicted_speedup']:.3f}x, measured {d['candidate_speedup']:.3f}x; kept the "
                       f"{'optimized' if d['kept'] else 'original'} graph ({d['reason']}); {d['total_s']:.1f} s in all")]
    assert d["check"]["passed"] and d["check"]["max_rel_error"] < 1e-3
    assert d["predicted_cost_after_s"] <= d["predicted_cost_before_s"]
    assert d["latency_before"]["median_s"] > 0 and "reason" in d
    assert d["algorithm"] == "taso-queue" and d["trials"] == d["evaluated"] == 60
    onnx.checker.check_model(onnx.load(out))
    # every distinct op was timed once and logged as a trial of task kind "op"; a rerun measures none
    database = open_database(db)
    trials = queries.trials(database, device="cpu-onnxruntime")
    ops = trials[trials["campaign"].isna()]
    assert len(ops) == d["ops_measured"] > 0 and ops["candidate_key"].is_unique
    assert len(queries.trials(database, campaign=d["campaign"])) == 60  # and every evaluated graph
    rules = queries.rules(database)
    assert len(rules) > 10 and set(rules["status"]) <= {"hand-written", "proved", "tested"}
    r = CliRunner().invoke(app, ["optimize-graph", str(src), "-o", str(out), "--trials", "60", "--json", "--db", db,
                                 "--no-progress"])
    assert r.stderr == ""  # --no-progress: nothing at all on stderr
    d2 = json.loads(r.stdout)
    assert d2["ops_measured"] == 0 and d2["resumed"] and d2["campaign"] == d["campaign"]
    assert d2["best_config"] == d["best_config"]


def test_tune_graph_text_aliases_and_errors(tmp_path):
    src, out, db = tmp_path / "m.onnx", tmp_path / "o.onnx", f"sqlite:///{tmp_path / 'g.db'}"
    onnx.save(model_zoo.build("squeezenet11", small=True), src)
    r = CliRunner().invoke(app, ["tune", "graph", str(src), "-o", str(out), "--trials", "30", "--algorithm", "mcmc",
                                 "--campaign", "sq", "--db", db])
    assert r.exit_code == 0, r.output
    assert "numeric check" in r.output and "predicted cost" in r.output and "campaign sq" in r.output
    assert r.output.strip().splitlines()[-1].startswith("tune graph: 30 graphs evaluated")  # the summary ends it
    # the deprecated budget names still work, hidden, with a note
    r = CliRunner().invoke(app, ["optimize-graph", str(src), "-o", str(out), "--budget", "40", "--time-limit", "30",
                                 "--algorithm", "mcmc", "--campaign", "sq", "--json", "--db", db])
    assert r.exit_code == 0, r.output
    assert "--budget is deprecated" in r.output and json.loads(r.stdout.strip().splitlines()[-1])["trials"] == 40
    for cmd in (["tune", "graph"], ["optimize-graph"]):
        text = CliRunner().invoke(app, [*cmd, "--help"], terminal_width=200).output
        assert "--trials" in text and "--time-budget" in text and "--campaign" in text and "--budget" not in text
    bad_cases = [
        (["optimize-graph", str(tmp_path / "missing.onnx"), "-o", str(out)], "cannot read"),
        (["optimize-graph", str(src), "-o", str(out), "--algorithm", "nope"], "valid"),
        (["tune", "graph", str(src), "-o", str(out), "--algorithm", "grid"], "enumerate"),
        (["optimize-graph", str(src), "-o", str(out), "--device", "tpu"], "valid: cpu, cuda"),
        (["tune", "graph", str(src), "-o", str(out), "--trials", "0"], "positive"),
        (["optimize-graph", str(src), "-o", str(out), "--rules", str(tmp_path / "none.json")], "rules file"),
    ]
    for args, words in bad_cases:
        bad = CliRunner().invoke(app, [*args, "--db", db])
        msg = bad.output.strip()
        assert bad.exit_code == 2 and words in msg and msg.startswith("error:") and len(msg.splitlines()) == 1, args


def test_rules_generate_without_z3_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "z3", None)  # as if z3-solver were not installed
    r = CliRunner().invoke(app, ["rules", "generate", "--max-ops", "1", "-o", str(tmp_path / "r.json"),
                                 "--db", f"sqlite:///{tmp_path / 'r.db'}"])
    assert r.exit_code == 2 and "z3-solver" in r.output and "Traceback" not in r.output


def test_rules_generate(tmp_path):
    pytest.importorskip("z3", reason="rules generate proves rules with z3-solver (the graphs extra)")
    out = tmp_path / "rules.json"
    db = f"sqlite:///{tmp_path / 'r.db'}"
    r = CliRunner().invoke(app, ["rules", "generate", "--max-ops", "1", "--json", "-o", str(out), "--db", db])
    assert r.exit_code == 0, r.output
    assert len(r.stdout.strip().splitlines()) == 1
    d = json.loads(r.stdout)
    assert r.stderr.strip().splitlines() == [
        (f"rules generate: {d['graphs']:,} graphs enumerated, {d['generated']:,} candidate pairs verified: "
        f"{d['kept']:,} kept ({d['proved']:,} proved, {d['z3_unknown_or_timeout']:,} tested), {d['rules_written']:,} "
        f"rules ({d['stored_new']:,} new in the database) in {d['time_s']:.1f} s")]
    listed = json.loads(CliRunner().invoke(app, ["rules", "list", "--format", "json", "--db", db]).output)
    assert len(listed) == d["stored_new"] == d["rules_written"]
    assert all(x["provenance"].startswith("generated") and x["status"] in ("proved", "tested") for x in listed)
    with open(out) as f:
        assert d["graphs"] > 0 and d["rules_written"] == len(json.load(f)["rules"]) >= d["kept"]
    assert CliRunner().invoke(app, ["rules", "generate", "--max-ops", "7", "--db", db]).exit_code == 2


def test_optimize_graph_predicts_beyond_the_measurement_cap(tmp_path):
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(model_zoo.build("inception_v3", small=True), src)
    r = CliRunner().invoke(app, ["optimize-graph", str(src), "-o", str(out), "--trials", "40", "--max-measure", "20",
                                 "--json", "--db", f"sqlite:///{tmp_path / 'g.db'}"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["ops_estimated"] > 0 and d["ops_confirmed"] > 0 and d["check"]["passed"]


@pytest.mark.parametrize("args, message", [
    (["--status", "bogus"], "unknown status 'bogus'; valid: hand-written, proved, tested, unverified"),
    (["--status", "prooved"], "unknown status 'prooved'; valid: hand-written, proved, tested, unverified (did you mean 'proved'?)"),
    (["--provenance", "bultin"], "(did you mean 'builtin'?)"),
    (["--provenance", "nothing-like-it"], "unknown provenance 'nothing-like-it'; valid: builtin, file, generated"),
    (["--format", "jsn"], "unknown format 'jsn'; valid: table, csv, json (did you mean 'json'?)"),
])
def test_rules_list_refuses_unknown_choices_naming_the_closest(tmp_path, args, message):
    from autotune.db import open_database

    url = f"sqlite:///{tmp_path / 'r.db'}"
    open_database(url).close()  # rules list reads an existing database
    r = CliRunner().invoke(app, ["rules", "list", *args, "--db", url])
    assert r.exit_code == 2 and r.stdout == "" and r.stderr.startswith("error: ") and message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_rules_list_filters_by_valid_choices(tmp_path):
    """A valid status or provenance prefix lists what matches, even nothing; builtin rules are stored by a search."""
    from autotune.db import open_database
    from autotune.search_spaces.graphs.builtin_rules import builtin_rules
    from autotune.search_spaces.graphs.rule_files import rule_record

    db = f"sqlite:///{tmp_path / 'r.db'}"
    database = open_database(db)
    database.save_rules([rule_record(r) for r in builtin_rules()])
    database.close()
    tested = [r.name for r in builtin_rules() if r.status == "tested"]  # verified numerically (no z3 for erf, exp)
    assert tested == ["fuse_gelu_torchscript", "fuse_gelu_dynamo", "fuse_gelu_tanh", "fuse_attention"]
    for args, n in ((["--status", "hand-written"], len(builtin_rules()) - 4), (["--status", "tested"], 4),
                    (["--status", "proved"], 0),
                    (["--provenance", "built"], len(builtin_rules())), (["--provenance", "generated:conv"], 0)):
        r = CliRunner().invoke(app, ["rules", "list", *args, "--format", "json", "--db", db])
        assert r.exit_code == 0 and len(json.loads(r.stdout)) == n, (args, r.output)


def test_a_model_with_dynamic_axes_runs_at_the_given_input_shape(tmp_path):
    """BERT-like: int64 token ids with dynamic batch and sequence axes into an embedding, then two MatMuls
    sharing their input. --input-shape fixes the axes; a rewritten model is written with that static shape, the
    input model kept with its dynamic axes."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 16])
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("emb", (100, 16)), ("wq", (16, 16)), ("wk", (16, 16)))]
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["e"]), helper.make_node("MatMul", ["e", "wq"], ["q"]),
             helper.make_node("MatMul", ["e", "wk"], ["k"]), helper.make_node("Add", ["q", "k"], ["y"])]
    src, dst = tmp_path / "bert.onnx", tmp_path / "o.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "bert", [ids], [out], inits),
                                opset_imports=[helper.make_opsetid("", 17)]), src)
    args = ["optimize-graph", str(src), "-o", str(dst), "--trials", "20", "--rounds", "5", "--json", "--db",
            f"sqlite:///{tmp_path / 'g.db'}"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2 and "--input-shape input_ids=NxN" in json.loads(r.stdout.splitlines()[-1])["error"]
    r = CliRunner().invoke(app, args + ["--input-shape", "input_ids=2x8"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["check"]["passed"]
    kept = onnx.load(dst)
    dims = [x.dim_param or x.dim_value for x in kept.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ([2, 8] if d["kept"] else ["batch", "seq"])


def test_tune_graph_by_equality_saturation_is_logged_and_resumes(tmp_path, monkeypatch):
    """The e-graph search evaluates the input and the extracted graph (a whole-graph payload, stored as a
    trial), with its options; a rerun of the campaign resumes it and finds the same best graph. The fake
    device's op costs are a fixed function of each op, so the merges' gain does not hang on timing noise."""
    from autotune.db import open_database, queries
    from autotune.runners.graph import BACKENDS
    from autotune.testing.graphs import fake_backend

    monkeypatch.setitem(BACKENDS, "fake", fake_backend)

    src, out, db = tmp_path / "m.onnx", tmp_path / "o.onnx", f"sqlite:///{tmp_path / 'g.db'}"
    onnx.save(model_zoo.build("nasrnn", small=True), src)
    args = ["tune", "graph", str(src), "-o", str(out), "--algorithm", "equality-saturation", "--option",
            "max_iters=3", "--json", "--db", db, "--rounds", "3", "--device", "fake"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["algorithm"] == "equality-saturation" and d["evaluated"] == 2 and d["saturation"]["iterations"] <= 3
    assert d["predicted_speedup"] > 1.1 and d["check"]["passed"] and d["best_config"][0]["graph"]
    assert len(queries.trials(open_database(db), campaign=d["campaign"])) == 2
    d2 = json.loads(CliRunner().invoke(app, args).stdout)
    assert d2["resumed"] and d2["campaign"] == d["campaign"] and d2["best_config"] == d["best_config"]


def test_ctrl_c_prints_a_command_that_resumes_the_campaign(tmp_path, monkeypatch):
    """Ctrl-C mid-search: exit 130 and a `tune graph` command (its model, -o, rules file, input shape and options)
    that, run as printed, resumes the same campaign to its budget and writes the output model."""
    import re
    import shlex

    from autotune.db import open_database
    from autotune.runners.graph import BACKENDS, GraphCostRunner
    from autotune.testing.fakes import interrupting
    from autotune.testing.graphs import fake_backend

    Interrupting = interrupting(GraphCostRunner, 3)  # Ctrl-C at the 4th batch of graphs (a fake: for this test only)

    monkeypatch.setitem(BACKENDS, "fake", fake_backend)  # op costs as a fixed function of each op
    src, out, url = tmp_path / "m.onnx", tmp_path / "out model.onnx", f"sqlite:///{tmp_path / 'g.db'}"
    onnx.save(model_zoo.build("nasrnn", small=True), src)
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([_RELU_TWICE]))
    args = ["tune", "graph", str(src), "-o", str(out), "--device", "fake", "--trials", "40", "--batch", "8",
            "--rounds", "3", "--rules", str(rules), "--input-shape", "x0=1x16", "--option", "alpha=1.1",
            "--db", url, "--no-progress"]
    with monkeypatch.context() as m:
        m.setattr("autotune.drivers.graph.GraphCostRunner", Interrupting)
        r = CliRunner().invoke(app, args)
    assert r.exit_code == 130, r.output
    line = [x for x in r.stderr.splitlines() if x.startswith("interrupted: ")][-1]
    stored = int(re.match(r"interrupted: (\d+) trials stored; resume with: autotune tune graph ", line).group(1))
    command = shlex.split(line.split("resume with: ", 1)[1])
    assert command[3] == str(src) and command[command.index("-o") + 1] == str(out)
    assert {"alpha=1.1", "x0=1x16", str(rules), "fake"} <= set(command)
    name = command[command.index("--campaign") + 1]
    db = open_database(url)
    assert db.campaign(name).status == "interrupted" and 0 < stored < 40 and not out.exists()
    d = json.loads(CliRunner().invoke(app, command[1:] + ["--json"]).stdout.splitlines()[-1])
    assert d["campaign"] == name and d["resumed"] and d["trials"] == 40 and db.campaign(name).status == "finished"
    assert out.exists()
    db.close()


def test_ctrl_c_in_the_end_to_end_check_prints_a_command_that_resumes_the_campaign(tmp_path, monkeypatch):
    """Ctrl-C after the search, while the best graph is checked end to end: the search is stored, and the command
    printed resumes the finished campaign (nothing more is searched), checks it and writes the output model."""
    import shlex

    from autotune.runners.graph import BACKENDS
    from autotune.testing.graphs import fake_backend

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setitem(BACKENDS, "fake", fake_backend)
    src, out, url = tmp_path / "m.onnx", tmp_path / "o.onnx", f"sqlite:///{tmp_path / 'g.db'}"
    onnx.save(model_zoo.build("nasrnn", small=True), src)
    args = ["tune", "graph", str(src), "-o", str(out), "--device", "fake", "--trials", "16", "--batch", "8",
            "--rounds", "3", "--db", url, "--no-progress"]
    with monkeypatch.context() as m:
        m.setattr("autotune.drivers.graph.finalize", interrupted)
        r = CliRunner().invoke(app, args)
    assert r.exit_code == 130, r.output
    prefix = "interrupted: 16 trials stored, the end-to-end check not done; resume with: autotune tune graph "
    line = [x for x in r.stderr.splitlines() if x.startswith("interrupted: ")][-1]
    assert line.startswith(prefix) and not out.exists()
    command = shlex.split(line.split("resume with: ", 1)[1])
    d = json.loads(CliRunner().invoke(app, command[1:] + ["--json"]).stdout.splitlines()[-1])
    assert d["resumed"] and d["trials"] == 16 and d["status"] == "finished" and out.exists()


_RELU_TWICE = {"name": "relu_twice", "source": [{"op": "Relu", "in": ["x"], "out": ["a"]},
                                               {"op": "Relu", "in": ["a"], "out": ["y"]}],
               "target": [{"op": "Relu", "in": ["x"], "out": ["y2"]}], "outputs": {"y": "y2"}}


@pytest.mark.parametrize("text, message", [
    ('{"rules": [{"name": "r", "source": [', "is not valid JSON: "),
    (json.dumps([{**_RELU_TWICE, "target": [{"op": "Reluu", "in": ["x"], "out": ["y2"]}]}]),
     "rule 1 ('relu_twice'): target op 1: unknown op 'Reluu' (did you mean 'Relu'?)"),
    (json.dumps({"rules": [{k: v for k, v in _RELU_TWICE.items() if k != "target"}]}),
     "rule 1 ('relu_twice'): missing key 'target'"),
])
def test_a_bad_rules_file_exits_2_naming_the_file_and_the_fault(tmp_path, text, message):
    src, rules = tmp_path / "m.onnx", tmp_path / "my rules.json"
    onnx.save(model_zoo.build("nasrnn", small=True), src)
    rules.write_text(text)
    r = CliRunner().invoke(app, ["tune", "graph", str(src), "-o", str(tmp_path / "o.onnx"), "--rules", str(rules),
                                 "--db", f"sqlite:///{tmp_path / 'g.db'}"])
    assert r.exit_code == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1, r.output
    assert r.stderr.startswith(f"error: rules file {str(rules)!r}") and message in r.stderr
    assert not (tmp_path / "g.db").exists()  # refused before any work


def test_rules_from_a_file_are_stored_as_the_files_and_unverified_whatever_it_claims(tmp_path):
    """A file's rule that says it is built in and proved is stored with the file as its provenance, unverified;
    a rule the database already holds (built in, or proved by `rules generate`) keeps its own row."""
    from autotune.db import open_database, queries
    from autotune.search_spaces.graphs.builtin_rules import builtin_rules
    from autotune.search_spaces.graphs.rules import Rule

    src, rules, db = tmp_path / "m.onnx", tmp_path / "rules.json", f"sqlite:///{tmp_path / 'g.db'}"
    onnx.save(model_zoo.build("nasrnn", small=True), src)
    proved_elsewhere = {**_RELU_TWICE, "name": "relu_thrice", "source": _RELU_TWICE["source"] + [
        {"op": "Relu", "in": ["y"], "out": ["z"]}], "outputs": {"z": "y2"}}
    database = open_database(db)
    database.save_rules([{**proved_elsewhere, "provenance": "generated:elementwise", "status": "proved",
                          "key": Rule.from_json(proved_elsewhere).key}])
    builtin = next(r for r in builtin_rules() if hasattr(r, "source")).to_json()
    claims = [{**_RELU_TWICE, "provenance": "builtin", "status": "proved"},
              {**proved_elsewhere, "status": "proved"}, {**builtin, "name": "copy_of_a_builtin"}]
    rules.write_text(json.dumps({"rules": claims}))
    r = CliRunner().invoke(app, ["tune", "graph", str(src), "-o", str(tmp_path / "o.onnx"), "--rules", str(rules),
                                 "--trials", "5", "--rounds", "3", "--db", db])
    assert r.exit_code == 0, r.output
    stored = queries.rules(database).set_index("name")
    assert stored.loc["relu_twice", ["provenance", "status"]].tolist() == [f"file:{rules}", "unverified"]
    assert stored.loc["relu_thrice", ["provenance", "status"]].tolist() == ["generated:elementwise", "proved"]
    assert "copy_of_a_builtin" not in stored.index and stored.loc[builtin["name"], "provenance"] == "builtin"
    r = CliRunner().invoke(app, ["rules", "list", "--status", "unverified", "--provenance", "file", "--format", "json",
                                 "--db", db])
    assert [x["name"] for x in json.loads(r.stdout)] == ["relu_twice"]
    database.close()


def test_rules_generate_that_cannot_write_its_file_keeps_the_rules_and_the_old_file(tmp_path, monkeypatch):
    """The rules are stored before the file is written, and the file is written whole or not at all: a write that
    fails (a full disk) is one line saying the rules are stored, and leaves the file that was there."""
    import errno
    import os

    pytest.importorskip("z3", reason="rules generate proves rules with z3-solver (the graphs extra)")
    out = tmp_path / "rules.json"
    out.write_text("old rules\n")
    db = f"sqlite:///{tmp_path / 'r.db'}"

    def full_disk(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    r = CliRunner().invoke(app, ["rules", "generate", "--max-ops", "1", "-o", str(out), "--db", db, "--no-progress"])
    monkeypatch.undo()
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert f"cannot write the rules file {str(out)!r}: No space left on device; the " in r.output
    assert "rules kept are stored in the database (autotune rules list)" in r.output
    assert out.read_text() == "old rules\n" and sorted(p.name for p in tmp_path.iterdir()) == ["r.db", "rules.json"]
    listed = json.loads(CliRunner().invoke(app, ["rules", "list", "--format", "json", "--db", db]).output)
    assert listed and all(x["provenance"].startswith("generated") for x in listed)
