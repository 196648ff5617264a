"""ONNX models as parallelization inputs (through the graph space's importer)."""

import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install 'autotune[graphs]')")

from autotune.search_spaces.graphs import model_zoo
from autotune.search_spaces.parallel.models import get_model


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "resnet50.onnx"
    onnx.save(model_zoo.build("resnet50", small=True), str(path))
    return str(path)


def test_onnx_resnet_becomes_a_soap_graph(resnet):
    g = get_model(resnet, 16)
    assert g.batch == 16
    convs = [op for op in g.ops if op.type == "conv2d"]
    assert convs and all(op.roles["b"] == "sample" and op.roles["o"] == "parameter" for op in convs)
    assert all(op.dims["b"] == 16 for op in convs)
    g2 = get_model(resnet, 32)
    assert g2.flops == pytest.approx(2 * g.flops)  # the batch axis is rescaled
    # weights: the importer's parameters (conv kernels, batch norm, classifier)
    assert g.parameters > 0 and g.parameters == g2.parameters


def test_onnx_bert_matmuls(tmp_path):
    path = tmp_path / "bert.onnx"
    onnx.save(model_zoo.build("bert_base", small=True), str(path))
    g = get_model(str(path), 8)
    kinds = {op.type for op in g.ops}
    assert {"linear", "matmul"} <= kinds


def _stack(path, prefixes):
    """A chain of MatMul + Add blocks named as an exporter names them ("/h.0/fc/MatMul_output_0"), then a head."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, x = [], [], "x"
    for p in prefixes:
        inits.append(numpy_helper.from_array(np.ones((8, 8), np.float32), f"{p}/fc.weight"))
        nodes.append(helper.make_node("MatMul", [x, f"{p}/fc.weight"], [f"{p}/fc/MatMul_output_0"]))
        nodes.append(helper.make_node("Relu", [f"{p}/fc/MatMul_output_0"], [f"{p}/act/Relu_output_0"]))
        x = f"{p}/act/Relu_output_0"
    inits.append(numpy_helper.from_array(np.ones((8, 16), np.float32), "head.weight"))
    nodes.append(helper.make_node("MatMul", [x, "head.weight"], ["logits"]))
    graph = helper.make_graph(nodes, "stack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6, 8])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [4, 6, 16])], inits)
    onnx.save(helper.make_model(graph), str(path))
    return str(path)


def test_onnx_blocks_become_layers_that_pipelines_cut_between(tmp_path):
    from autotune.search_spaces.parallel.clusters import get_cluster
    from autotune.search_spaces.parallel.strategy import megatron

    g = get_model(_stack(tmp_path / "gpt.onnx", [f"/transformer/h.{i}" for i in range(4)]), 8)
    layer = {op.name: op.layer for op in g.ops}
    assert [layer[f"/transformer/h.{i}/fc/MatMul_output_0"] for i in range(4)] == [0, 1, 2, 3]
    assert layer["/transformer/h.2/act/Relu_output_0"] == 2 and layer["logits"] is None
    cluster = get_cluster("dgx-a100-x2")
    stage = {op.name: cfg.start // 8 for op, cfg in zip(g.ops, megatron(g, cluster, tensor=8, pipeline=2))}
    assert [stage[f"/transformer/h.{i}/act/Relu_output_0"] for i in range(4)] == [0, 0, 1, 1]
    assert stage["logits"] == 1
    # an encoder's and a decoder's block 0 are two layers
    t5 = get_model(_stack(tmp_path / "t5.onnx", ["/encoder/block.0", "/encoder/block.1", "/decoder/block.0"]), 8)
    assert sorted({op.layer for op in t5.ops if op.layer is not None}) == [0, 1, 2]


def _scalar_then_matrix(path, inputs):
    """A MatMul of ``x`` by a weight, scaled by every scalar input; ``inputs``: (name, shape) in the model's order."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((16, 8), np.float32), "w")
    nodes, y = [helper.make_node("MatMul", ["x", "w"], ["h0"])], "h0"
    for i, (name, shape) in enumerate(inputs):
        if name != "x":
            nodes.append(helper.make_node("Mul", [y, name], [f"h{i + 1}"]))
            y = f"h{i + 1}"
    nodes.append(helper.make_node("Relu", [y], ["y"]))
    graph = helper.make_graph(nodes, "scaled", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_the_batch_is_the_first_dimension_of_the_first_input_that_is_not_a_scalar(tmp_path):
    """A scalar input first (a temperature) has no batch: the batch is x's first dimension, 4; --batch rescales it."""
    path = _scalar_then_matrix(tmp_path / "m.onnx", [("scale", []), ("x", [4, 16])])
    g = get_model(path)
    assert g.batch == 4 and next(op for op in g.ops if op.type == "linear").dims["a0"] == 4
    g8 = get_model(path, 8)
    assert g8.batch == 8 and next(op for op in g8.ops if op.type == "linear").dims["a0"] == 8


def test_a_model_whose_batch_cannot_be_found_is_refused_naming_why(tmp_path):
    from onnx import TensorProto, helper

    from autotune.errors import UsageError

    a, b = (helper.make_tensor_value_info(n, TensorProto.FLOAT, []) for n in "ab")
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "scalars", [a, b],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "s.onnx"))
    with pytest.raises(UsageError, match="cannot find the batch of ONNX model .*s.onnx.*no input that is not a scalar"):
        get_model(str(tmp_path / "s.onnx"))
    # a symbolic batch: named with the input shapes that fix it (as tune graph takes them), and fixed by them
    path = _scalar_then_matrix(tmp_path / "n.onnx", [("x", ["N", 16])])
    with pytest.raises(UsageError, match=r"^input 'x' has a symbolic dimension 'N'; give it with input_shapes="):
        get_model(path)
    g = get_model(path, input_shapes={"x": (6, 16)})
    assert g.batch == 6 and g.meta["input_shapes"] == {"x": [6, 16]}
    with pytest.raises(UsageError, match="input_shapes applies to ONNX models, not 'nmt'"):
        get_model("nmt", input_shapes={"x": (6, 16)})
