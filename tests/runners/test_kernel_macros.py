"""Knob names that would become one C macro, or a macro the generated code defines itself, are refused before
anything is compiled or written: in a user kernel's source (the C and CUDA runners, tune_kernel) and in the
C header of export-configs (autotune/search_spaces/kernels/macros.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import open_database
from autotune.drivers.kernel_tuner import tune_kernel
from autotune.errors import UsageError
from autotune.search_spaces.kernels.user_kernel import UserKernel
from autotune.types import Candidate, Device, Measurement, Status, Task

ADD = "void add(float *y, int n) { for (int i = 0; i < n; i++) y[i] += 1.0f; }"


def _kernel(lang: str, params: dict, **kw) -> UserKernel:
    return UserKernel("add", ADD, lang, 16, [np.zeros(16, np.float32), np.int32(16)], params, **kw)


@pytest.mark.parametrize("lang", ["C", "CUDA"])
@pytest.mark.parametrize("params,kw,message", [
    ({"kernel_tuner": [1, 2]}, {},
     "tunable parameter 'kernel_tuner' and Kernel Tuner's own macro kernel_tuner would both be the macro kernel_tuner"),
    # the y name defaults to block_size_y: x and y would be one macro, so one launch dimension
    ({"block_size_y": [32, 64]}, {"block_size_names": ["block_size_y"]},
     r"the block size in x \(block_size_y\) and the block size in y \(block_size_y\) would both be the macro"),
    ({"bx": [32]}, {"block_size_names": ["bx", "grid_size_y"]},
     r"the grid size grid_size_y and the block size in y \(grid_size_y\) would both be the macro grid_size_y"),
])
def test_a_user_kernel_whose_macros_collide_is_refused(lang, params, kw, message):
    with pytest.raises(UsageError, match=message):
        _kernel(lang, params, **kw)


def test_a_user_kernel_with_distinct_macros_or_its_own_defines_is_accepted():
    k = _kernel("C", {"block_size_x": [32], "tile": [2]})
    assert [n for n, _ in k.define_lines({"block_size_x": 32, "tile": 2})] == [
        "grid_size_x", "grid_size_y", "grid_size_z", "block_size_x", "block_size_y", "block_size_z", "tile",
        "kernel_tuner"]
    # with defines= the user's defines are the only ones: nothing else is written
    assert _kernel("C", {"kernel_tuner": [1]}, defines={"kt": "kernel_tuner"}).define_lines({"kernel_tuner": 1}) \
        == [("kt", "1")]


def test_tune_kernel_refuses_before_compiling_anything(tmp_path, monkeypatch):
    import autotune.runners.c as c_runner

    def no_build(*args, **kwargs):
        raise AssertionError("compiled")

    monkeypatch.setattr(c_runner, "_build", no_build)
    with pytest.raises(UsageError, match="would both be the macro kernel_tuner"):
        tune_kernel("add", ADD, 16, [np.zeros(16, np.float32), np.int32(16)], {"kernel_tuner": [1, 2]}, lang="C",
                    quiet=True, db=f"sqlite:///{tmp_path / 'kt.db'}")


def _stored(tmp_path, config: dict) -> str:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    db = open_database(url)
    try:
        db.add_trials(Task("function", "blur", {}), Device("GPU A", "cuda", {}),
                      [Measurement(Candidate(config), Status.OK, cost=1.0)])
    finally:
        db.close()
    return url


@pytest.mark.parametrize("config,message", [
    ({"block-x": 1, "block_x": 2}, "knob 'block-x' and knob 'block_x' would both be the macro BLUR_BLOCK_X"),
    ({"Device": 3}, "the device name and knob 'Device' would both be the macro BLUR_DEVICE"),
])
def test_export_configs_refuses_a_header_whose_knob_macros_collide(tmp_path, config, message):
    url = _stored(tmp_path, config)
    out = tmp_path / "blur.h"
    cli = CliRunner()
    res = cli.invoke(app, ["export-configs", "--task", "blur", "--format", "c-header", "-o", str(out), "--db", url])
    assert res.exit_code == 2 and message in res.output and "export the task as JSON" in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1 and not out.exists()
    res = cli.invoke(app, ["export-configs", "--task", "blur", "--db", url])  # JSON holds the names as they are
    assert res.exit_code == 0 and json.loads(res.stdout)["devices"][0]["config"] == config
