"""`autotune tune parallel` on models read from files: an ONNX model's batch (a scalar input before it, a
symbolic one that --input-shape fixes) and a JSON graph's saved batch. The graph importer itself:
tests/search_spaces/test_parallel_onnx.py.

Every test runs in its tmp_path, and names its database there with --db unless it checks the default."""


import numpy as np
import pytest

from autotune.search_spaces.parallel.models import mlp
from parallel_cli_helpers import in_tmp, last_json, run, runner  # noqa: F401 (in_tmp: the autouse fixture)



def _onnx_model(path, x_shape, scalar_first=False):
    """x (``x_shape``) through a MatMul and a Relu; with ``scalar_first`` a scalar input before x scales it."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((16, 8), np.float32), "w")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    if scalar_first:
        inputs.insert(0, helper.make_tensor_value_info("scale", TensorProto.FLOAT, []))
        nodes[1:] = [helper.make_node("Mul", ["h", "scale"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    graph = helper.make_graph(nodes, "tiny", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_an_onnx_models_batch_is_its_first_non_scalar_inputs_and_input_shape_fixes_a_symbolic_one(tmp_path):
    """A scalar first input crashes nothing: the batch is x's. A symbolic batch is refused naming the
    --input-shape that fixes it (the option and parser of tune graph), and each shape is a campaign of its own."""
    out = last_json(run("--model", _onnx_model(tmp_path / "s.onnx", [4, 16], scalar_first=True), "--cluster",
                        "p100-4x4", "--trials", 3, "--json"))
    assert out["batch"] == 4 and out["best"]["iteration_s"] > 0
    dynamic = _onnx_model(tmp_path / "d.onnx", ["N", 16])
    r = run("--model", dynamic, "--cluster", "p100-4x4", "--trials", 3)
    assert r.exit_code == 2 and r.stderr == "error: input 'x' has a symbolic dimension 'N'; give it with --input-shape x=Nx16\n"
    at8 = last_json(run("--model", dynamic, "--cluster", "p100-4x4", "--trials", 3, "--input-shape", "x=8x16", "--json"))
    at16 = last_json(run("--model", dynamic, "--cluster", "p100-4x4", "--trials", 3, "--input-shape", "x=16x16", "--json"))
    assert (at8["batch"], at16["batch"]) == (8, 16) and at8["campaign"] != at16["campaign"]
    for args, msg in ((("--input-shape", "x=8"), "--input-shape x: the model's input has 2 dims, not 1"),
                      (("--input-shape", "x=8by16"), "--input-shape 'x=8by16': give NAME=DIMS"),
                      (("--input-shape", "y=8x16"), "--input-shape names 'y', which is not an input of the model")):
        r = run("--model", dynamic, "--cluster", "p100-4x4", "--trials", 3, *args)
        assert r.exit_code == 2 and r.stderr.startswith(f"error: {msg}") and len(r.stderr.splitlines()) == 1
    r = run("--model", "nmt", "--cluster", "p100-4x4", "--input-shape", "x=8x16")
    assert r.exit_code == 2 and r.stderr == "error: --input-shape applies to ONNX models, not 'nmt'\n"


def test_a_json_graph_at_another_batch_is_refused_naming_its_own(tmp_path):
    """A .json graph keeps the batch it was saved at: --batch at another batch exits with status 2 naming the
    saved one; the saved one (per micro-batch) runs."""
    mlp(64, layers=2, width=256, name="mlp-json").save(str(tmp_path / "m.json"))
    r = run("--model", tmp_path / "m.json", "--cluster", "p100-4x4", "--batch", 4096, "--trials", 3)
    assert r.exit_code == 2 and r.stderr == (
        f"error: the JSON graph {str(tmp_path / 'm.json')!r} was saved at batch 64, and a JSON graph is not rescaled "
        "(built-in and ONNX models are): leave --batch out or give 64 (per micro-batch), or save the graph at batch 4096\n")
    out = last_json(run("--model", tmp_path / "m.json", "--cluster", "p100-4x4", "--batch", 128, "--microbatches", 2,
                        "--trials", 3, "--json"))
    assert out["batch"] == 128 and out["microbatches"] == 2


def test_a_batch_below_one_is_refused_for_file_models_too(tmp_path):
    """--batch 0 with an ONNX model ran at the file's own batch (0 read as "not given"); with a JSON graph it was
    named as a batch to save the graph at. Both exit 2 naming --batch, before the database is opened."""
    mlp(64, layers=2, width=256, name="mlp-json").save(str(tmp_path / "m.json"))
    for model in (_onnx_model(tmp_path / "m.onnx", [4, 16]), tmp_path / "m.json"):
        for batch in (0, -2):
            r = run("--model", model, "--cluster", "p100-4x4", "--batch", batch, "--trials", 3)
            assert r.exit_code == 2 and r.stderr == f"error: --batch must be >= 1, got {batch}\n"
    assert not (tmp_path / "parallel.db").exists()


@pytest.mark.parametrize("text,msg", [
    ("{", "cannot read the JSON graph 'g.json': Expecting property name enclosed in double quotes"),
    ("[1]", "the JSON graph 'g.json' is not a model: a model JSON is an object with name, batch and ops, as "
     "Graph.save writes it"),
    ('{"name": "g", "batch": "many", "ops": []}',
     "the JSON graph 'g.json' is not a model: the model JSON's batch must be a whole number >= 1, not 'many'"),
    ('{"name": "g", "batch": 2, "ops": [{"name": "x", "type": "input", "dims": {"b": 2}, "roles": {"b": "sample"}, '
     '"out": ["b"]}]}', "the JSON graph 'g.json' is not a model: model 'g' has no ops besides its inputs"),
])
def test_a_json_graph_that_cannot_be_read_exits_2_with_one_line(text, msg, tmp_path):
    """A file that is not JSON, JSON that is not a graph, a batch that is not a number (each a traceback before) or a
    graph with nothing to time (which crashed the search dividing by its zero time)."""
    (tmp_path / "g.json").write_text(text)
    r = run("--model", "g.json", "--cluster", "p100-4x4", "--trials", 3)
    assert r.exit_code == 2 and r.stderr.startswith(f"error: {msg}") and len(r.stderr.splitlines()) == 1


def test_a_model_files_extension_is_read_in_any_case(tmp_path):
    """MODEL.ONNX is an ONNX file, as model.onnx is: not an unknown built-in model's name."""
    model = _onnx_model(tmp_path / "UPPER.ONNX", ["N", 16])
    out = last_json(run("--model", model, "--cluster", "p100-4x4", "--trials", 3, "--input-shape", "x=8x16", "--json"))
    assert out["batch"] == 8 and out["best"]["iteration_s"] > 0
