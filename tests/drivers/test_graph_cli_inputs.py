"""What `autotune tune graph` says about its inputs: models it cannot search or run, and its --help text."""

import json

import pytest
from typer.testing import CliRunner

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from autotune.cli.main import app


@pytest.fixture
def unrunnable(tmp_path):
    """A well-formed model whose op onnxruntime has no kernel for."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("FooBar", ["r"], ["y"])],
                              "g", [x], [y])
    path = tmp_path / "foobar.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


@pytest.mark.parametrize("start", [[], ["--start-from", "onnxruntime"]])
def test_a_model_onnxruntime_cannot_run_is_refused_before_anything_is_stored(unrunnable, tmp_path, start):
    """One line and exit status 2 before the search (it was said after a whole search, with its trials and a
    failed op timing stored; from a peer optimizer, a traceback)."""
    db = tmp_path / "never.db"
    r = CliRunner().invoke(app, ["tune", "graph", str(unrunnable), "-o", str(tmp_path / "o.onnx"), "--trials", "5",
                                 "--db", f"sqlite:///{db}", "--no-progress", *start])
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert r.stderr.startswith("error: onnxruntime cannot run the model: ") and "FooBar" in r.stderr
    assert len(r.stderr.splitlines()) == 1 and not db.exists()


def _relu_model(path, x_shape, inputs=True):
    """x -> Relu -> y; with ``inputs=False`` the Relu reads a constant instead (the model has no input)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, x_shape)
    const = [] if inputs else [numpy_helper.from_array(np.ones(x_shape, np.float32), "x")]
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x] if inputs else [], [y], const)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def test_a_model_of_constants_only_is_refused_and_one_with_an_empty_axis_is_searched(tmp_path):
    """A model whose every op folds into a constant has no graph to search: one line, exit status 2 (it was a
    ZeroDivisionError traceback after the search). A zero-size axis is a model onnxruntime runs (it was refused
    as one it cannot run: the numeric check took the maximum of an empty difference)."""
    db = tmp_path / "g.db"
    args = ["-o", str(tmp_path / "o.onnx"), "--trials", "5", "--rounds", "3", "--db", f"sqlite:///{db}", "--no-progress"]
    r = CliRunner().invoke(app, ["tune", "graph", str(_relu_model(tmp_path / "c.onnx", [2, 4], inputs=False)), *args])
    assert r.exit_code == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1, r.output
    assert r.stderr.startswith("error: the model computes its outputs from constants only") and not db.exists()
    r = CliRunner().invoke(app, ["tune", "graph", str(_relu_model(tmp_path / "z.onnx", [0, 4])), *args, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.splitlines()[-1])["check"]["passed"]


def test_the_input_model_kept_is_written_with_its_dynamic_axes(tmp_path):
    """--input-shape fixes a dynamic batch axis for the search and the check; when no rewrite is kept, the model
    written is the input as it came, which still runs at any batch size (it was written pinned to the shape
    given: a model exported for any batch then served one batch size only)."""
    import numpy as np
    import onnxruntime as ort

    out = tmp_path / "o.onnx"
    r = CliRunner().invoke(app, ["tune", "graph", str(_relu_model(tmp_path / "d.onnx", ["batch", 4])), "-o", str(out),
                                 "--input-shape", "x=2x4", "--trials", "5", "--rounds", "3",
                                 "--db", f"sqlite:///{tmp_path / 'g.db'}", "--no-progress", "--json"])
    assert r.exit_code == 0, r.output
    assert not json.loads(r.stdout.splitlines()[-1])["kept"]
    written = onnx.load(out)
    assert [d.dim_param or d.dim_value for d in written.graph.input[0].type.tensor_type.shape.dim] == ["batch", 4]
    x = np.ones((5, 4), np.float32)
    assert ort.InferenceSession(out.read_bytes()).run(None, {"x": x})[0].shape == (5, 4)


def test_the_help_text_spells_the_extras_to_install():
    """Square brackets in help text are rich markup unless escaped: `autotune[bench]` showed as `autotune`."""
    r = CliRunner().invoke(app, ["tune", "graph", "--help"], env={"COLUMNS": "400"})
    assert r.exit_code == 0 and "onnxsim (pip install 'autotune[bench]')" in r.output
