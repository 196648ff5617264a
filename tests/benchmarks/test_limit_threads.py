"""scripts/limit_threads.py: a recorded space as a device with fewer threads per block runs it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import limit_threads as lt
import pytest

from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import KTCache, ReplaySpace


def space(tmp_path: Path) -> Path:
    params = {"block_size_x": [32, 64, 128], "block_size_y": [1, 4], "tile": [1, 2]}
    cache = {}
    for x in params["block_size_x"]:
        for y in params["block_size_y"]:
            for t in params["tile"]:
                time = "CompilationFailedConfig" if t == 2 and x == 32 else 1.0 + x * y / 100 + t
                cache[f"{x},{y},{t}"] = {"block_size_x": x, "block_size_y": y, "tile": t, "time": time,
                                         "times": [time] * 3 if not isinstance(time, str) else None}
    data = {"device_name": "GPU", "kernel_name": "k", "problem_size": [8], "tune_params_keys": list(params),
            "tune_params": params, "cache": cache}
    path = tmp_path / "in.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(data, f)
    return path


def test_blocks_above_the_limit_fail_and_the_rest_keep_their_times(tmp_path):
    out = tmp_path / "sub" / "out.json.gz"
    assert lt.main([str(space(tmp_path)), str(out), "--max-threads", "128"]) == 0
    cache = KTCache.load(str(out))
    assert "max 128 threads" in cache.device_name
    sp, runner = ReplaySpace(cache), ReplayRunner(cache)
    results = {c.key: runner.measure(sp.task, [c])[0] for c in sp.enumerate()}
    for m in results.values():
        p = m.candidate.payload
        threads, recorded_failure = p["block_size_x"] * p["block_size_y"], p["tile"] == 2 and p["block_size_x"] == 32
        assert m.ok == (threads <= 128 and not recorded_failure)
        if m.ok:
            assert m.cost == pytest.approx((1.0 + threads / 100 + p["tile"]) * 1e-3)
    assert sum(not m.ok for m in results.values()) == 2 + 4  # the compile failures, and x * y in (256, 512) x 2 tiles


def test_a_space_without_block_sizes_is_refused(tmp_path, capsys):
    data = {"device_name": "GPU", "kernel_name": "k", "problem_size": [8], "tune_params_keys": ["MWG"],
            "tune_params": {"MWG": [16]}, "cache": {"16": {"MWG": 16, "time": 1.0}}}
    path = tmp_path / "gemm.json"
    path.write_text(json.dumps(data))
    assert lt.main([str(path), str(tmp_path / "out.json")]) == 2
    assert "no block size parameter" in capsys.readouterr().err
