"""The generated CUDA kernels' semantics, checked without a GPU.

Each CUDA source is compiled as C++ with a small shim (threadIdx/blockIdx, __syncthreads as
a barrier over one OS thread per CUDA thread, warp shuffles through a per-warp barrier,
__shared__ as static storage because blocks run one after another) and run on the CPU
against the numpy reference. This checks indexing, bounds, shared-memory staging and
reductions of the code generators; it says nothing about speed. A real GPU run is in
tests/test_runner_cuda.py (skipped without a GPU).
"""

import ctypes
import hashlib
import shutil
import subprocess

import numpy as np
import pytest

from autotune.search_spaces.kernels import kernel_problem

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

SHIM = r"""
#include <algorithm>
#include <barrier>
#include <cmath>
#include <thread>
#include <vector>
using std::min; using std::max;
struct uint3 { unsigned x, y, z; };
static thread_local uint3 threadIdx;
static thread_local int tlinear;
static uint3 blockIdx;
static std::barrier<> *block_barrier;
static std::barrier<> *warp_barriers[32];
static float warp_slots[32][32];
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
inline void __syncthreads() { block_barrier->arrive_and_wait(); }
inline float __ldg(const float *p) { return *p; }
inline float __expf(float x) { return expf(x); }
inline float __shfl_xor_sync(unsigned, float v, int o) {
  int w = tlinear / 32, lane = tlinear % 32;
  warp_slots[w][lane] = v;
  warp_barriers[w]->arrive_and_wait();
  float r = warp_slots[w][lane ^ o];
  warp_barriers[w]->arrive_and_wait();
  return r;
}
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
inline float2 make_float2(float a, float b) { return {a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
"""

LAUNCH = r"""
extern "C" void launch(int gx, int gy, int gz, int bx, int by, int bz, float **a) {
  int nt = bx * by * bz;
  for (int z = 0; z < gz; ++z) for (int y = 0; y < gy; ++y) for (int x = 0; x < gx; ++x) {
    blockIdx = {(unsigned)x, (unsigned)y, (unsigned)z};
    std::barrier<> bar(nt);
    block_barrier = &bar;
    std::vector<std::barrier<> *> warps;
    for (int w = 0; w < (nt + 31) / 32; ++w) warp_barriers[w] = new std::barrier<>(std::min(32, nt - 32 * w));
    std::vector<std::thread> ts;
    for (int t = 0; t < nt; ++t)
      ts.emplace_back([=] {
        threadIdx = {(unsigned)(t % bx), (unsigned)(t / bx % by), (unsigned)(t / (bx * by))};
        tlinear = t;
        CALL;
      });
    for (auto &th : ts) th.join();
    for (int w = 0; w < (nt + 31) / 32; ++w) delete warp_barriers[w];
  }
}
"""


def emulate(template, config, workdir):
    src = template.source(config)
    n_in = len(template.input_shapes())
    call = "kernel(" + ", ".join(f"a[{i}]" for i in range(n_in + 1)) + ")"
    text = SHIM + src + LAUNCH.replace("CALL", call)
    digest = hashlib.sha1(text.encode()).hexdigest()[:16]
    cpp, so = workdir / f"e_{digest}.cpp", workdir / f"e_{digest}.so"
    cpp.write_text(text)
    r = subprocess.run(["g++", "-std=c++20", "-O1", "-w", "-shared", "-fPIC", "-pthread", "-o", str(so), str(cpp)],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    lib = ctypes.CDLL(str(so))
    inputs = template.make_inputs(0)
    out = np.full(template.output_shape(), np.nan, dtype=np.float32)
    arrays = [np.ascontiguousarray(x) for x in inputs] + [out]
    ptrs = (ctypes.c_void_p * len(arrays))(*[x.ctypes.data for x in arrays])
    grid, block, _ = template.launch(config)
    lib.launch(*map(int, grid), *map(int, block), ptrs)
    return template.check(out, template.reference(inputs))


def sample_configs(space, n, seed, max_threads=256):
    """The default and n random points with at most max_threads threads per block (OS threads are costly)."""
    rng = np.random.default_rng(seed)
    out = [space.initial().payload]
    while len(out) < n + 1:
        c = space.sample(rng).payload
        if "BM" in c:
            t = (c["BM"] // c["TM"]) * (c["BN"] // c["TN"])
        else:
            t = c["NT"] if "NT" in c else c["BX"] * c["BY"]
        if t <= max_threads:
            out.append(c)
    return out


CASES = [("gemm", "45,70,37", 6), ("gemm", "64,32,16", 3), ("conv2d", "2,5,9,11,6,3,3,stride=2,pad=1", 5),
         ("conv2d", "1,3,6,6,4,1,1", 2), ("softmax", "5,130", 6), ("softmax", "3,64", 3)]


def test_staged_vectorised_cuda_gemm_computes_the_reference(tmp_path):
    """The quick case of the default run: shared-memory staging, float4 loads, edge tiles."""
    space, t = kernel_problem("gemm", "45,72,36", "cuda")
    cfg = {"BM": 32, "BN": 32, "BK": 8, "TM": 4, "TN": 4, "VEC": 4, "SMEM": 1, "UNROLL": 2}
    assert space.is_valid(cfg)
    assert emulate(t, cfg, tmp_path) == ""


@pytest.mark.slow
@pytest.mark.parametrize("name,shape,n", CASES)
def test_generated_cuda_computes_the_reference(name, shape, n, tmp_path):
    space, t = kernel_problem(name, shape, "cuda")
    for cfg in sample_configs(space, n, seed=len(shape)):
        why = emulate(t, cfg, tmp_path)
        assert why == "", (cfg, why)
