"""Models exported by PyTorch's exporters (two-layer BERT, GPT-2 and ViT from transformers, and torchvision's
CNNs where torchvision is installed, random weights; TorchScript at opset 17 and, with onnxscript, dynamo at
opset 18): each imports, optimizes (by taso-queue and by equality saturation) and exports to a model
onnxruntime loads at its own opset, computing the same; every attention of the transformers (each exporter
lays it out differently) matches the attention fusion. Slow, and skipped without the bench extra's torch and
transformers."""

import importlib.util

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("torch", reason="the exporter tests need torch (pip install 'autotune[bench]')")
pytest.importorskip("transformers", reason="the exporter tests need transformers (pip install 'autotune[bench]')")

import bench_graphs

from autotune.drivers.graph import optimize_graph
from autotune.runners.onnx_ops import max_errors
from autotune.search_spaces.graphs import onnx_io
from autotune.search_spaces.graphs.attention import FuseAttention


@pytest.mark.slow
def test_models_the_pytorch_exporters_write_import_optimize_and_export(tmp_path):
    import onnx

    models = bench_graphs.exported_models(str(tmp_path), small=True)
    expected = {"bert-torchscript", "gpt2-torchscript", "vit-torchscript"}
    if importlib.util.find_spec("torchvision"):
        expected |= {f"{n}-torchscript" for n in bench_graphs.VISION}
    if importlib.util.find_spec("onnxscript"):
        expected |= {n.replace("torchscript", "dynamo") for n in expected}
    assert set(models) == expected
    for name, model in models.items():
        g = onnx_io.from_onnx(model)
        assert len(list(FuseAttention().matches(g))) == len(g.by_op.get("Softmax", [])), name
        for algorithm in ("taso-queue", "equality-saturation"):
            out = tmp_path / f"{name}-{algorithm}.onnx"
            r = optimize_graph(model, str(out), trials=10, rounds=3, algorithm=algorithm, db=None)
            assert r["check"]["passed"], (name, algorithm)
            kept = onnx.load(out)
            assert kept.opset_import[0].version == model.opset_import[0].version
            assert max_errors(model, kept, trials=1)["max_rel_error"] < 1e-4, (name, algorithm)
