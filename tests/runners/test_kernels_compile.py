"""Generated code compiles: every knob value of every C template (gcc), and CUDA templates to cubin (nvcc, no GPU needed)."""

import platform
import shutil

import numpy as np
import pytest

from autotune.runners.c import DEFAULT_FLAGS, CRunner
from autotune.search_spaces.kernels import TEMPLATES, kernel_problem

SHAPES = {"gemm": "100,130,70", "conv2d": "2,64,11,70,20,3,3,stride=1,pad=1", "softmax": "5,130"}
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit) is not installed")


def covering_configs(space, samples=400, seed=0):
    """A few valid points that together use every value of every knob (greedy set cover over samples)."""
    rng = np.random.default_rng(seed)
    pool = [space.initial()] + [space.sample(rng) for _ in range(samples)]
    todo = {(n, repr(v)) for n, vals in zip(space.names, space.values) for v in vals}
    chosen = []
    while todo:
        best = max(pool, key=lambda c: len(todo & {(n, repr(v)) for n, v in c.payload.items()}))
        gain = todo & {(n, repr(v)) for n, v in best.payload.items()}
        if not gain:
            break
        todo -= gain
        chosen.append(best)
    return chosen, todo


# Simulated hosts: knob values that depend on the CPU are derived from these properties, and the
# generated code is compiled for the matching x86-64 level, so every host kind is checked whatever
# the machine running the tests has.
SIMULATED_HOSTS = {
    "avx512": ({"cores": 8, "avx2": True, "avx512": True, "l1d_bytes": 48 * 1024, "l2_bytes": 2 << 20},
               "-march=x86-64-v4"),
    "avx2": ({"cores": 4, "avx2": True, "avx512": False, "l1d_bytes": 32 * 1024, "l2_bytes": 1 << 20},
             "-march=x86-64-v3"),
    "sse-only": ({"cores": 2, "avx2": False, "avx512": False, "l1d_bytes": 32 * 1024, "l2_bytes": 256 << 10},
                 "-march=x86-64"),
}
x86_only = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                              reason="simulated x86-64 hosts are compiled with x86-64 -march levels")


def compile_all(template, configs, flags):
    runner = CRunner(template, flags=flags)
    try:
        builds = list(runner._pool.map(runner.build, [c.payload for c in configs]))
        return [(c.payload, err[:500]) for c, (so, err, _) in zip(configs, builds) if so is None]
    finally:
        runner.close()


@x86_only
@pytest.mark.parametrize("host", list(SIMULATED_HOSTS))
@pytest.mark.parametrize("name", list(TEMPLATES))
def test_every_c_knob_value_compiles_on_each_host_kind(name, host):
    props, march = SIMULATED_HOSTS[host]
    space, t = kernel_problem(name, SHAPES[name], "cpu", props)
    configs, uncovered = covering_configs(space)
    assert not uncovered, f"no valid point on a {host} host uses {sorted(uncovered)}"
    flags = tuple(march if f == "-march=native" else f for f in DEFAULT_FLAGS)
    assert not compile_all(t, configs, flags)


def test_gemm_register_tiles_follow_the_host():
    """AVX-512's 32 vector registers allow 4 vectors per row; AVX2 and SSE's 16 do not."""
    spaces = {h: kernel_problem("gemm", "64,64,64", "cpu", p)[0] for h, (p, _) in SIMULATED_HOSTS.items()}
    knob = {h: dict(zip(s.names, s.values)) for h, s in spaces.items()}
    assert knob["avx512"]["NV"] == [1, 2, 3, 4] and knob["avx512"]["VW"] == [4, 8, 16]
    assert knob["avx2"]["NV"] == [1, 2, 3] and knob["avx2"]["VW"] == [4, 8]
    assert knob["sse-only"]["NV"] == [1, 2, 3] and knob["sse-only"]["VW"] == [4]
    assert knob["sse-only"]["simd"] == ["vecext"]


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_every_c_knob_value_compiles_on_this_host(name):
    space, t = kernel_problem(name, SHAPES[name], "cpu")
    configs, uncovered = covering_configs(space)
    assert not uncovered, f"no sampled point uses {sorted(uncovered)}"
    assert not compile_all(t, configs, DEFAULT_FLAGS)


@needs_nvcc
@pytest.mark.parametrize("name", list(TEMPLATES))
def test_cuda_default_and_samples_compile_to_cubin(name):
    from autotune.runners.cuda import CudaBuilder

    space, t = kernel_problem(name, SHAPES[name], "cuda")
    rng = np.random.default_rng(1)
    configs = [space.initial(), space.sample(rng)]
    b = CudaBuilder("sm_90")
    try:
        builds = b.build_many([t.source(c.payload) for c in configs])
        failed = [(c.payload, r[1][:500]) for c, r in zip(configs, builds) if r[0] is None]
        assert not failed
        for path, _, _, res in builds:
            with open(path, "rb") as f:
                assert f.read(4) == b"\x7fELF"  # a cubin is an ELF image
            assert res.get("registers", 0) > 0
    finally:
        b.close()


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", list(TEMPLATES))
def test_every_cuda_knob_value_compiles(name, arch):
    from autotune.runners.cuda import CudaBuilder

    space, t = kernel_problem(name, SHAPES[name], "cuda")
    configs, uncovered = covering_configs(space)
    assert not uncovered
    b = CudaBuilder(arch)
    try:
        builds = b.build_many([t.source(c.payload) for c in configs])
        assert not [(c.payload, r[1][:500]) for c, r in zip(configs, builds) if r[0] is None]
    finally:
        b.close()
