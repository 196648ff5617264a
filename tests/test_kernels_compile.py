"""Generated code compiles: every knob value of every C template (gcc), and CUDA templates to cubin (nvcc, no GPU needed)."""

import shutil

import numpy as np
import pytest
from autotune.runners.c import CRunner
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


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_every_c_knob_value_compiles(name):
    space, t = kernel_problem(name, SHAPES[name], "cpu")
    configs, uncovered = covering_configs(space)
    assert not uncovered, f"no sampled point uses {sorted(uncovered)}"
    runner = CRunner(t)
    try:
        builds = list(runner._pool.map(runner.build, [c.payload for c in configs]))
        failed = [(c.payload, err[:500]) for c, (so, err, _) in zip(configs, builds) if so is None]
        assert not failed
    finally:
        runner.close()


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
