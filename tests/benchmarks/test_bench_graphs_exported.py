"""Models exported by PyTorch's exporters (two-layer BERT, GPT-2 and ViT from transformers with random
weights): each imports, optimizes and exports to a model onnxruntime loads, computing the same. Slow, and
skipped without the bench extra's torch and transformers."""

import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("torch", reason="the exporter tests need torch (pip install 'autotune[bench]')")
pytest.importorskip("transformers", reason="the exporter tests need transformers (pip install 'autotune[bench]')")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import bench_graphs  # noqa: E402

from autotune.drivers.graph import optimize_graph  # noqa: E402
from autotune.runners.onnx_ops import max_errors  # noqa: E402


@pytest.mark.slow
def test_models_the_pytorch_exporters_write_import_optimize_and_export(tmp_path):
    import onnx

    models = bench_graphs.exported_models(str(tmp_path), small=True)
    assert {"bert-torchscript", "gpt2-torchscript", "vit-torchscript"} <= set(models)
    for name, model in models.items():
        out = tmp_path / f"{name}-opt.onnx"
        r = optimize_graph(model, str(out), trials=10, rounds=3)
        assert r["check"]["passed"], name
        kept = onnx.load(out)
        assert kept.opset_import[0].version == model.opset_import[0].version
        assert max_errors(model, kept, trials=1)["max_rel_error"] < 1e-4, name
