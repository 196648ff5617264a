"""tune_kernel on CUDA kernels: compiled with nvcc here (skipped where it is missing), run only where a GPU with
CuPy or pycuda is present (skipped with the reason otherwise)."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from kernel_tuner_helpers import EXAMPLES, REPO, db_url, needs_nvcc, trials_of

from autotune.drivers.kernel_tuner import tune_kernel
from autotune.errors import MissingDependencyError, UsageError
from autotune.search_spaces.kernels.user_kernel import UserKernel


@needs_nvcc
def test_cuda_example_compiles_with_nvcc_and_its_kernel_is_found():
    from autotune.runners.cuda import CudaBuilder
    from autotune.runners.user_cuda import find_kernel_symbol

    g = runpy.run_path(str(EXAMPLES / "vector_add_cuda.py"), run_name="kt_example")
    kernel = UserKernel("vector_add", g["kernel_string"], "CUDA", g["size"], g["args"], g["tune_params"])
    builder = CudaBuilder("sm_80")
    try:
        for cand in list(kernel.space().enumerate())[:2]:
            src = kernel.source(cand.payload)
            assert f"#define block_size_x {cand.payload['block_size_x']}\n" in src
            assert f"#define grid_size_x {-(-g['size'] // cand.payload['block_size_x'])}\n" in src
            cubin, err, _, _ = builder.build(src)
            assert cubin, err
            symbol, why = find_kernel_symbol(Path(cubin).read_bytes(), "vector_add")
            assert symbol == "_Z10vector_addPfS_S_i", why  # C++-mangled: no extern "C" needed
    finally:
        builder.close()


@needs_nvcc
def test_cuda_symbols_plain_mangled_namespaced_and_missing(tmp_path):
    from autotune.runners.cuda import CudaBuilder
    from autotune.runners.user_cuda import find_kernel_symbol

    src = """
__global__ void k1(float *x, int n) { x[0] = n; }
namespace ns { __global__ void k2(double *x) { x[0] = 1; } }
extern "C" __global__ void k3(float *x) { x[0] = 1; }
template <typename T> __global__ void k4(T *x) { x[0] = 1; }
template __global__ void k4<float>(float *);
template __global__ void k4<int>(int *);
"""
    builder = CudaBuilder("sm_80", workdir=tmp_path)
    try:
        cubin, err, _, _ = builder.build(src)
        assert cubin, err
        image = Path(cubin).read_bytes()
    finally:
        builder.close()
    assert find_kernel_symbol(image, "k1")[0] == "_Z2k1Pfi"
    assert find_kernel_symbol(image, "k2")[0] == "_ZN2ns2k2EPd"
    assert find_kernel_symbol(image, "k3")[0] == "k3"
    symbol, why = find_kernel_symbol(image, "k4")
    assert symbol is None and "several kernels" in why
    symbol, why = find_kernel_symbol(image, "nope")
    assert symbol is None and "no kernel named 'nope'" in why


def _gpu_reason() -> str | None:
    from autotune.runners.cuda import probe_cuda_device

    try:
        probe_cuda_device(0)
        return None
    except (MissingDependencyError, UsageError, OSError) as exc:
        return str(exc)


@needs_nvcc
def test_cuda_example_runs_on_a_gpu(tmp_path):
    why = _gpu_reason()
    if why is not None:
        g = runpy.run_path(str(EXAMPLES / "vector_add_cuda.py"), run_name="kt_example")
        with pytest.raises((MissingDependencyError, UsageError), match="pycuda|cupy|CUDA device"):
            tune_kernel("vector_add", g["kernel_string"], g["size"], g["args"], g["tune_params"],
                        db=db_url(tmp_path), quiet=True)
        pytest.skip(f"needs a CUDA GPU with CuPy or pycuda: {why}")
    url = db_url(tmp_path, "autotune.db")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, str(EXAMPLES / "vector_add_cuda.py")], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300, env=env, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    campaign = r.stdout.strip().splitlines()[-1].rsplit("campaign ", 1)[1]
    df = trials_of(url, campaign)
    assert len(df) == 6 and (df["status"] == "OK").all(), df[["status", "error"]]


@needs_nvcc
def test_cuda_wrong_answer_and_scalar_arguments_on_a_gpu(tmp_path):
    why = _gpu_reason()
    if why is not None:
        pytest.skip(f"needs a CUDA GPU with CuPy or pycuda: {why}")
    src = """
__global__ void axpy(double *y, const double *x, double a, long n, int bad) {
    long i = (long)blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i] + (bad && tile == 2 ? 1.0 : 0.0);
}
"""
    n = 10_000
    x, y = np.arange(n, dtype=np.float64), np.ones(n, dtype=np.float64)
    args = [y, x, np.float64(3.0), np.int64(n), np.int32(1)]
    results, env = tune_kernel("axpy", src, n, args, {"block_size_x": [128, 256], "tile": [1, 2]},
                               answer=[3.0 * x + 1.0, None, None, None, None], db=db_url(tmp_path), quiet=True)
    assert {r["tile"] for r in results} == {1} and len(results) == 2
    assert sorted(f["status"] for f in env["failed"]) == ["WRONG_RESULT", "WRONG_RESULT"]
