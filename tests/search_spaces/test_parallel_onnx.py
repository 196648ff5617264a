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
