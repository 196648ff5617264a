"""`autotune tune graph` on what a user brings: a model older than opset 7, an output it cannot write (the input's
own path too), options refused with --json, and a model onnxruntime cannot run, said in one line."""

import json
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.drivers.graph import optimize_graph, write_model
from autotune.errors import UsageError


def _save(path, nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return str(path)


def _matmuls(path, opset=17, n=8):
    """x @ w1 + x @ w2, then Relu: two MatMuls of one input that the rules merge."""
    rng = np.random.default_rng(0)
    ws = [numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), f"w{i}") for i in (1, 2)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, n])
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["a"]), helper.make_node("MatMul", ["x", "w2"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    return _save(path, nodes, [x], [y], ws, opset)


def test_a_model_older_than_opset_7_is_converted_and_searched(tmp_path):
    """The documentation says older opsets are converted to 7; onnxruntime runs none older, and the model was
    refused as one it cannot run."""
    src = _matmuls(tmp_path / "old.onnx", opset=6)
    out = tmp_path / "o.onnx"
    r = optimize_graph(src, str(out), trials=5, rounds=3, db=f"sqlite:///{tmp_path / 'g.db'}")
    assert r["check"]["passed"] and r["nodes_before"] == 4
    written = onnx.load(str(out))
    if r["kept"]:  # a rewritten model: at the oldest opset onnxruntime runs
        assert [o.version for o in written.opset_import if o.domain == ""] == [7]
    else:  # the input model, as it came
        assert written.SerializeToString() == onnx.load(src).SerializeToString()


def _big_model(path):
    """A model of about 4 MB (one 1024x1024 weight)."""
    w = numpy_helper.from_array(np.ones((1024, 1024), np.float32), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])
    return _save(path, [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                 [x], [y], [w])


@pytest.fixture
def file_size_limit():
    """A context in which files this process writes stop at 1 MiB (as on a full disk, a write beyond it fails)."""
    import contextlib

    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if hard != resource.RLIM_INFINITY and hard < 1 << 20:
        pytest.skip("the file size limit is lower already")

    @contextlib.contextmanager
    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))
        try:
            yield
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))

    return limited


def test_a_write_that_fails_half_way_leaves_the_file_there_as_it_was(tmp_path, file_size_limit):
    src = _big_model(tmp_path / "m.onnx")
    before = open(src, "rb").read()
    model = onnx.load(src)
    with file_size_limit(), pytest.raises(UsageError, match=r"^cannot write the output model .*m\.onnx.*: File too "
                                                            r"large; the search is stored as campaign 'c1'"):
        write_model(model, src, "c1")
    assert open(src, "rb").read() == before and os.listdir(tmp_path) == ["m.onnx"]  # no temporary file left
    small = onnx.load(_matmuls(tmp_path / "s.onnx"))
    write_model(small, str(tmp_path / "s.json"))  # the format is onnx's for the suffix, as onnx.save writes
    assert json.loads((tmp_path / "s.json").read_text())["graph"]["node"][0]["op_type"] == "MatMul"


def test_an_output_that_cannot_be_written_is_one_json_error_and_the_input_is_intact(tmp_path, file_size_limit):
    """-o the input's own path, and the write fails after the search: the input model was truncated (opened for
    writing, then the write failed) and the error was a traceback."""
    src = _big_model(tmp_path / "m.onnx")
    before = open(src, "rb").read()
    with file_size_limit():
        r = CliRunner().invoke(app, ["tune", "graph", src, "-o", src, "--trials", "3", "--rounds", "2", "--json",
                                     "--no-progress", "--db", f"sqlite:///{tmp_path / 'g.db'}"])
    assert r.exit_code == 2, r.output
    doc = json.loads(r.stdout)
    assert doc["kind"] == "UsageError" and doc["error"].startswith(f"cannot write the output model {src!r}")
    assert "the same command with a -o that can be written resumes it" in doc["error"]
    assert open(src, "rb").read() == before


def test_rounds_below_one_is_refused_as_json_under_json(tmp_path):
    src = _matmuls(tmp_path / "m.onnx")
    r = CliRunner().invoke(app, ["tune", "graph", src, "-o", str(tmp_path / "o.onnx"), "--rounds", "0", "--json",
                                 "--db", f"sqlite:///{tmp_path / 'g.db'}"])
    assert r.exit_code == 2 and json.loads(r.stdout) == {"error": "--rounds must be at least 1, not 0",
                                                         "kind": "UsageError", "exit_code": 2}, r.output
    assert not (tmp_path / "g.db").exists()


def test_a_model_onnxruntime_cannot_run_is_one_line_with_its_reason(tmp_path, capfd):
    """The reason was cut off after onnxruntime's source location and function signature, and onnxruntime's own
    log line came before it on standard error."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    shape = numpy_helper.from_array(np.array([12, 16, 16], np.int64), "shape")
    src = _save(tmp_path / "m.onnx", [helper.make_node("Relu", ["x"], ["r"]),
                                      helper.make_node("Reshape", ["r", "shape"], ["y"])], [x], [y], [shape])
    r = CliRunner().invoke(app, ["tune", "graph", src, "-o", str(tmp_path / "o.onnx"), "--no-progress",
                                 "--db", f"sqlite:///{tmp_path / 'g.db'}"])
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1, r.output
    assert r.stderr.startswith("error: onnxruntime cannot run the model: ") and "onnxruntime_src" not in r.stderr
    assert "Input shape:{1,3,8,8}, requested shape:{12,16,16}" in r.stderr
    assert "onnxruntime" not in capfd.readouterr().err  # nothing from onnxruntime's own log


def test_resuming_a_campaign_of_another_model_or_rule_set_says_what_differs(tmp_path):
    """The refusal said the campaign 'already exists for another task or device': a re-exported model, another
    model or a --rules file added all read alike."""
    db = f"sqlite:///{tmp_path / 'g.db'}"
    args = ["-o", str(tmp_path / "o.onnx"), "--trials", "3", "--rounds", "2", "--no-progress", "--db", db,
            "--campaign", "mine"]
    first = _matmuls(tmp_path / "a.onnx")
    assert CliRunner().invoke(app, ["tune", "graph", first, *args]).exit_code == 0
    other = _matmuls(tmp_path / "b.onnx", n=4)
    r = CliRunner().invoke(app, ["tune", "graph", other, *args])
    assert r.exit_code == 2 and r.stderr.startswith("error: campaign 'mine' searched model 'a' (content "), r.output
    assert "not 'b' (content " in r.stderr and "input shapes x=2x8, not x=2x4" in r.stderr
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"name": "relu_twice", "source": [{"op": "Relu", "in": ["x"], "out": ["y"]},
                                                                  {"op": "Relu", "in": ["y"], "out": ["z"]}],
                                  "target": [{"op": "Relu", "in": ["x"], "out": ["y2"]}], "outputs": {"z": "y2"}}]))
    r = CliRunner().invoke(app, ["tune", "graph", first, *args, "--rules", str(rules)])
    assert r.exit_code == 2 and r.stderr.startswith("error: campaign 'mine' searched with ")
    assert "rules, not these " in r.stderr and "(a --rules file added, left out or changed)" in r.stderr
    assert CliRunner().invoke(app, ["tune", "graph", first, *args]).exit_code == 0  # the same model resumes it


def test_an_output_that_is_not_a_file_is_written_in_place(tmp_path):
    """A pipe (or /dev/null) named by -o is written to, not replaced by a file of that name."""
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    model = onnx.load(_matmuls(tmp_path / "m.onnx"))
    write_model(model, str(fifo))
    reader.join(10)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and got == [model.SerializeToString()]


@pytest.mark.parametrize("command", [["tune", "graph"], ["optimize-graph"], ["rules", "generate"], ["rules", "list"]])
def test_the_help_at_80_columns_cuts_nothing(command):
    """A word longer than the help column is cut with '…': the transformer optimizer's module name, and in
    `rules generate` (whose '--z3-timeout-ms <int range> [x>=1]' narrowed the column) the database URLs."""
    r = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "80"})
    assert r.exit_code == 0 and "--help" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 80 and "…" not in r.stdout


def test_a_z3_timeout_below_one_is_refused_as_json_under_json(tmp_path):
    r = CliRunner().invoke(app, ["rules", "generate", "--z3-timeout-ms", "0", "--json",
                                 "--db", f"sqlite:///{tmp_path / 'g.db'}"])
    assert r.exit_code == 2 and json.loads(r.stdout)["error"] == "--z3-timeout-ms must be at least 1, not 0", r.output
