"""Test doubles of the graph domain (unit tests only; never used by campaigns users run).

* :class:`FakeOpRunner`: op times as a fixed function of an op spec's FLOPs and bytes, so a
  graph search is exactly repeatable.
* :func:`register_fake_backend`: adds the device "fake" to the graph backends: fake op
  times, and whole-model latency that is the sum of the fake op times (the numeric check
  is onnxruntime's). ``python -m autotune.testing.graphs ARGS...`` is the ``autotune``
  command line with that device registered, for tests that run the command in a process.
"""

from __future__ import annotations

import sys

from autotune.runners.base import Runner
from autotune.types import Candidate, Device, Measurement, Status

FAKE_OP_DEVICE = Device("fake-op-runner", "simulated", {"fake": True})


def fake_op_seconds(spec: dict) -> float:
    """2 us per op plus 20 GFLOP/s and 5 GB/s: a fixed function of the op spec."""
    from autotune.search_spaces.graphs import ops

    ins = [tuple(i[0]) for i in spec["inputs"] if i is not None]
    outs = [tuple(o) for o in spec["outputs"]]
    return 2e-6 + ops.flops(spec["op"], ins, outs, spec["attrs"]) / 2e10 + ops.bytes_moved(ins, outs) / 5e9


class FakeOpRunner(Runner):
    """Times op specs (``runners.onnx_ops.op_spec``) by :func:`fake_op_seconds`; no runtime involved."""

    def __init__(self, device: Device = FAKE_OP_DEVICE):
        self.device = device
        self.calls = 0

    def measure(self, task, candidates: list[Candidate]) -> list[Measurement]:
        out = []
        for c in candidates:
            self.calls += 1
            try:
                t = fake_op_seconds(c.payload)
            except Exception as exc:  # noqa: BLE001 - errors are data
                out.append(Measurement(c, Status.RUNTIME_ERROR, error=f"{type(exc).__name__}: {exc}"))
                continue
            out.append(Measurement(c, Status.OK, times=[t, t, t], cost=t))
        return out


def _fake_latency(models, rounds: int = 15, **_) -> list[dict]:
    """Whole-model latency as the plain sum of fake op times (every round the same)."""
    from autotune.runners.graph import OpCosts
    from autotune.search_spaces.graphs import onnx_io
    from autotune.search_spaces.graphs.ir import Graph

    out = []
    for m in models:
        g = m if isinstance(m, Graph) else onnx_io.from_onnx(m)
        t = OpCosts(FakeOpRunner(), max_measure=10**9, label="fake", fusion=False, model=False).graph_cost(g)
        out.append({"median_s": t, "iqr_s": 0.0, "min_s": t, "times": [t] * rounds})
    return out


def fake_backend(threads: int = 1):
    from autotune.runners import onnx_ops
    from autotune.runners.graph import GraphBackend

    return GraphBackend("fake", FakeOpRunner(), "fake", False, _fake_latency, onnx_ops.max_errors)


def register_fake_backend() -> None:
    """Make ``device="fake"`` (``--device fake``) available to graph searches in this process."""
    from autotune.runners.graph import BACKENDS

    BACKENDS["fake"] = fake_backend


def main(argv: list[str] | None = None) -> None:
    """The ``autotune`` command line with the fake graph backend registered."""
    register_fake_backend()
    from autotune.cli.main import main as cli_main

    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    cli_main()


if __name__ == "__main__":
    main()
