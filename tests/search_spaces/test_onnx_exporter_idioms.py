"""Small hand-made ONNX models that reproduce what the PyTorch exporters and the onnx package's model zoo
write: each imports, exports at the opset it came in, loads in onnxruntime and computes what the original
computes (the full export run of torchvision and transformers models is in scripts/bench_graphs.py)."""

import os
import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper

from autotune.runners.onnx_ops import max_errors, random_feeds, session
from autotune.search_spaces.graphs import onnx_io, onnx_prepare
from autotune.search_spaces.graphs.inputs import index_bounds, table_bounds
from autotune.search_spaces.graphs.ir import TensorAttr


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "m", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def roundtrip(m):
    """Import and export ``m``; the export must load and match the original on random inputs."""
    g = onnx_io.from_onnx(m)
    out = onnx_io.to_onnx(g)
    assert max_errors(m, out, trials=2)["max_rel_error"] < 1e-6
    return g, out


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_shape_arithmetic_of_a_static_model_is_folded_into_constants():
    """TorchScript writes x.view(x.size(0), -1) as Shape -> Gather -> Unsqueeze -> Concat -> Reshape; with
    static input shapes it is constant, and the Reshape gets a constant target."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"]),
             helper.make_node("Relu", ["y"], ["z"])]
    inits = [("zero", np.array(0, np.int64)), ("axes", np.array([0], np.int64)), ("minus1", np.array([-1], np.int64))]
    g, out = roundtrip(model(nodes, [f32("x", [2, 3, 4])], [f32("z", [2, 12])], inits, opset=13))
    assert [n.op for n in g.nodes] == ["Reshape", "Relu"] and g.shape["z"] == (2, 12)
    assert out.opset_import[0].version == 13


def test_dropouts_unused_mask_is_ignored():
    nodes = [helper.make_node("Dropout", ["x"], ["y", "mask"]), helper.make_node("Relu", ["y"], ["z"])]
    g, out = roundtrip(model(nodes, [f32("x", [2, 8])], [f32("z", [2, 8])], opset=12))
    assert all(len(n.outputs) == 1 for n in g.nodes) and all(len(n.output) == 1 for n in out.graph.node)


def test_opset_18_split_and_reduce_forms_are_written_back_at_18():
    """The dynamo exporter writes opset 18: Split with num_outputs, ReduceMean with its axes as an input."""
    nodes = [helper.make_node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2),
             helper.make_node("ReduceMean", ["a", "axes"], ["m"], keepdims=1),
             helper.make_node("Add", ["b", "m"], ["y"])]
    m = model(nodes, [f32("x", [4, 6])], [f32("y", [4, 3])], [("axes", np.array([1], np.int64))], opset=18)
    g, out = roundtrip(m)
    assert out.opset_import[0].version == 18 and g.opset == 18


def test_opset_11_split_sizes_stay_an_attribute():
    nodes = [helper.make_node("Split", ["x"], ["a", "b"], axis=1, split=[2, 4]),
             helper.make_node("MatMul", ["a", "w"], ["y"]), helper.make_node("Concat", ["y", "b"], ["z"], axis=1)]
    m = model(nodes, [f32("x", [3, 6])], [f32("z", [3, 7])], [("w", np.ones((2, 3), np.float32))], opset=11)
    _, out = roundtrip(m)
    split = next(n for n in out.graph.node if n.op_type == "Split")
    assert out.opset_import[0].version == 11 and len(split.input) == 1
    assert [a.ints for a in split.attribute if a.name == "split"] == [[2, 4]]


def test_tensor_valued_attributes_are_written_as_tensors():
    attr = onnx_io._attr_value(TensorAttr.of(np.array([2.5], np.float32)))
    assert isinstance(attr, TensorProto) and numpy_helper.to_array(attr).tolist() == [2.5]
    # ConstantOfShape of a static shape becomes a constant; the model computes the same
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["c"], value=numpy_helper.from_array(np.array([2.5], np.float32))),
             helper.make_node("Mul", ["x", "c"], ["y"])]
    roundtrip(model(nodes, [f32("x", [2, 3])], [f32("y", [2, 3])], opset=9))


def test_token_ids_are_fed_as_integers_within_the_vocabulary():
    """BERT's input_ids: int64 indices into a 50-row embedding; the numeric check feeds int64 values below 50."""
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["e"], axis=0), helper.make_node("Relu", ["e"], ["y"])]
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 5])
    emb = np.random.default_rng(0).standard_normal((50, 4)).astype(np.float32)
    m = model(nodes, [ids], [f32("y", [2, 5, 4])], [("emb", emb)])
    feeds = random_feeds(session(m), seed=0, model=m)
    assert feeds["ids"].dtype == np.int64 and 0 <= feeds["ids"].min() and feeds["ids"].max() < 50
    roundtrip(m)


def test_an_index_shared_by_two_tables_stays_below_the_shorter():
    nodes = [helper.make_node("Gather", ["big", "ids"], ["a"], axis=0),
             helper.make_node("Gather", ["small", "ids"], ["b"], axis=1), helper.make_node("Relu", ["a"], ["y"])]
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [8])
    tables = [("big", np.zeros((50, 4), np.float32)), ("small", np.zeros((4, 3), np.float32))]
    m = model(nodes, [ids], [f32("y", [8, 4])], tables)
    assert index_bounds(m) == {"ids": 3} == table_bounds([("ids", 50), ("ids", 3)])


LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


@pytest.mark.skipif(not os.path.isdir(LIGHT), reason="this onnx package ships no light model zoo")
# AlexNet's ops and idioms are all in inception_v1 (LRN, Gemm, Reshape, Dropout, Softmax); its 4096-wide Gemms make
# it the slow one
@pytest.mark.parametrize("name", ["squeezenet", pytest.param("bvlc_alexnet", marks=pytest.mark.slow), "inception_v1"])
def test_the_onnx_packages_opset_9_models_roundtrip(name):
    """Dropout masks, opset-9 Softmax over a [N, C, 1, 1] tensor, initializers listed as graph inputs."""
    m = onnx.load(os.path.join(LIGHT, f"light_{name}.onnx"))
    _, out = roundtrip(m)
    assert out.opset_import[0].version == m.opset_import[0].version


def test_dynamic_axes_are_resolved_to_a_given_input_shape():
    """An export with dynamic batch and sequence axes: without shapes the import names the input and how
    to give its shape; with --input-shape it imports at that shape, and the model computes the same."""
    from autotune.errors import UsageError

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 3])
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"])], [x], [y], [("w", np.ones((4, 3), np.float32))])
    with pytest.raises(UsageError, match=re.escape("give it with input_shapes={'x': (N, N, 4)}")) as err:
        onnx_io.from_onnx(m)
    assert "give it with --input-shape x=NxNx4" in err.value.command_line_message()
    shapes = onnx_prepare.parse_input_shapes(["x=2x5x4"])
    g = onnx_io.from_onnx(m, input_shapes=shapes)
    assert g.inputs["x"][0] == (2, 5, 4) and g.shape["y"] == (2, 5, 3)
    fixed = onnx_prepare.with_input_shapes(m, shapes)
    assert max_errors(fixed, onnx_io.to_onnx(g), trials=1)["max_rel_error"] < 1e-6
    for bad, msg in ((["x=2x5"], "has 3 dims"), (["y=1x1x3"], "not an input"), (["x=2xax4"], "NAME=DIMS"),
                     (["x=2x5x7"], "fixed, not 7")):
        with pytest.raises(UsageError, match=msg):
            onnx_io.from_onnx(m, input_shapes=onnx_prepare.parse_input_shapes(bad))


def test_onnxruntime_contrib_ops_are_kept_as_opaque_nodes():
    """What onnxruntime's and onnxsim's fusions write (a com.microsoft FastGelu with its bias input here, which
    the registered FastGelu does not model): kept as an opaque node in its domain, its shape from a run in
    onnxruntime (ONNX shape inference does not know it), written back in that domain, so a search can start
    from a peer's output. A contrib op the rules write themselves (com.microsoft Gelu) is read as the
    registered op (FusedGelu) instead."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("FastGelu", ["h", "b"], ["f"], domain="com.microsoft"),
             helper.make_node("Gelu", ["f"], ["g"], domain="com.microsoft"),
             helper.make_node("MatMul", ["g", "w2"], ["y"])]
    g_ = helper.make_graph(nodes, "m", [f32("x", [2, 4])], [f32("y", [2, 3])],
                           [numpy_helper.from_array(np.ones((4, 8), np.float32), "w"),
                            numpy_helper.from_array(np.ones((8, 3), np.float32), "w2"),
                            numpy_helper.from_array(np.full(8, 0.5, np.float32), "b")])
    m = helper.make_model(g_, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    g, out = roundtrip(m)
    fast = next(n for n in g.nodes if n.op == "FastGelu")
    assert fast.domain == "com.microsoft" and fast.fixed == (((2, 8), "float32"),)
    gelu = next(n for n in g.nodes if n.op == "FusedGelu")
    assert gelu.domain == "" and gelu.fixed == () and g.shape[gelu.outputs[0]] == (2, 8)
    assert [(n.op_type, n.domain) for n in out.graph.node][1:3] == [("FastGelu", "com.microsoft"),
                                                                    ("Gelu", "com.microsoft")]
    assert {(o.domain, o.version) for o in out.opset_import} == {("", 17), ("com.microsoft", 1)}


def exporter_ops_model(opset):
    """The ops around which exporters write shape and mask handling, each timed alone by the search: Squeeze,
    Unsqueeze and Slice of constant axes and starts (Squeeze's and Unsqueeze's axes are inputs from opset 13 on,
    attributes before), ReduceMean (its axes an input from 18 on), outputs that are not float (Equal, Cast to bool, a Reshape of int64 ids), GatherND of more constant
    indices than a spec carries, Gelu (opset 20) and onnxruntime's FastGelu with a bias (com.microsoft)."""
    i64 = lambda name, v: (name, np.array(v, np.int64))  # noqa: E731
    reduce = (helper.make_node("ReduceMean", ["s", "axes1"], ["m"], keepdims=1) if opset >= 18 else
              helper.make_node("ReduceMean", ["s"], ["m"], axes=[1], keepdims=1))
    squeeze = (helper.make_node("Squeeze", ["x", "axes1"], ["s"]) if opset >= 13 else
               helper.make_node("Squeeze", ["x"], ["s"], axes=[1]))
    unsqueeze = (helper.make_node("Unsqueeze", ["fg", "axes0"], ["u"]) if opset >= 13 else
                 helper.make_node("Unsqueeze", ["fg"], ["u"], axes=[0]))
    nodes = [squeeze, reduce,
             helper.make_node("Sub", ["s", "m"], ["d"]),
             helper.make_node("Slice", ["d", "starts", "ends", "axes1"], ["sl"]),
             helper.make_node("Equal", ["sl", "zero"], ["e"]),
             helper.make_node("Cast", ["e"], ["eb"], to=TensorProto.BOOL),
             helper.make_node("Where", ["eb", "zero", "sl"], ["w"]),
             helper.make_node("FastGelu", ["w", "bias"], ["fg"], domain="com.microsoft"),
             unsqueeze,
             helper.make_node("GatherND", ["w", "indices"], ["gnd"]),
             helper.make_node("Reshape", ["ids", "flat"], ["r"]),
             helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT)]
    outputs = [f32("u", [1, 2, 4]), f32("gnd", [10]), f32("rf", [8])]
    if opset >= 20:
        nodes.append(helper.make_node("Gelu", ["d"], ["gelu"]))
        outputs.append(f32("gelu", [2, 8]))
    inits = [i64("axes1", [1]), i64("axes0", [0]), i64("starts", [2]), i64("ends", [6]), i64("flat", [8]),
             ("zero", np.array(0.0, np.float32)), ("bias", np.full(4, 0.5, np.float32)),
             i64("indices", [[i % 2, i % 4] for i in range(10)])]
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 4])
    g = helper.make_graph(nodes, "m", [f32("x", [2, 1, 8]), ids], outputs,
                          [numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)])


@pytest.mark.parametrize("opset", [11, 13, 18, 20])
def test_every_op_of_an_exporters_model_is_timed_alone_at_its_opset(opset):
    """The search costs a graph by timing each op alone in onnxruntime: an op it cannot time makes every graph
    holding it a failed trial, so a model whose ops cannot all be timed is never searched."""
    from autotune.runners.graph import node_spec
    from autotune.runners.onnx_ops import OnnxOpRunner
    from autotune.types import Candidate, Task

    g, _ = roundtrip(exporter_ops_model(opset))
    specs = [node_spec(g, n) for n in g.runtime_nodes()]
    assert {s["op"] for s in specs} >= {"Squeeze", "ReduceMean", "Slice", "Equal", "Cast", "FastGelu", "GatherND"}
    timed = OnnxOpRunner(min_time=0.0).measure(Task("op", "ops", {}), [Candidate(s) for s in specs])
    assert [(s["op"], m.error) for s, m in zip(specs, timed) if not m.ok] == []


@pytest.mark.parametrize("algorithm", ["taso-queue", "equality-saturation"])
def test_a_model_at_the_dynamo_exporters_opset_is_searched(tmp_path, algorithm):
    """Every op timed, the graphs the search evaluates are measured trials, not failures naming an op."""
    from autotune.db import open_database, queries
    from autotune.drivers.graph import optimize_graph

    url = f"sqlite:///{tmp_path / 'g.db'}"
    r = optimize_graph(exporter_ops_model(18), trials=4, rounds=1, db=url, campaign="c", algorithm=algorithm)
    assert r["ops_failed"] == [] and r["check"]["passed"]
    trials = queries.trials(open_database(url), campaign="c")
    assert len(trials) >= 1 and (trials["status"] == "OK").all(), trials["error"].tolist()
