"""scripts/bench_transfer.py on small caches built in the test: its JSON report and its figures."""

from __future__ import annotations

import json

import pytest

from autotune.algorithms.registry import make_algorithm
from autotune.errors import UsageError
from autotune.search_spaces.replay import ReplaySpace, cache_labels
from autotune.testing.caches import NAMES, turing_time, write_cache


def _pair(tmp_path):
    a = write_cache(tmp_path / "GPU_A.json.gz", NAMES["turing"], turing_time)
    b = write_cache(tmp_path / "GPU_B.json.gz", NAMES["turing2"], lambda x, y, z: 1.5 * turing_time(x, y, z) + 0.1 * z)
    return a, b


def first_within_5pct_in_enumeration_order(path: str) -> int:
    """Counted from the cache alone: the 1-based position, in the space's enumeration order, of the
    first configuration whose recorded time is within 5% of the cache's best."""
    space = ReplaySpace(path)
    times = {c.key: space.cache.records[tuple(c.payload[n] for n in space.cache.param_names)]["time"]
             for c in space.enumerate()}
    best = min(times.values())
    return next(i for i, k in enumerate(times, start=1) if times[k] <= 1.05 * best)


def test_bench_json_shape_and_warm_start_on_a_correlated_pair(tmp_path, capsys, load_script):
    a, b = _pair(tmp_path)
    out = tmp_path / "t.json"
    assert load_script("bench_transfer").main(["--cache", a, b, "--seeds", "2", "--max-trials", "40", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [(p["source"], p["target"]) for p in doc["pairs"]] == [("GPU_A", "GPU_B"), ("GPU_B", "GPU_A")]
    for p in doc["pairs"]:
        assert set(p) >= {"source", "target", "cold_to_5pct_median", "warm_to_5pct_median", "source_best_ratio"}
        assert p["warm_to_5pct_median"] == 1  # the source's best is the target's: found first
        assert p["source_best_ratio"] == 1.0
    assert doc["summary"]["pairs"] == 2
    assert "| kernel | source | target |" in capsys.readouterr().out


def test_cold_figure_is_the_count_of_measurements_to_5pct(tmp_path, monkeypatch, load_script):
    """With grid search as the cold search, the bench's cold figure must be the position of the
    first configuration within 5% of the optimum in enumeration order, counted from the cache
    alone; a cap below it is reported as null (">cap")."""
    a, b = _pair(tmp_path)
    expected = {"GPU_A": first_within_5pct_in_enumeration_order(a), "GPU_B": first_within_5pct_in_enumeration_order(b)}
    assert expected == {"GPU_A": 22, "GPU_B": 22}  # (a=4, b=64, c=1): index 2*8 + 2*2 + 1 of the 4x4x2 grid
    bench = load_script("bench_transfer")
    monkeypatch.setattr(bench, "cold_algorithm", lambda seed: make_algorithm("grid"))
    pairs = bench.bench_group([a, b], seeds=2, max_trials=40, batch=8, log=lambda s: None)
    assert {p["target"]: p["cold_to_5pct_median"] for p in pairs} == expected
    assert all(p["cold_runs"] == [expected[p["target"]]] * 2 for p in pairs)
    capped = bench.bench_group([a, b], seeds=2, max_trials=21, batch=8, log=lambda s: None)
    assert [p["cold_to_5pct_median"] for p in capped] == [None, None] and capped[0]["cold_runs"] == [None, None]
    assert ">cap" in bench.markdown([("toy", capped)])
    assert bench.summary(capped, 21)["median_speedup"] == 22.0  # a miss counts as cap + 1 against warm's 1


def test_auto_warm_starts_each_target_from_the_sources_auto_picks(tmp_path, capsys, load_script):
    """--auto: one row per target, its sources those `--transfer-from auto` picks among the other caches (the
    most similar by properties, at most 2), named in the row with their similarity."""
    a, b = _pair(tmp_path)
    c = write_cache(tmp_path / "GPU_C.json.gz", NAMES["ampere"], lambda x, y, z: 0.7 * turing_time(x, y, z))
    out = tmp_path / "auto.json"
    assert load_script("bench_transfer").main(["--cache", a, b, c, "--auto", "--seeds", "2", "--max-trials", "40",
                              "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    rows = {p["target"]: p for p in doc["pairs"]}
    assert sorted(rows) == ["GPU_A", "GPU_B", "GPU_C"] and doc["summary"]["pairs"] == 3
    # TITAN RTX and RTX 2080 Ti (both Turing) are each other's most similar; the RTX 3090 comes second
    assert rows["GPU_A"]["source"].split("+")[0] == "GPU_B" and rows["GPU_B"]["source"].split("+")[0] == "GPU_A"
    for p in doc["pairs"]:
        assert 1 <= len(p["source"].split("+")) <= 2 and p["target"] not in p["source"].split("+")
        assert p["warm_to_5pct_median"] == 1  # every cache has the same best configuration
    assert "over 3 targets" in capsys.readouterr().out


def test_caches_of_one_name_in_two_folders_are_two_labelled_sources(tmp_path, load_script):
    """Two shapes recorded on one GPU (shape_a/H200 and shape_b/H200) are a pair under folder/name labels,
    not one cache overwriting the other; the same folder and name twice is an error."""
    (tmp_path / "shape_a").mkdir()
    (tmp_path / "shape_b").mkdir()
    a = write_cache(tmp_path / "shape_a" / "H200.json.gz", NAMES["turing"], turing_time)
    b = write_cache(tmp_path / "shape_b" / "H200.json.gz", NAMES["turing"], lambda x, y, z: 2.0 * turing_time(x, y, z))
    c = write_cache(tmp_path / "GPU_C.json.gz", NAMES["turing"], turing_time)
    bench = load_script("bench_transfer")
    assert cache_labels([a, b, c]) == {a: "shape_a/H200", b: "shape_b/H200", c: "GPU_C"}
    pairs = bench.bench_group([a, b], seeds=1, max_trials=20, batch=8, log=lambda s: None)
    assert [(p["source"], p["target"]) for p in pairs] == [("shape_a/H200", "shape_b/H200"), ("shape_b/H200", "shape_a/H200")]
    assert all(p["warm_to_5pct_median"] == 1 for p in pairs)  # the times differ by a factor: the same ranking
    with pytest.raises(UsageError, match="same folder and name"):
        cache_labels([a, a])
