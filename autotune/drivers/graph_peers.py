"""The graph optimizers users pick instead of ours, run as a user would: onnxruntime's offline optimizer
(the model it writes at the extended level, with its fused contrib ops) and onnxsim (optional: the
``bench`` extra). A search may start from the fastest of their outputs, as a user chains tools."""

from __future__ import annotations

import os
import tempfile

from autotune.errors import MissingDependencyError, UsageError

PEERS = ("onnxruntime", "onnxsim")


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
    for name, fn in (("onnxruntime", ort_offline), ("onnxsim", onnxsim)):
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
    threads), timed interleaved with the original; ("original", model, 1.0) when none is faster."""
    from autotune.runners.onnx_ops import compare_latency

    peers = peer_outputs(model, which)
    if not peers:
        return "original", model, 1.0
    lat = compare_latency([model, *peers.values()], rounds=rounds, threads=threads)
    base = lat[0]["median_s"]
    best = min(range(1, len(lat)), key=lambda i: lat[i]["median_s"])
    if lat[best]["median_s"] >= base:
        return "original", model, 1.0
    name = list(peers)[best - 1]
    return name, peers[name], base / lat[best]["median_s"]
