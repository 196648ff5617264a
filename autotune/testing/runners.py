"""Conformance suite every Runner must pass. Subclass and define ``make_case`` returning
``(runner, task, good_candidates, bad)``: ``bad`` is a candidate, or a list of them, that must
not measure OK (an invalid point, a planted crash): errors are data, never exceptions.

tests/runners/test_runner_conformance.py runs it over every concrete Runner subclass of the
package (found by ``autotune.testing.discovery``), each built by its entries in
``RUNNER_FACTORIES`` below: a new Runner subclass needs an entry there, or that test fails.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from autotune.errors import MissingDependencyError
from autotune.testing.discovery import Unavailable, require_modules
from autotune.types import Candidate, Device, Measurement, Status


class RunnerConformance:
    def make_case(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def _case(self):
        runner, task, good, bad = self.make_case()
        return runner, task, list(good), (list(bad) if isinstance(bad, (list, tuple)) else [bad])

    def test_device_is_described(self):
        runner, *_ = self.make_case()
        try:
            assert isinstance(runner.device, Device) and runner.device.name and runner.device.key
            assert runner.device.kind in ("cpu", "cuda", "simulated"), runner.device.kind
        finally:
            runner.close()

    def test_measurements_match_candidates(self):
        """One Measurement per candidate, in order; OK ones carry positive finite times and a cost
        within them, failed ones an error; the bad candidates fail without an exception."""
        runner, task, good, bad = self._case()
        try:
            cands = [*good, *bad]
            results = runner.measure(task, cands)
            assert [m.candidate.key for m in results] == [c.key for c in cands]
            for m in results:
                assert isinstance(m, Measurement) and isinstance(m.status, Status)
            for m in results[:len(good)]:
                if m.status is Status.OK:
                    assert m.times and all(t > 0 and math.isfinite(t) for t in m.times)
                    assert m.cost is not None and min(m.times) <= m.cost <= max(m.times)
                else:
                    assert m.error
            for m in results[len(good):]:
                assert m.status is not Status.OK and m.error, f"bad candidate measured {m.status}: {m.candidate}"
            assert any(m.ok for m in results[:len(good)]), "no good candidate measured OK"
        finally:
            runner.close()

    def test_order_follows_the_batch(self):
        """Failures first, then the good candidates reversed and one of them twice: the results
        still come one per candidate, in the batch's order (never grouped by outcome or deduplicated)."""
        runner, task, good, bad = self._case()
        try:
            cands = [*bad, *good[::-1], good[0]]
            results = runner.measure(task, cands)
            assert [m.candidate.key for m in results] == [c.key for c in cands]
            assert all(not m.ok for m in results[:len(bad)])
        finally:
            runner.close()

    def test_empty_batch(self):
        runner, task, *_ = self.make_case()
        try:
            assert runner.measure(task, []) == []
        finally:
            runner.close()


# -- factories: each runner on a small task where it can run here ----------------------------
@dataclass(frozen=True)
class RunnerCase:
    """``make()`` returns ``(runner, task, good, bad)`` as ``make_case`` does, or raises
    MissingDependencyError / Unavailable (the reason) where it cannot run here."""

    id: str
    make: Callable


def build(case: RunnerCase):
    """``case.make()``; skips the test, with the reason, when a package or the hardware is missing."""
    try:
        return case.make()
    except (MissingDependencyError, Unavailable) as exc:
        pytest.skip(str(exc))


def _replay():
    import numpy as np

    from autotune.runners.replay import ReplayRunner
    from autotune.search_spaces.replay import ReplaySpace

    space = ReplaySpace("example:pnpoly-rtx3090")
    rng = np.random.default_rng(0)
    good = [space.sample(rng) for _ in range(5)]
    bad = Candidate({"between_method": 9, "block_size_x": 1, "tile_size": 1, "use_method": 0})  # not recorded
    return ReplayRunner(space.cache), space.task, good, bad


def _ray():
    """Two Ray actors on a local cluster, each replaying the pnpoly recording."""
    import functools

    from autotune.runners.ray import RayRunner

    runner, task, good, bad = _replay()
    return RayRunner(functools.partial(type(runner), runner.cache), actors=2), task, good, bad


def _fake():
    from autotune.testing.fakes import FakeRunner, small_knob_space

    space = small_knob_space()
    return FakeRunner(space), space.task, list(space.enumerate())[:4], Candidate({"x": 99, "y": 1, "mode": "a"})


def _c():
    from autotune.runners.c import CRunner
    from autotune.runners.timing import Protocol
    from autotune.testing.fakes import FakeCrashingSoftmax

    t = FakeCrashingSoftmax("16,40", "cpu", threads=1)
    fast = Protocol(warmup=1, min_repeats=3, max_repeats=20, min_time_s=0.01, budget_s=2.0)
    runner = CRunner(t, protocol=fast, run_timeout_s=5.0)
    cfg = t.default_config()
    bad = [Candidate({**cfg, "ACC": 2}),  # segfaults: a runtime error, the batch goes on
           Candidate({**cfg, "ACC": 3})]  # not a knob value: invalid, never compiled
    return runner, t.task, [Candidate({**cfg, "ACC": 1}), Candidate({**cfg, "ACC": 32})], bad


_GPU: dict = {}  # the probe's answer, asked once per process (it starts a worker process)


def _gpu_props() -> dict:
    """GPU 0's properties, or Unavailable saying why there is none usable here."""
    if "props" not in _GPU:
        from autotune.errors import UsageError
        from autotune.runners.cuda import probe_cuda_device

        try:
            _GPU["props"] = probe_cuda_device(0)
        except (MissingDependencyError, UsageError, OSError) as exc:
            _GPU["props"], _GPU["why"] = None, f"needs a CUDA GPU with pycuda or CuPy: {exc}"
    if _GPU["props"] is None:
        raise Unavailable(_GPU["why"])
    return _GPU["props"]


def _cuda():
    if shutil.which("nvcc") is None:
        raise Unavailable("needs nvcc (the CUDA toolkit)")
    from autotune.runners.cuda import CudaRunner
    from autotune.runners.timing import Protocol
    from autotune.search_spaces.kernels import Softmax

    props = _gpu_props()
    t = Softmax("64,1000", "cuda", props)
    fast = Protocol(warmup=2, min_repeats=3, max_repeats=20, min_time_s=0.005, budget_s=2.0)
    cfg = t.default_config()
    good = [Candidate({**cfg, "NT": 128}), Candidate({**cfg, "NT": 256})]
    return CudaRunner(t, protocol=fast, run_timeout_s=10.0), t.task, good, Candidate({**cfg, "NT": 96})


# a user's own C function (tune_kernel): the planted crash is a configuration that writes far out of bounds
_USER_C = """
void scale(float *y, const float *x, int n) {
  for (int i = 0; i < n; i += step) for (int j = i; j < i + step && j < n; j++) y[j] = factor * x[j];
#if crash
  for (long k = 0; k < (1L << 34); k += 4096) y[k] = 1.0f;
#endif
}
"""


def _user_c():
    import numpy as np

    from autotune.runners.c import UserCRunner
    from autotune.runners.timing import Protocol
    from autotune.search_spaces.kernels.user_kernel import UserKernel

    x, y = np.arange(64, dtype=np.float32), np.zeros(64, dtype=np.float32)
    args = [y, x, np.int32(64)]
    kernel = UserKernel("scale", _USER_C, "C", 64, args, {"step": [1, 8], "factor": [2], "crash": [0, 1]},
                        restrictions=["crash == 0 or step == 8"])
    fast = Protocol(warmup=0, min_repeats=3, max_repeats=3, min_time_s=0.0, budget_s=2.0)
    runner = UserCRunner(kernel, args, [2 * x, None, None], protocol=fast, run_timeout_s=5.0)
    good = [Candidate({"step": 1, "factor": 2, "crash": 0}), Candidate({"step": 8, "factor": 2, "crash": 0})]
    bad = [Candidate({"step": 8, "factor": 2, "crash": 1}),  # segfaults: a runtime error
           Candidate({"step": 1, "factor": 2, "crash": 1})]  # breaks the restriction: invalid, never compiled
    return runner, kernel.task, good, bad


def _user_cuda():
    if shutil.which("nvcc") is None:
        raise Unavailable("needs nvcc (the CUDA toolkit)")
    import numpy as np

    from autotune.runners.timing import Protocol
    from autotune.runners.user_cuda import UserCudaRunner
    from autotune.search_spaces.kernels.user_kernel import UserKernel

    props = _gpu_props()
    src = ("__global__ void scale(float *y, const float *x, int n) {\n"
           "  int i = blockIdx.x * block_size_x + threadIdx.x;\n  if (i < n) y[i] = 2.0f * x[i];\n}\n")
    x, y = np.arange(1000, dtype=np.float32), np.zeros(1000, dtype=np.float32)
    args = [y, x, np.int32(1000)]
    kernel = UserKernel("scale", src, "CUDA", 1000, args, {"block_size_x": [64, 128, 96]},
                        restrictions=["block_size_x % 32 == 0 and block_size_x != 96"],
                        max_threads=int(props.get("max_threads_per_block") or 1024))
    fast = Protocol(warmup=0, min_repeats=3, max_repeats=3, min_time_s=0.0, budget_s=2.0)
    runner = UserCudaRunner(kernel, args, [2 * x, None, None], protocol=fast, run_timeout_s=10.0)
    good = [Candidate({"block_size_x": 64}), Candidate({"block_size_x": 128})]
    return runner, kernel.task, good, Candidate({"block_size_x": 96})


def _op_specs():
    """Two op specs that run and a MatMul whose shapes do not match (fails when built or run)."""
    from autotune.runners.onnx_ops import op_spec

    good = [Candidate(op_spec("MatMul", {}, [((4, 8), "float32", False), ((8, 16), "float32", True)], [(4, 16)])),
            Candidate(op_spec("Relu", {}, [((2, 3), "float32", False)], [(2, 3)]))]
    bad = Candidate(op_spec("MatMul", {}, [((4, 8), "float32", False), ((5, 16), "float32", True)], [(4, 16)]))
    return good, bad


def _onnx_ops():
    require_modules("onnx", "onnxruntime")
    from autotune.runners.onnx_ops import OnnxOpRunner
    from autotune.types import Task

    good, bad = _op_specs()
    return OnnxOpRunner(min_time=0.001), Task("op", "mixed"), good, bad


def _torch_ops(device: str):
    def make():
        require_modules("torch")
        import torch

        from autotune.runners.torch_ops import TorchOpRunner
        from autotune.types import Task

        if device == "cuda" and not torch.cuda.is_available():
            raise Unavailable(f"needs torch with CUDA and an NVIDIA GPU (torch {torch.__version__} sees none)")
        good, bad = _op_specs()
        return TorchOpRunner(device, min_time=0.001), Task("op", "mixed", {"device": device}), good, bad
    return make


def _simulator():
    from autotune.runners.simulator.runner import SimulatorRunner
    from autotune.search_spaces.parallel.clusters import get_cluster
    from autotune.search_spaces.parallel.models import get_model

    runner = SimulatorRunner(get_model("rnnlm", 32), get_cluster("p100-4x4"))
    space = runner.space
    good = [space.initial(), *space.baselines().values()]
    bad = Candidate({"ops": {"lstm0": {"degrees": {"o": 3}}}})  # 3 does not divide the cluster: invalid
    return runner, space.task, good, bad


def _graph_cost(timed: bool):
    """GraphCostRunner on a small inception graph: graph costs from OpCosts, its ops timed by the
    fake op runner (``timed``) or, with neither op runner nor model, estimated from FLOPs and bytes."""
    def make():
        from autotune.runners.graph import GraphCostRunner, OpCosts
        from autotune.search_spaces.graphs.space import GraphSpace
        from autotune.testing.graphs import FakeOpRunner
        from autotune.testing.spaces import small_graph

        space = GraphSpace(small_graph())
        costs = OpCosts(FakeOpRunner(), label="fake") if timed else OpCosts(None, model=False)
        good = [space.initial(), *list(space.children(space.initial()))[:2]]
        bad = [Candidate([["no-such-rule", ["x"]]]),  # not a rewrite of this graph
               Candidate(good[-1].payload, "0" * 16)]  # a real rewrite under another graph's key
        return GraphCostRunner(space, costs), space.task, good, bad
    return make


def _fake_ops():
    from autotune.testing.graphs import FakeOpRunner
    from autotune.types import Task

    good, _ = _op_specs()
    return FakeOpRunner(), Task("op", "mixed"), good, [Candidate({"op": "MatMul"}), Candidate("not an op spec")]


def _function():
    from autotune.runners.function import FunctionRunner
    from autotune.types import Task

    def objective(config):
        if config["x"] < 0:
            raise ValueError("planted: x < 0")
        return 0.001 * (config["x"] + 1)

    good = [Candidate({"x": x}) for x in (0, 1, 2)]
    bad = [Candidate({"x": -1}),  # raises: a RUNTIME_ERROR holding the exception
           Candidate({"y": 1})]  # no knob x: a KeyError, the same
    return FunctionRunner(objective), Task("function", "conformance"), good, bad


def _function_isolated():
    """Each call in a fresh worker process; the objective (a picklable stdlib callable) reads knob x."""
    import operator

    from autotune.runners.function import FunctionRunner
    from autotune.types import Task

    good = [Candidate({"x": 0.5}), Candidate({"x": 2})]
    bad = [Candidate({"y": 1}),  # KeyError in the worker
           Candidate({"x": -1.0}),  # a negative cost
           Candidate({"x": "fast"})]  # not a number
    return FunctionRunner(operator.itemgetter("x"), isolate=True, timeout_s=30), Task("function", "x"), good, bad


def _command():
    """A Python one-liner as the program: prints its time, or exits 1 for a negative x."""
    import sys

    from autotune.runners.command import CommandRunner
    from autotune.search_spaces.space_file import Objective
    from autotune.types import Task

    code = "import sys; x = int(sys.argv[1]); sys.exit('planted failure') if x < 0 else print('time: %d ms' % (x + 1))"
    runner = CommandRunner([sys.executable, "-c", code, "{x}"], Objective(r"time: (\d+) ms", 1e-3), timeout_s=60,
                           knobs=["x"])
    bad = [Candidate({"x": -1}),  # exit status 1: a RUNTIME_ERROR with the stderr tail
           Candidate({"y": 1})]  # no knob x to fill in: INVALID, never run
    return runner, Task("command", "one-liner"), [Candidate({"x": 0}), Candidate({"x": 4})], bad


#: "module:Class" of every concrete Runner subclass -> the small cases the suite checks. Classes
#: are named as strings, imported only when built. A runner that needs hardware absent here
#: raises Unavailable with the reason, and its checks are skipped, listed with that reason.
RUNNER_FACTORIES: dict[str, list[RunnerCase]] = {
    "autotune.runners.replay:ReplayRunner": [RunnerCase("replay-pnpoly", _replay)],
    "autotune.runners.ray:RayRunner": [RunnerCase("ray-replay-pnpoly", _ray)],
    "autotune.runners.c:CRunner": [RunnerCase("c-softmax-planted-crash", _c)],
    "autotune.runners.cuda:CudaRunner": [RunnerCase("cuda-softmax", _cuda)],
    "autotune.runners.c:UserCRunner": [RunnerCase("user-c-planted-crash", _user_c)],
    "autotune.runners.user_cuda:UserCudaRunner": [RunnerCase("user-cuda-scale", _user_cuda)],
    "autotune.runners.onnx_ops:OnnxOpRunner": [RunnerCase("onnx-ops", _onnx_ops)],
    "autotune.runners.torch_ops:TorchOpRunner": [RunnerCase("torch-ops-cpu", _torch_ops("cpu")),
                                                 RunnerCase("torch-ops-cuda", _torch_ops("cuda"))],
    "autotune.runners.simulator.runner:SimulatorRunner": [RunnerCase("simulator-rnnlm-p100", _simulator)],
    "autotune.runners.graph:GraphCostRunner": [RunnerCase("graph-cost-fake-ops", _graph_cost(True)),
                                               RunnerCase("graph-cost-estimated", _graph_cost(False))],
    "autotune.runners.function:FunctionRunner": [RunnerCase("function-planted-raise", _function),
                                                  RunnerCase("function-isolated", _function_isolated)],
    "autotune.runners.command:CommandRunner": [RunnerCase("command-python-one-liner", _command)],
    "autotune.testing.fakes:FakeRunner": [RunnerCase("fake-knobs", _fake)],
    "autotune.testing.graphs:FakeOpRunner": [RunnerCase("fake-ops", _fake_ops)],
}
