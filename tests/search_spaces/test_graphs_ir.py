"""Graph IR and ONNX import/export: round trips, hashing, folding, opaque ops, clear rejections."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper

from autotune.errors import UsageError
from autotune.runners.onnx_ops import max_errors
from autotune.search_spaces.graphs import model_zoo, onnx_io
from autotune.search_spaces.graphs.ir import Graph, Node


@pytest.mark.parametrize("name", sorted(model_zoo.MODELS))
def test_roundtrip_is_exact_and_loadable(name):
    model = model_zoo.build(name, small=True)
    g = onnx_io.from_onnx(model)
    out = onnx_io.to_onnx(g)
    onnx.checker.check_model(out)
    err = max_errors(model, out, trials=1)
    assert err["max_rel_error"] < 1e-6
    assert len(g.nodes) == len(model.graph.node)  # (weight-only nodes, e.g. NasRNN h0 @ W, are not run)


def test_opaque_ops_are_kept_with_shapes():
    g = onnx_io.from_onnx(model_zoo.build("bert_base", small=True))
    opaque = [n for n in g.nodes if n.op in ("Erf", "LayerNormalization")]
    assert opaque and all(n.fixed for n in opaque)
    assert g.shape[opaque[0].outputs[0]] == (1, 8, 32)


def test_structural_hash_ignores_tensor_names():
    w = {"w": np.ones((3, 3), np.float32)}
    a = Graph([Node.make("MatMul", ["x", "w"], ["y"]), Node.make("Relu", ["y"], ["z"])],
              {"x": ((2, 3), "float32")}, ["z"], w)
    b = Graph([Node.make("Relu", ["q"], ["z"]), Node.make("MatMul", ["x", "w"], ["q"])],
              {"x": ((2, 3), "float32")}, ["z"], w)
    c = Graph([Node.make("MatMul", ["x", "w"], ["y"]), Node.make("Sigmoid", ["y"], ["z"])],
              {"x": ((2, 3), "float32")}, ["z"], w)
    assert a.structural_hash() == b.structural_hash() != c.structural_hash()
    assert [n.op for n in b.nodes] == ["MatMul", "Relu"]  # own topological sort


def test_weight_only_subgraph_is_folded_and_free():
    w = {"w": np.full((3, 3), 2.0, np.float32), "k": np.full((3, 3), 0.5, np.float32)}
    g = Graph([Node.make("Mul", ["w", "k"], ["wk"]), Node.make("MatMul", ["x", "wk"], ["y"])],
              {"x": ((2, 3), "float32")}, ["y"], w)
    assert g.is_weight["wk"] and not g.is_weight["y"]
    assert [n.op for n in g.runtime_nodes()] == ["MatMul"]
    f = g.folded()
    assert [n.op for n in f.nodes] == ["MatMul"]
    np.testing.assert_allclose(f.weights[f.nodes[0].inputs[1]], np.ones((3, 3)))


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "t", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_rejections_name_node_and_op():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    custom = _model([helper.make_node("Foo", ["x"], ["y"], name="n1", domain="com.example")], [x], [y])
    with pytest.raises(UsageError, match="n1.*Foo.*domain"):
        onnx_io.from_onnx(custom)
    dyn = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    with pytest.raises(UsageError, match="symbolic dimension"):
        onnx_io.from_onnx(_model([helper.make_node("Relu", ["x"], ["y"])], [dyn], [y]))
    cyc = _model([helper.make_node("Add", ["x", "b"], ["a"], name="p"), helper.make_node("Relu", ["a"], ["b"]),
                  helper.make_node("Relu", ["a"], ["y"])], [x], [y])
    with pytest.raises(UsageError, match="cycle"):
        onnx_io.from_onnx(cyc)


def test_unsorted_onnx_nodes_are_sorted():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    m = _model([helper.make_node("Sigmoid", ["a"], ["y"]), helper.make_node("Relu", ["x"], ["a"])], [x], [y])
    g = onnx_io.from_onnx(m)
    assert [n.op for n in g.nodes] == ["Relu", "Sigmoid"]
    out = onnx_io.to_onnx(g)
    onnx.checker.check_model(out)


@pytest.mark.parametrize("include_pad", [0, 1])
def test_padded_average_pool_reference_matches_onnxruntime(include_pad):
    import onnxruntime as ort

    from autotune.search_spaces.graphs import ops

    x = np.random.default_rng(0).random((1, 2, 6, 6), dtype=np.float32)
    a = {"kernel_shape": (3, 3), "strides": (1, 1), "pads": (1, 0, 1, 2), "count_include_pad": include_pad}
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 0, 1, 2],
                            count_include_pad=include_pad)
    graph = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(ops.evaluate("AveragePool", [x], a)[0], want, rtol=1e-6)
