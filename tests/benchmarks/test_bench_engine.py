"""scripts/bench_engine.py: the engine time of a campaign warm-started from other GPUs' caches."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import bench_engine

from autotune.db import open_database, queries
from autotune.search_spaces.replay import ReplaySpace


def recording(tmp_path: Path, gpu: str, scale: float) -> str:
    """A small Kernel Tuner cache of one kernel as ``gpu`` would record it (times scaled)."""
    params = {"block_size_x": [16, 32, 64, 128, 256], "tile": [1, 2, 4, 8]}
    cache = {}
    for x in params["block_size_x"]:
        for t in params["tile"]:
            time = scale * (1.0 + abs(x - 64) / 64 + abs(t - 2))
            cache[f"{x},{t}"] = {"block_size_x": x, "tile": t, "time": time, "times": [time] * 3,
                                 "compile_time": 100.0, "benchmark_time": 10.0}
    data = {"device_name": gpu, "kernel_name": "k", "problem_size": [64], "tune_params_keys": list(params),
            "tune_params": params, "cache": cache}
    path = tmp_path / f"{gpu.replace(' ', '_')}.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(data, f)
    return str(path)


def test_a_warm_started_campaign_is_timed_from_the_imported_sources(tmp_path):
    target = ReplaySpace(recording(tmp_path, "NVIDIA GeForce RTX 3090", 1.0))
    sources = [recording(tmp_path, "NVIDIA GeForce RTX 2080 Ti", 1.3), recording(tmp_path, "NVIDIA TITAN RTX", 1.2)]
    out = bench_engine.warm_start(target, sources, tmp_path / "warm.db", trials=12)
    assert out["trials"] == 12 and out["engine_ms_per_trial"] > 0
    assert sorted(out["sources"]) == ["NVIDIA GeForce RTX 2080 Ti", "NVIDIA TITAN RTX"]
    db = open_database(f"sqlite:///{tmp_path / 'warm.db'}")
    rows = queries.trials(db, device="NVIDIA GeForce RTX 3090")
    assert len(rows) == 12  # the campaign measured the target; the sources' 20 trials each were imported
    assert len(queries.trials(db, device="NVIDIA TITAN RTX")) == 20
