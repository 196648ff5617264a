"""scripts/transfer_noise_floor.py: what bench_transfer.py's worst warm/cold is when the warm start is the
cold search itself."""

from __future__ import annotations

import json

import pytest

from autotune.testing.caches import NAMES, turing_time, write_cache


def test_identical_runs_give_a_floor_of_exactly_one(load_script):
    floor = load_script("transfer_noise_floor")
    pools = {"k": {"A": [12] * 10, "B": [30] * 10, "C": [7] * 10}}
    null = floor.null_draws(pools, seeds=5, draws=20)
    assert null["pairs"] == 6  # every ordered pair of the three GPUs
    assert null["worst"] == [1.0] * 20 and null["above_1_2"] == [0] * 20
    assert null["gmean"] == [1.0] * 20 and null["between_settings"] == [1.0] * 20


def test_a_spread_cold_search_puts_the_floor_above_one(load_script):
    """Half the seeds need 10 measurements, half 100: two medians of 5 often differ by 10x."""
    floor = load_script("transfer_noise_floor")
    pools = {"k": {g: [10] * 15 + [100] * 15 for g in "ABCD"}}
    null = floor.null_draws(pools, seeds=5, draws=200)
    assert floor.describe(null["worst"])["median"] == 10.0
    assert max(null["above_1_2"]) <= 12 and floor.describe(null["above_1_2"])["median"] >= 3
    spread = floor.describe(null["between_settings"])
    assert spread["p5"] < 1.0 < spread["p95"]  # two settings that are the same search differ draw by draw
    with pytest.raises(ValueError, match="cannot give two medians"):
        floor.null_draws(pools, seeds=20, draws=1)


def test_the_pools_are_bench_transfer_s_cold_runs_and_the_report_is_written(tmp_path, capsys, load_script):
    a = write_cache(tmp_path / "GPU_A.json.gz", NAMES["turing"], turing_time)
    b = write_cache(tmp_path / "GPU_B.json.gz", NAMES["turing2"], lambda x, y, z: 1.5 * turing_time(x, y, z) + 0.1 * z)
    out, results = tmp_path / "floor.json", tmp_path / "runs.json"
    floor = load_script("transfer_noise_floor")
    assert floor.main(["--cache", a, b, "--seeds", "2", "--pool", "4", "--draws", "50", "--max-trials", "40",
                       "--results", str(results), "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["pairs"] == 2 and doc["seeds"] == 2 and doc["pool"] == 4
    assert set(doc["worst_warm_over_cold"]) == {"median", "p5", "p95"}
    w = doc["worst_warm_over_cold"]
    assert w["p5"] <= w["median"] <= w["p95"]
    bench = load_script("bench_transfer")
    bench_doc = tmp_path / "bench.json"
    assert bench.main(["--cache", a, b, "--seeds", "2", "--max-trials", "40", "--json", str(bench_doc)]) == 0
    cold = {p["target"]: p["cold_to_5pct_median"] for p in json.loads(bench_doc.read_text())["pairs"]}
    for target, runs in doc["cold_runs"]["cache"].items():
        assert len(runs) == 4
        assert cold[target] == round(sum(runs[:2]) / 2)  # bench_transfer's seeds 0 and 1
    assert len(json.loads(results.read_text())) == 8  # every cold run kept for a rerun
    assert "worst warm/cold: median" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        floor.main(["--cache", a, b, "--seeds", "3", "--pool", "5"])
