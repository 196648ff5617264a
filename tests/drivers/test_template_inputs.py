"""What a user gives `autotune tune kernel` (shapes, threads) and what a shape costs in memory: a mistyped
shape is one line and exit status 2, never a silent other shape; a conv2d reference and memory estimate
that hold for large windows and padding; the thread counts offered are those this process may use."""

import os
import tracemalloc

import numpy as np
import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.errors import UsageError
from autotune.search_spaces.kernels import Conv2d, Gemm, cpu_props

cli = CliRunner()


@pytest.mark.parametrize("name,shape,word", [
    ("gemm", "", "the shape is empty"),                      # not the default 1024,1024,1024
    ("gemm", " ", "the shape is empty"),
    ("gemm", "64,,64,64", "empty name or value"),             # not M=64,N=64,K=64
    ("gemm", "64,64,64,", "empty name or value"),
    ("gemm", "M=64,N=,K=64", "empty name or value"),
    ("gemm", "M=8,M=64,N=64,K=64", "gives M twice"),          # not the last M
    ("gemm", "8,64,64,M=64", "gives M twice"),
    ("conv2d", "1,3,8,8,4,3,3,pad=-1", "pad=-1 must be 0 or more"),
    ("conv2d", "1,3,8,8,4,3,3,stride=99999999999999999999", "larger than the padded input"),
])
def test_a_mistyped_shape_is_refused_in_one_line(tmp_path, name, shape, word):
    db = tmp_path / "k.db"
    r = cli.invoke(app, ["tune", "kernel", name, "--shape", shape, "--trials", "2", "--db", f"sqlite:///{db}",
                         "--no-progress"])
    assert r.exit_code == 2, r.output
    assert word in r.output and "Traceback" not in r.output
    assert not db.exists()


def test_a_stride_up_to_the_padded_input_is_accepted():
    t = Conv2d("1,2,5,7,3,2,2,stride=9,pad=1", "cpu")  # max(H, W) + 2 * pad = 9
    assert t.out_hw == (1, 1)


def direct_conv2d(x, w, stride, pad):
    """The definition, one output value at a time (small shapes only)."""
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - r) // stride + 1, (wd + 2 * pad - s) // stride + 1
    out = np.zeros((n, k, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * stride:i * stride + r, j * stride:j * stride + s]
            out[:, :, i, j] = np.einsum("ncrs,kcrs->nk", win, w.astype(np.float64))
    return out


@pytest.mark.parametrize("shape", ["2,3,9,10,5,3,2,stride=2,pad=1", "1,4,7,7,3,3,3,stride=3,pad=2", "3,2,5,6,4,1,1",
                                   "1,1,4,4,1,4,4", "1,2,9,9,3,3,3,stride=7,pad=2"])
def test_conv2d_reference_is_the_definition(shape):
    t = Conv2d(shape, "cpu")
    x, w = t.make_inputs(3)
    s = t.shape
    np.testing.assert_allclose(t.reference([x, w]), direct_conv2d(x, w, s["stride"], s["pad"]), rtol=1e-12, atol=1e-12)


def test_conv2d_reference_memory_is_of_the_order_of_its_input_and_output():
    """A 9x9 window over 16 channels of 64x64: the unfolded N x C x OH x OW x R x S windows would be 42 MB."""
    t = Conv2d("1,16,64,64,4,9,9,pad=4", "cpu")
    inputs = t.make_inputs(0)
    tracemalloc.start()
    try:
        t.reference(inputs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8e6


def test_conv2d_memory_counts_the_padded_input():
    """1000 channels of 1x1 padded by 1000: 4e9 padded values (48 GB with the copies) for a 4-million-value output."""
    t = Conv2d("1,1000,1,1,1,1,1,pad=1000", "cpu")
    assert t.memory_needed()["host"] >= 12 * 1000 * 2001 * 2001
    with pytest.raises(UsageError, match="choose a smaller shape"):
        t.check_memory(host_bytes=16 << 30)


def test_thread_counts_are_those_this_process_may_run_on(monkeypatch):
    """Pinned to one core of many (taskset, a container's cpuset, a batch job): one thread, not one per core."""
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    assert cpu_props()["cores"] == 1
    space = Gemm("16,16,16", "cpu").space()
    assert space.values[space.names.index("threads")] == [1]
    with pytest.raises(UsageError, match="threads=2"):
        Gemm("16,16,16", "cpu", threads=2)
