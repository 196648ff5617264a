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
