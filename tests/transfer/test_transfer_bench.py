"""scripts/bench_transfer.py on small caches built in the test: its JSON report and its figures."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from autotune.testing.caches import NAMES, turing_time, write_cache

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_transfer.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_transfer", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_json_shape_and_warm_start_on_a_correlated_pair(tmp_path, capsys):
    a = write_cache(tmp_path / "GPU_A.json.gz", NAMES["turing"], turing_time)
    b = write_cache(tmp_path / "GPU_B.json.gz", NAMES["turing2"], lambda x, y, z: 1.5 * turing_time(x, y, z) + 0.1 * z)
    out = tmp_path / "t.json"
    assert load_bench().main(["--cache", a, b, "--seeds", "2", "--max-trials", "40", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [(p["source"], p["target"]) for p in doc["pairs"]] == [("GPU_A", "GPU_B"), ("GPU_B", "GPU_A")]
    for p in doc["pairs"]:
        assert set(p) >= {"source", "target", "cold_to_5pct_median", "warm_to_5pct_median", "source_best_ratio"}
        assert p["warm_to_5pct_median"] == 1  # the source's best is the target's: found first
        assert p["source_best_ratio"] == 1.0
        assert p["cold_to_5pct_median"] is None or p["cold_to_5pct_median"] >= 1
    assert "| kernel | source | target |" in capsys.readouterr().out
