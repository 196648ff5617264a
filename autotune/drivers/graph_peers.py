"""The graph optimizers users pick instead of ours, run as a user would: onnxruntime's offline optimizer
(the model it writes at the extended level, with its fused contrib ops), onnxruntime's transformer
optimizer (attention, GELU, LayerNorm fusions into its contrib ops; on models with a Softmax and a
LayerNormalization, where it applies) and onnxsim (optional: the ``bench`` extra). A search may start
from the fastest of their outputs, as a user chains tools."""

from __future__ import annotations

import os
import tempfile

import numpy as np

from autotune.errors import MissingDependencyError, UsageError

PEERS = ("onnxruntime", "ort-transformers", "onnxsim")


def ort_offline(model):
    """onnxruntime's offline optimizer at the extended level: the model it writes."""
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.optimized_model_filepath = os.path.join(tmp, "ort.onnx")
        so.log_severity_level = 3
        ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return onnx.load(so.optimized_model_filepath)


def ort_transformers(model):
    """onnxruntime's transformer optimizer (``onnxruntime.transformers.optimizer``) with its generic encoder
    fusions (model type "bert"; heads and hidden size read from the graph), None on a model that is not a
    transformer (no Softmax or no LayerNormalization): the optimizer does not apply there."""
    types = {n.op_type for n in model.graph.node}
    if not {"Softmax", "LayerNormalization"} <= types:
        return None
    import logging

    import onnx

    try:
        import sympy  # noqa: F401 - the optimizer's shape inference needs it, and imports it only when it runs
        from onnxruntime.transformers import optimizer
    except ImportError as exc:
        raise MissingDependencyError(f"the ort-transformers peer needs onnxruntime's transformer optimizer and "
                                     f"sympy ({exc}); pip install 'autotune[bench]'") from None

    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)  # it logs every fusion it tries
    copy = onnx.ModelProto()
    copy.CopyFrom(model)  # the optimizer rewrites the model it is given
    out = optimizer.optimize_model(copy, model_type="bert", num_heads=0, hidden_size=0, opt_level=0).model
    used = {n.domain for n in out.graph.node} - {"", "ai.onnx"} - {o.domain for o in out.opset_import}
    out.opset_import.extend(onnx.helper.make_opsetid(d, 1) for d in sorted(used))  # it writes contrib ops without their import
    return out


def onnxsim(model):
    """onnxsim's simplified model (MissingDependencyError without onnxsim; None when it cannot check it)."""
    try:
        import onnxsim as sim
    except ImportError:
        raise MissingDependencyError("the onnxsim peer needs 'onnxsim'; pip install 'autotune[bench]'") from None
    out, ok = sim.simplify(model)
    return out if ok else None


def peer_outputs(model, which: str) -> dict:
    """{peer: its model} for ``which``: a peer name, or "best" (every peer available here)."""
    if which not in (*PEERS, "best"):
        raise UsageError(f"start from one of {', '.join(PEERS)} or best, not {which!r}")
    out = {}
    for name, fn in (("onnxruntime", ort_offline), ("ort-transformers", ort_transformers), ("onnxsim", onnxsim)):
        if which in (name, "best"):
            try:
                m = fn(model)
            except MissingDependencyError:
                if which == name:
                    raise
                continue
            if m is not None:
                out[name] = m
    return out


def fastest(model, which: str, rounds: int = 15, threads: int = 1) -> tuple[str, object, float]:
    """(name, model, speed-up over ``model``) of the fastest peer output in onnxruntime (``threads`` intra-op
    threads) among those faster than ``model`` beyond noise (``rounds`` rounds in 5 blocks of fresh sessions,
    ``compare_blocks``); ("original", model, 1.0) when none is. A peer no faster than the model is not a
    better start: its rewrites can hide the structure our rules match (onnxruntime's offline output folds
    the attention's key transpose and scale into a FusedMatMul), and the search from the model may gain more."""
    from autotune.runners.onnx_ops import blocked_latency
    from autotune.runners.timing import compare_blocks

    peers = peer_outputs(model, which)
    if not peers:
        return "original", model, 1.0
    lat = blocked_latency([model, *peers.values()], rounds=max(rounds, 10), threads=threads)
    base = lat[0]
    faster = [i for i in range(1, len(lat)) if compare_blocks(base["block_medians"], lat[i]["block_medians"]) == "faster"]
    if not faster:
        return "original", model, 1.0
    best = min(faster, key=lambda i: lat[i]["median_s"])
    name = list(peers)[best - 1]
    gain = np.exp(np.mean(np.log(np.asarray(base["block_medians"]) / np.asarray(lat[best]["block_medians"]))))
    return name, peers[name], float(gain)  # the gain the verdict is on: over the blocks
