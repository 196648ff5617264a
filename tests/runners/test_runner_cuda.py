"""CUDA runner: nvcc builds here (no GPU needed); runtime tests run only where a GPU, and pycuda or CuPy, are present."""

import os
import shutil

import numpy as np
import pytest

from autotune.errors import MissingDependencyError, UsageError
from autotune.runners.timing import Protocol
from autotune.search_spaces.kernels import Softmax, kernel_problem
from autotune.types import Candidate, Status

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None and not os.environ.get("NVCC"),
                                reason="nvcc (CUDA toolkit) is not installed")
FAST = Protocol(warmup=2, min_repeats=3, max_repeats=20, min_time_s=0.005, budget_s=2.0)
_PROBE: dict = {}


def gpu_props():
    """The GPU's properties, or None with the reason in _PROBE['why'] (probed once)."""
    if "props" not in _PROBE:
        from autotune.runners.cuda import probe_cuda_device

        try:
            _PROBE["props"] = probe_cuda_device(0)
        except (MissingDependencyError, UsageError, OSError) as exc:
            _PROBE["props"], _PROBE["why"] = None, str(exc)
    return _PROBE["props"]


@pytest.fixture
def gpu():
    props = gpu_props()
    if props is None:
        pytest.skip(f"needs a CUDA GPU with pycuda or CuPy: {_PROBE['why']}")
    return props


@needs_nvcc
def test_builder_compiles_caches_and_reports_errors(tmp_path):
    from autotune.runners.cuda import CudaBuilder

    _, t = kernel_problem("softmax", "8,64", "cuda")
    b = CudaBuilder("sm_80", workdir=tmp_path)
    try:
        src = t.source(t.default_config())
        path, err, secs, res = b.build(src)
        assert path and not err and secs > 0 and res["registers"] > 0
        again = b.build(src)
        assert again[0] == path and again[2] == 0.0
        bad = b.build_many([src.replace("__global__", "__global__ int oops"), None])
        assert bad[0][0] is None and "error" in bad[0][1] and bad[1] is None
    finally:
        b.close()
    with pytest.raises(UsageError, match="architecture"):
        CudaBuilder("compute 80; rm -rf")


def test_probe_without_a_gpu_fails_clearly():
    props = gpu_props()
    if props is not None:
        pytest.skip("a GPU is present")
    assert "pycuda" in _PROBE["why"] or "CUDA" in _PROBE["why"] or "device" in _PROBE["why"]


def test_cuda_runner_refuses_cpu_templates():
    from autotune.runners.cuda import CudaRunner

    _, t = kernel_problem("softmax", "8,64", "cpu")
    with pytest.raises(UsageError, match="cuda templates"):
        CudaRunner(t)


ILLEGAL = 'extern "C" __global__ void kernel(const float *x, float *y) { float *p = (float *)0x10; *p = x[0]; }\n'
# spins on the clock for about ten minutes (2^40 cycles): a loop with no effect may be compiled away
HANG = ('extern "C" __global__ void kernel(const float *x, float *y) { long long t0 = clock64(); '
        'while (clock64() - t0 < (1LL << 40)) { } y[0] = x[0]; }\n')


class PlantedCudaSoftmax(Softmax):
    """NT=64 writes to an illegal address (a fatal error: the worker restarts), NT=512 never ends."""

    def cuda_source(self, cfg):
        if cfg["NT"] == 64:
            return ILLEGAL
        if cfg["NT"] == 512:
            return HANG
        return super().cuda_source(cfg)


def planted(props):
    from autotune.runners.cuda import CudaRunner

    t = PlantedCudaSoftmax("64,1000", "cuda", props)
    return t, CudaRunner(t, protocol=FAST, run_timeout_s=5.0)


def cfg(t, nt):
    return Candidate({**t.default_config(), "NT": nt})


@pytest.mark.gpu
def test_fatal_error_and_hang_cost_one_candidate_each(gpu):
    t, runner = planted(gpu)
    try:
        ms = runner.measure(t.task, [cfg(t, 128), cfg(t, 64), cfg(t, 256), cfg(t, 512), cfg(t, 1024)])
        assert [m.status for m in ms] == [Status.OK, Status.RUNTIME_ERROR, Status.OK, Status.TIMEOUT, Status.OK]
        assert ms[-1].meta["worker_restarts"] >= 2
        assert runner.device.properties["sms"] > 0 and runner.device.properties["cc"]
        assert ms[0].meta["backend"] in ("pycuda", "cupy")
    finally:
        runner.close()


@pytest.mark.gpu
@pytest.mark.parametrize("name,shape", [("gemm", "257,129,64"), ("conv2d", "2,5,17,19,12,3,3,stride=2,pad=1"),
                                        ("softmax", "33,1000")])
def test_random_cuda_candidates_are_correct(gpu, name, shape):
    from autotune.runners.cuda import CudaRunner

    space, t = kernel_problem(name, shape, "cuda", gpu)
    runner = CudaRunner(t, protocol=FAST)
    try:
        rng = np.random.default_rng(0)
        ms = runner.measure(t.task, [space.initial()] + [space.sample(rng) for _ in range(12)])
        bad = [(m.candidate.payload, m.status, m.error[:300]) for m in ms if not m.ok]
        assert not bad
    finally:
        runner.close()


def _cloudpickle():
    try:
        import cloudpickle
    except ImportError:
        cloudpickle = pytest.importorskip("ray.cloudpickle", reason="needs cloudpickle (or ray, which has it)")
    return cloudpickle


@needs_nvcc
def test_the_build_stage_compiles_without_a_gpu_and_travels_by_pickle():
    """What RayRunner sends to a CPU worker: a function that travels by Ray's pickle (cloudpickle: the
    template's constraints are closures) and returns the cubin's bytes."""
    from autotune.runners.cuda import CudaBuildStage

    pickle = _cloudpickle()

    space, t = kernel_problem("softmax", "8,64", "cuda")
    stage = pickle.loads(pickle.dumps(CudaBuildStage(t, "sm_80", 120.0)))
    built = stage(t.task, space.initial())
    assert built.artifact and built.artifact[:4] == b"\x7fELF" and not built.error and built.info["registers"] > 0
    bad = stage(t.task, Candidate({**t.default_config(), "NT": 3}))
    assert bad.invalid and bad.artifact is None


@pytest.mark.gpu
def test_a_candidate_built_elsewhere_runs_on_the_gpu(gpu):
    """build_stage() on one side, run_built() on the GPU: the same answers as measure()."""
    from autotune.runners.cuda import CudaRunner

    pickle = _cloudpickle()

    space, t = kernel_problem("softmax", "33,1000", "cuda", gpu)
    runner = CudaRunner(t, protocol=FAST)
    try:
        stage = pickle.loads(pickle.dumps(runner.build_stage()))
        rng = np.random.default_rng(1)
        cands = [space.initial()] + [space.sample(rng) for _ in range(5)]
        ms = [runner.run_built(t.task, c, stage(t.task, c)) for c in cands]
        assert [m.status for m in ms] == [m.status for m in runner.measure(t.task, cands)]
        assert all(m.ok and m.meta["runner"] == "cuda" for m in ms), [m.error for m in ms if not m.ok]
    finally:
        runner.close()
