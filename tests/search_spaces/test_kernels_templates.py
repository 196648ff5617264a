"""Kernel templates: knob spaces (conformance), shapes, references, counts, code generation from valid configs only."""

import numpy as np
import pytest

from autotune.errors import UsageError
from autotune.search_spaces.kernels import TEMPLATES, Conv2d, Gemm, Softmax, kernel_problem
from autotune.search_spaces.kernels.base import DEFAULT_CUDA_PROPS

CPU_PROPS = {"cores": 4, "avx2": True, "avx512": True, "l1d_bytes": 48 * 1024, "l2_bytes": 1 << 20}
SHAPES = {"gemm": "67,45,33", "conv2d": "2,5,9,11,6,3,3,stride=2,pad=1", "softmax": "7,50"}


def _space(name, target, shape=None):
    props = CPU_PROPS if target == "cpu" else None
    return kernel_problem(name, shape or SHAPES[name], target, props)[0]


def test_full_gemm_cpu_space_samples_valid_points():
    space = _space("gemm", "cpu", "1024,1024,1024")
    rng = np.random.default_rng(5)
    points = [space.sample(rng) for _ in range(40)]
    assert all(space.contains(c) for c in points)
    assert {c.payload["threads"] for c in points} == {1, 2, 3, 4}
    assert space.size() > 10_000


@pytest.mark.parametrize("name", list(TEMPLATES))
@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_task_and_default(name, target):
    space, t = kernel_problem(name, SHAPES[name], target, CPU_PROPS if target == "cpu" else None)
    assert t.task.kind == "kernel" and t.task.name == name
    assert t.task.params["target"] == target and t.task.params["dtype"] == "float32"
    assert t.task.params["shape"] == t.shape and space.task == t.task
    default = t.default_config()
    assert space.contains(space.initial()) and space.initial().payload == default
    src = t.source(default)
    assert "kernel" in src and (("__global__" in src) == (target == "cuda"))


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_source_refuses_invalid_configs(name):
    _, t = kernel_problem(name, SHAPES[name], "cpu", CPU_PROPS)
    cfg = t.default_config()
    knob = next(iter(cfg))
    with pytest.raises(UsageError):
        t.source({**cfg, knob: "4); system(\"rm -rf /\"); (1"})  # text is never spliced into code
    with pytest.raises(UsageError):
        t.source({k: v for k, v in cfg.items() if k != knob})


def test_gemm_register_constraint_follows_the_cpu():
    avx2 = {**CPU_PROPS, "avx512": False}
    space, _ = kernel_problem("gemm", "256,256,256", "cpu", avx2)
    assert 16 not in space.values[space.names.index("VW")]
    rng = np.random.default_rng(0)
    for _ in range(50):
        c = space.sample(rng).payload
        assert c["MR"] * c["NV"] + c["NV"] + 1 <= 16


def test_cuda_space_respects_device_limits():
    props = {"max_threads_per_block": 256, "max_shared_per_block": 16 * 1024, "cc": [7, 5]}
    space, _ = kernel_problem("gemm", "512,512,510", "cuda", props)
    assert 4 not in space.values[space.names.index("VEC")]  # 510 is not a multiple of 4
    for c in space.enumerate():
        p = c.payload
        assert (p["BM"] // p["TM"]) * (p["BN"] // p["TN"]) <= 256
        if p["SMEM"]:
            assert (p["BK"] * (p["BM"] + 4) + p["BK"] * p["BN"]) * 4 <= 16 * 1024


def test_shapes_parse_and_fail_clearly():
    assert Gemm("M=8,N=4,K=2").shape == {"M": 8, "N": 4, "K": 2}
    assert Gemm({"M": 8, "N": 4, "K": 2}).shape == Gemm("8x4x2").shape
    assert Conv2d("1,2,5,5,3,3,3").shape["stride"] == 1
    for bad, word in [("8,4", "missing"), ("8,4,2,1", "too many"), ("8,a4,2", "integer"), ("8,0,2", "positive"),
                      ("M=8,N=4,Q=2", "unknown")]:
        with pytest.raises(UsageError, match=word):
            Gemm(bad)
    with pytest.raises(UsageError, match="empty output"):
        Conv2d("1,1,2,2,1,3,3")
    with pytest.raises(UsageError, match="unknown kernel"):
        kernel_problem("fft", "8", "cpu")
    with pytest.raises(UsageError, match="unknown target"):
        Gemm("8,8,8", "tpu")


def test_counts():
    g = Gemm("64,32,16", "cpu", CPU_PROPS)
    assert g.flops == 2 * 64 * 32 * 16 and g.bytes == 4 * (64 * 16 + 16 * 32 + 64 * 32)
    c = Conv2d("2,3,8,8,4,3,3,stride=1,pad=1", "cpu", CPU_PROPS)
    assert c.output_shape() == (2, 4, 8, 8) and c.flops == 2 * 2 * 4 * 8 * 8 * 3 * 9
    assert Softmax("10,20").flops == 5 * 200


def test_conv2d_reference_matches_a_direct_loop():
    t = Conv2d("2,3,7,6,4,3,2,stride=2,pad=1", "cpu", CPU_PROPS)
    x, w = t.make_inputs(1)
    ref = t.reference([x, w])
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    oh, ow = t.out_hw
    expect = np.zeros((2, 4, oh, ow))
    for n in range(2):
        for k in range(4):
            for i in range(oh):
                for j in range(ow):
                    expect[n, k, i, j] = (xp[n, :, 2 * i:2 * i + 3, 2 * j:2 * j + 2] * w[k]).sum()
    np.testing.assert_allclose(ref, expect, rtol=1e-12)


def test_softmax_reference_and_check():
    t = Softmax("3,5", "cpu", CPU_PROPS)
    (x,) = t.make_inputs(0)
    ref = t.reference([x])
    np.testing.assert_allclose(ref.sum(axis=1), 1.0)
    assert t.check(ref.astype(np.float32), ref) == ""
    bad = ref.astype(np.float32).copy()
    bad[1, 2] += 0.1
    assert "differ" in t.check(bad, ref)
    bad[0, 0] = np.nan
    assert "not finite" in t.check(bad, ref)


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_cpu_defaults_are_single_threaded(name):
    """The default is the baseline of speedup_over_default (docs/kernels.md): one thread for every template,
    whatever the core count; a pinned thread count is the only one there is."""
    _, t = kernel_problem(name, SHAPES[name], "cpu", CPU_PROPS)
    assert t.space().values[t.space().names.index("threads")][-1] == CPU_PROPS["cores"]
    assert t.default_config()["threads"] == 1
    _, pinned = kernel_problem(name, SHAPES[name], "cpu", CPU_PROPS, threads=3)
    assert pinned.default_config()["threads"] == 3


def test_a_shape_too_large_for_memory_is_refused_with_the_memory_it_needs():
    """No numpy MemoryError: the inputs are not made for a shape that cannot fit, and the message says why."""
    huge = Gemm("1000000,1000000,1000000", "cpu")
    assert huge.memory_needed() == {"host": 12 * 3 * 10**12, "device": 4 * 3 * 10**12}
    with pytest.raises(UsageError, match=r"gemm shape M=1000000,N=1000000,K=1000000 needs 32\.7 TiB of memory .*"
                                         r"float32 inputs and output, 10\.9 TiB.*choose a smaller shape"):
        huge.make_inputs()
    small = Softmax("64,64", "cpu")
    small.check_memory(host_bytes=12 * 2 * 64 * 64)  # exactly what it needs: accepted
    with pytest.raises(UsageError, match=r"needs 96 KiB of memory .* more than this machine's 95\.9 KiB"):
        small.check_memory(host_bytes=12 * 2 * 64 * 64 - 100)
    gpu = Softmax("8192,8192", "cuda", device_props={**DEFAULT_CUDA_PROPS, "memory_bytes": 256 * 2**20})
    with pytest.raises(UsageError, match=r"needs 512 MiB of GPU memory .* the GPU's 256 MiB"):
        gpu.check_memory()
    assert len(small.make_inputs()) == 1
