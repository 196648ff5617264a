"""The evaluation protocol of the benchmark scripts: folds, selection on training units only, the
summary's distribution and worst case (scripts/protocol.py, pure); --results reuse and small
end-to-end runs of bench_search.py and bench_transfer.py; Kernel Tuner's evaluation order as the
search bench records it (scripts/bench_peers.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import protocol
import pytest

from autotune.testing.caches import NAMES, ampere_time, turing_time, write_cache

# -- folds -------------------------------------------------------------------------------------------

SPACES = [("conv", "A"), ("conv", "B"), ("conv", "C"), ("gemm", "A"), ("gemm", "B")]
PAIRS = [("conv", s, t) for s in "ABC" for t in "ABC" if s != t] + [("gemm", "A", "B"), ("gemm", "B", "A")]


def test_leave_one_kernel_out_tests_one_kernel_and_trains_on_the_others():
    folds = protocol.folds(SPACES, "leave-one-kernel-out")
    assert [f.name for f in folds] == ["kernel=conv", "kernel=gemm"]
    assert folds[0].test == (("conv", "A"), ("conv", "B"), ("conv", "C"))
    assert folds[0].train == (("gemm", "A"), ("gemm", "B"))
    pair_folds = protocol.folds(PAIRS, "leave-one-kernel-out")
    assert pair_folds[1].test == (("gemm", "A", "B"), ("gemm", "B", "A")) and len(pair_folds[1].train) == 6


def test_leave_one_gpu_out_spaces():
    folds = {f.name: f for f in protocol.folds(SPACES, "leave-one-gpu-out")}
    assert list(folds) == ["gpu=A", "gpu=B", "gpu=C"]
    assert folds["gpu=A"].test == (("conv", "A"), ("gemm", "A"))
    assert folds["gpu=A"].train == (("conv", "B"), ("conv", "C"), ("gemm", "B"))
    assert folds["gpu=C"].test == (("conv", "C"),) and len(folds["gpu=C"].train) == 4


def test_leave_one_gpu_out_pairs_test_its_targets_and_train_without_that_gpu():
    folds = {f.name: f for f in protocol.folds(PAIRS, "leave-one-gpu-out")}
    assert folds["gpu=A"].test == (("conv", "B", "A"), ("conv", "C", "A"), ("gemm", "B", "A"))
    assert folds["gpu=A"].train == (("conv", "B", "C"), ("conv", "C", "B"))
    for name, fold in folds.items():
        gpu = name.split("=")[1]
        assert all(u[2] == gpu for u in fold.test)
        assert all(gpu not in u[1:] for u in fold.train), name  # neither as source nor as target
    # every pair is tested exactly once over the folds
    assert sorted(u for f in folds.values() for u in f.test) == sorted(PAIRS)


def test_a_fold_without_training_units_is_an_error():
    with pytest.raises(ValueError, match="gpu=A has no training units"):
        protocol.folds([("k", "A", "B"), ("k", "B", "A")], "leave-one-gpu-out")
    with pytest.raises(ValueError, match="kernel=conv"):
        protocol.folds([("conv", "A"), ("conv", "B")], "leave-one-kernel-out")


# -- selection -------------------------------------------------------------------------------------

def test_capped_median_counts_a_miss_as_cap_plus_one():
    assert protocol.capped_median([10, None, 30], 100) == 30
    assert protocol.capped_median([None, None, 5], 100) == 101
    assert protocol.capped_median([10, 20], 100) == 15


def test_search_selection_uses_the_training_spaces_only():
    train, test = (("k1", "A"), ("k1", "B")), (("k2", "A"),)
    ours = {("a", train[0]): 100, ("a", train[1]): 50, ("a", test[0]): 400,
            ("b", train[0]): 120, ("b", train[1]): 60, ("b", test[0]): 10}  # b is far better on the test space
    chosen, scores = protocol.select_search(["b", "a"], train, ours, None)
    assert chosen == "a" and scores["a"] == pytest.approx((100 * 50) ** 0.5)
    # with peers: the geometric mean of ours / best peer over the training spaces
    peer = {train[0]: 10, train[1]: 1000, test[0]: 1}
    ours2 = {("a", train[0]): 20, ("a", train[1]): 1000, ("a", test[0]): 1,
             ("b", train[0]): 40, ("b", train[1]): 200, ("b", test[0]): 5}
    chosen, scores = protocol.select_search(["a", "b"], train, ours2, peer)
    assert scores["a"] == pytest.approx((2.0 * 1.0) ** 0.5) and scores["b"] == pytest.approx((4.0 * 0.2) ** 0.5)
    assert chosen == "b"
    # within 1% of the smallest score is a tie: the earlier candidate keeps its place
    ours3 = {("a", train[0]): 100, ("a", train[1]): 100, ("b", train[0]): 99.5, ("b", train[1]): 99.5}
    assert protocol.select_search(["a", "b"], train, ours3, None)[0] == "a"
    ours3[("b", train[0])] = ours3[("b", train[1])] = 98.0
    assert protocol.select_search(["a", "b"], train, ours3, None)[0] == "b"


def test_transfer_selection_smallest_worst_case_ties_broken_by_median_speedup():
    train = (("k", "A", "B"), ("k", "B", "A"), ("k", "A", "C"))
    test = (("k", "C", "A"),)
    cold = {train[0]: 100, train[1]: 100, train[2]: 100, test[0]: 100}
    warm = {("safe", u): 90 for u in train} | {("safe", test[0]): 200}
    warm |= {("fast", train[0]): 10, ("fast", train[1]): 10, ("fast", train[2]): 150, ("fast", test[0]): 5}
    chosen, scores = protocol.select_transfer(["fast", "safe"], train, warm, cold)
    assert chosen == "safe"  # worst 0.9 < 1.5 on train, although "fast" is better on the test pair
    assert scores["fast"] == {"worst": 1.5, "median_speedup": 10.0}
    # within 1% of the smallest worst case: the larger median cold/warm wins
    warm |= {("fast", train[2]): 90.5}
    chosen, _ = protocol.select_transfer(["safe", "fast"], train, warm, cold)
    assert chosen == "fast"
    warm |= {("fast", train[2]): 91.5}  # 1.7% above: no longer a tie
    assert protocol.select_transfer(["fast", "safe"], train, warm, cold)[0] == "safe"


# -- summaries -------------------------------------------------------------------------------------

def test_search_summary_reports_worst_case_and_distribution():
    rows = [{"space": f"k/{i}", "ours": o, "best_peer": p, "ratio": o / p, "all_reached": ok}
            for i, (o, p, ok) in enumerate([(50, 100, True), (60, 60, True), (300, 100, False), (10, 100, True)])]
    s = protocol.summarise_search(rows)
    assert s["ours_below_best_peer"] == 2 and s["ours_at_most_two_thirds"] == 2
    assert s["worst_ratio"] == 3.0 and s["worst_space"] == "k/2"
    assert s["median_ratio"] == pytest.approx(0.75)
    assert s["ratio"] == {"min": 0.1, "p25": pytest.approx(0.4), "median": pytest.approx(0.75),
                          "p75": pytest.approx(1.5), "max": 3.0}
    assert s["spaces_with_a_miss"] == ["k/2"]
    alone = protocol.summarise_search([dict(r, best_peer=None, ratio=None) for r in rows])
    assert "worst_ratio" not in alone and alone["ours"]["max"] == 300


def test_transfer_summary_split_by_vendor():
    rows = [{"pair": "k:A->B", "group": "same-vendor", "cold_over_warm": 4.0, "warm_over_cold": 0.25},
            {"pair": "k:B->A", "group": "same-vendor", "cold_over_warm": 0.5, "warm_over_cold": 2.0},
            {"pair": "k:A->C", "group": "same-vendor", "cold_over_warm": 2.0, "warm_over_cold": 0.5}]
    s = protocol.summarise_transfer(rows)
    assert s["same-vendor"]["worst_warm_over_cold"] == 2.0 and s["same-vendor"]["worst_pair"] == "k:B->A"
    assert s["same-vendor"]["median_cold_over_warm"] == 2.0
    assert s["same-vendor"]["cold_over_warm"]["min"] == 0.5 and s["same-vendor"]["cold_over_warm"]["max"] == 4.0
    assert s["cross-vendor"] == {"pairs": 0, "note": "no cross-vendor pairs in this data"}
    assert "unknown-vendor" not in s
    assert protocol.vendor_group("NVIDIA", "AMD") == "cross-vendor"
    assert protocol.vendor_group("unknown", "NVIDIA") == "unknown-vendor"


# -- the benches end to end ------------------------------------------------------------------------

def three_gpus(tmp_path) -> list[str]:
    folder = tmp_path / "toy"
    folder.mkdir()
    return [write_cache(folder / "GPU_A.json.gz", NAMES["turing"], turing_time),
            write_cache(folder / "GPU_B.json.gz", NAMES["turing2"], lambda a, b, c: 1.5 * turing_time(a, b, c) + 0.1 * c),
            write_cache(folder / "GPU_C.json.gz", NAMES["ampere"], ampere_time)]


def assert_rerun_measures_nothing(bench, argv: list, calls: list, report, first: dict) -> None:
    """A second run with the same results file measures nothing and reports the same."""
    calls.clear()
    assert bench.main(argv) == 0
    assert calls == []
    assert json.loads(report.read_text()) == first


def counting(monkeypatch, mod, name: str) -> list:
    calls = []
    original = getattr(mod, name)

    def wrapped(*a, **k):
        calls.append(a)
        return original(*a, **k)

    monkeypatch.setattr(mod, name, wrapped)
    return calls


def test_search_summary_counts_the_failed_share_of_the_measurements_up_to_5pct(load_script):
    bench = load_script("bench_search")
    hit, miss = bench.Tracker(None, 10), bench.Tracker(None, 10)
    for k, cost in enumerate([float("inf"), 3.0, float("inf"), 1.0, float("inf")]):
        hit.record(str(k), True, cost, 0.0)  # within 5% at the 4th, 2 of those 4 failed
    for k, cost in enumerate([float("inf"), 3.0, 2.0, 2.0]):
        miss.record(str(k), True, cost, 0.0)  # never: 1 of its 4 failed
    assert bench.summarise([hit], optimum=1.0)["failed_share_to_5pct_median"] == 0.5
    assert bench.summarise([miss], optimum=1.0)["failed_share_to_5pct_median"] == 0.25
    assert bench.summarise([hit, miss, miss], optimum=1.0)["failed_share_to_5pct_median"] == 0.25


def test_bench_search_leave_one_gpu_out_and_results_reuse(tmp_path, monkeypatch, capsys, load_script):
    bench = load_script("bench_search")
    caches = three_gpus(tmp_path)
    argv = ["--protocol", "leave-one-gpu-out", "--cache", *caches, "--seeds", "2", "--budget", "20",
            "--candidates", "evolutionary+xgb", "evolutionary+xgb:epsilon=0.3", "--peers", "random", "optuna-tpe-direct",
            "--results", str(tmp_path / "r.json"), "--json", str(tmp_path / "o.json")]
    calls = counting(monkeypatch, bench, "run_one")
    assert bench.main(argv) == 0
    assert len(calls) == 3 * 4 * 2  # spaces x (candidates + peers) x seeds
    first = json.loads((tmp_path / "o.json").read_text())
    assert [f["fold"] for f in first["folds"]] == ["gpu=GPU_A", "gpu=GPU_B", "gpu=GPU_C"]
    for f in first["folds"]:
        gpu = f["fold"].split("=")[1]
        assert f["test"] == [f"toy/{gpu}"] and gpu not in " ".join(f["train"]) and len(f["train"]) == 2
        assert f["chosen"] in ("evolutionary+xgb", "evolutionary+xgb:epsilon=0.3")
        assert set(f["rows"][0]) >= {"ours", "best_peer", "ratio", "success_5pct", "all_reached"}
    assert first["summary"]["spaces"] == 3 and "worst_ratio" in first["summary"]
    runs = [r["to_5pct"] or 21 for rs in first["runs"]["evolutionary+xgb"].values() for r in rs]
    assert first["geomean_to_5pct"]["evolutionary+xgb"] == pytest.approx(float(np.exp(np.mean(np.log(runs)))))
    assert set(first["runs"]["optuna-tpe-direct"]) == {"toy/GPU_A", "toy/GPU_B", "toy/GPU_C"}
    out = capsys.readouterr().out
    assert "## gpu=GPU_A: chosen" in out and "ours / best peer: median" in out
    assert_rerun_measures_nothing(bench, argv, calls, tmp_path / "o.json", first)


def test_bench_search_reports_results_split_over_files(tmp_path, monkeypatch, load_script):
    """Two processes' results files, each holding one peer's runs, reported together: nothing is measured
    again; a new result goes to the first file (with what was read), never to the others."""
    bench = load_script("bench_search")
    caches = three_gpus(tmp_path)
    base = ["--protocol", "leave-one-gpu-out", "--cache", *caches, "--seeds", "2", "--budget", "20",
            "--candidates", "evolutionary+xgb"]
    a, b, c = (str(tmp_path / f"{n}.json") for n in "abc")
    assert bench.main([*base, "--peers", "random", "--results", a]) == 0
    assert bench.main([*base, "--peers", "optuna-tpe-direct", "--results", b]) == 0
    calls = counting(monkeypatch, bench, "run_one")
    assert bench.main([*base, "--peers", "random", "optuna-tpe-direct", "--results", c, a, b,
                       "--json", str(tmp_path / "o.json")]) == 0
    assert calls == [] and not Path(c).exists()
    report = json.loads((tmp_path / "o.json").read_text())
    assert set(report["runs"]) == {"evolutionary+xgb", "random", "optuna-tpe-direct"}
    before = Path(a).read_text()
    assert bench.main([*base, "--seeds", "3", "--peers", "random", "--results", c, a]) == 0
    assert sorted({x[3] for x in calls}) == [2]  # only seed 2 is new, for the candidate and the peer
    assert Path(a).read_text() == before
    merged = json.loads(Path(c).read_text())  # the first file: what was read and what was measured
    assert set(json.loads(before)) < set(merged) and {k.split("|seed=")[1].split("|")[0] for k in merged} == {"0", "1", "2"}


def test_bench_search_first_seed_runs_fresh_seeds(tmp_path, monkeypatch, load_script):
    """--first-seed 2 with --seeds 2 runs seeds 2 and 3, in the protocol and without it."""
    bench = load_script("bench_search")
    caches = three_gpus(tmp_path)
    calls = counting(monkeypatch, bench, "run_one")
    base = ["--protocol", "leave-one-gpu-out", "--cache", *caches, "--seeds", "2", "--budget", "20",
            "--candidates", "evolutionary+xgb", "--peers", "random", "--results", str(tmp_path / "r.json")]
    assert bench.main([*base, "--first-seed", "2"]) == 0
    assert sorted({a[3] for a in calls}) == [2, 3]  # run_one(name, cache, space, seed, budget)
    assert bench.main(["--cache", caches[0], "--seeds", "2", "--first-seed", "5", "--budget", "20",
                       "--algorithms", "random"]) == 0
    assert sorted({a[3] for a in calls[-2:]}) == [5, 6]
    calls.clear()  # the peers on seeds 0-2 whatever the candidates' seeds (seeds 2 and 3 stored above)
    assert bench.main([*base, "--first-seed", "2", "--peer-seeds", "3", "--json", str(tmp_path / "o.json")]) == 0
    assert sorted((a[0], a[3]) for a in calls) == [("random", 0)] * 3 + [("random", 1)] * 3  # 3 spaces
    report = json.loads((tmp_path / "o.json").read_text())
    assert [len(rs) for rs in report["runs"]["random"].values()] == [3, 3, 3]
    assert [len(rs) for rs in report["runs"]["evolutionary+xgb"].values()] == [2, 2, 2]


def test_bench_search_protocol_needs_a_training_space(tmp_path, capsys, load_script):
    bench = load_script("bench_search")
    caches = three_gpus(tmp_path)
    assert bench.main(["--protocol", "leave-one-kernel-out", "--cache", *caches, "--peers", "random"]) == 2
    assert "no training units" in capsys.readouterr().err


def test_bench_transfer_leave_one_gpu_out_and_results_reuse(tmp_path, monkeypatch, capsys, load_script):
    bench = load_script("bench_transfer")
    caches = three_gpus(tmp_path)
    argv = ["--protocol", "leave-one-gpu-out", "--cache", *caches, "--seeds", "2", "--max-trials", "30",
            "--candidates", "default", "top_k=2,init=4", "--results", str(tmp_path / "r.json"),
            "--json", str(tmp_path / "o.json")]
    calls = counting(monkeypatch, bench, "trials_to_target")
    assert bench.main(argv) == 0
    assert len(calls) == 3 * 2 + 6 * 2 * 2  # cold per target x seeds + pairs x candidates x seeds
    first = json.loads((tmp_path / "o.json").read_text())
    for f in first["folds"]:
        gpu = f["fold"].split("=")[1]
        assert all(p.endswith(f"->{gpu}") for p in f["test"]) and len(f["test"]) == 2
        assert f["train"] and all(gpu not in p for p in f["train"])
        assert f["chosen"] in ("default", "top_k=2,init=4")
        for r in f["rows"]:
            assert r["warm_over_cold"] == pytest.approx(r["warm"] / r["cold"])
    assert first["summary"]["same-vendor"]["pairs"] == 6  # the toy GPUs carry NVIDIA names
    assert first["summary"]["cross-vendor"]["pairs"] == 0
    assert len(first["warm_runs"]["top_k=2,init=4"]["toy:GPU_A->GPU_B"]) == 2
    out = capsys.readouterr().out
    assert "cross-vendor: no cross-vendor pairs in this data" in out and "worst warm/cold" in out
    assert_rerun_measures_nothing(bench, argv, calls, tmp_path / "o.json", first)


def test_bench_transfer_first_seed_runs_fresh_seeds(tmp_path, monkeypatch, load_script):
    """--first-seed 2 with --seeds 2 runs seeds 2 and 3: none of seeds 0 and 1's stored results are reused."""
    bench = load_script("bench_transfer")
    caches = three_gpus(tmp_path)
    base = ["--protocol", "leave-one-gpu-out", "--cache", *caches, "--seeds", "2", "--max-trials", "30",
            "--candidates", "default", "--results", str(tmp_path / "r.json")]
    calls = counting(monkeypatch, bench, "trials_to_target")
    assert bench.main(base) == 0
    first = len(calls)
    assert bench.main([*base, "--first-seed", "2"]) == 0
    assert len(calls) == 2 * first  # nothing reused
    seeds = sorted({int(k.split("|seed=")[1].split("|")[0]) for k in json.loads((tmp_path / "r.json").read_text())})
    assert seeds == [0, 1, 2, 3]


def test_warm_candidates_parse_as_json_values(load_script):
    bench = load_script("bench_transfer")
    assert bench.parse_warm("default") == {}
    assert bench.parse_warm("top_k=4,min_rho=0.3,x=abc") == {"top_k": 4, "min_rho": 0.3, "x": "abc"}
    search = load_script("bench_search")
    assert search.parse_candidate("evolutionary+xgb:epsilon=0.2,init=4") == ("evolutionary+xgb", {"epsilon": 0.2, "init": 4})
    guided = search.make("evolutionary+xgb:epsilon=0.2,population=8")  # ModelGuided's option, the inner one's
    assert guided.config["epsilon"] == 0.2 and guided.inner.config["population"] == 8
    assert search.make("evolutionary:population=8").config["population"] == 8


# -- Kernel Tuner's evaluation order ---------------------------------------------------------------

@pytest.mark.parametrize("strategy", ["random_sample", "genetic_algorithm"])
def test_kernel_tuner_evaluations_are_recorded_in_the_order_its_cost_function_saw_them(tmp_path, monkeypatch, strategy, load_script):
    pytest.importorskip("kernel_tuner", reason="kernel_tuner is not installed (pip install 'autotune[bench]')")
    from kernel_tuner.strategies.common import CostFunc

    from autotune.runners.replay import record_measurement
    from autotune.search_spaces.replay import KTCache, ReplaySpace

    peers = load_script("bench_peers")
    bench = load_script("bench_search")
    cache = KTCache.load(write_cache(tmp_path / "GPU_A.json.gz", NAMES["turing"], turing_time))
    asked = []  # every legal configuration the strategy's cost function passes on, in order
    original = CostFunc._normalize_and_validate_config

    def spy(self, x, check_restrictions=True):
        config, legal = original(self, x, check_restrictions=check_restrictions)
        if legal:
            asked.append(tuple(config))
        return config, legal

    monkeypatch.setattr(CostFunc, "_normalize_and_validate_config", spy)
    seen, _ = peers.kt_evaluations(strategy, cache, seed=3, max_fevals=12)
    # random_sample evaluates 12 distinct points; the genetic algorithm converges on this tiny space,
    # repeating a few points (repeats are recorded too; the counting rule makes them free)
    assert len(set(seen)) == 12 if strategy == "random_sample" else len(seen) > len(set(seen)) > 1
    assert seen == asked[: len(seen)]  # configurations past the budget are asked, not answered
    # run_kt scores exactly that order: its best-so-far trace follows the first visits of `seen`
    space = ReplaySpace(cache)
    tracker, _ = peers.run_kt(strategy, cache, space, 3, 12, bench.Tracker)
    best, expected = float("inf"), []
    for v in dict.fromkeys(seen):
        best = min(best, record_measurement(cache, space._make(cache.config(v)), cache.records[v]).objective)
        expected.append(best)
    assert tracker.trace[: len(expected)] == expected  # then restarts (a new seed) until the budget


def test_kernel_tuners_differential_evolution_is_the_same_run_for_the_same_seed(tmp_path, load_script):
    """Kernel Tuner 1.5 draws differential evolution's first population from scipy's LatinHypercube without a
    seed; the bench seeds it from the run's seed, so a peer's figures can be compared with a stored reference."""
    pytest.importorskip("kernel_tuner", reason="kernel_tuner is not installed (pip install 'autotune[bench]')")
    from autotune.search_spaces.replay import KTCache

    peers = load_script("bench_peers")
    cache = KTCache.load(write_cache(tmp_path / "GPU_A.json.gz", NAMES["turing"], turing_time))
    runs = [peers.kt_evaluations("diff_evo", cache, seed=s, max_fevals=30)[0] for s in (5, 5, 5, 6)]
    assert len(runs[0]) > 10 and runs[0] == runs[1] == runs[2]
    assert runs[3] != runs[0]  # another seed, another run


def test_a_kernel_tuner_run_that_only_repeats_is_ended_and_restarted(tmp_path, monkeypatch, load_script):
    """A Kernel Tuner run is ended once its answered evaluations, repeats included, reach the cap (a strategy
    stuck on configurations it evaluated never reaches max_fevals, which counts distinct ones); what it evaluated
    counts, and run_kt restarts it with a new seed."""
    pytest.importorskip("kernel_tuner", reason="kernel_tuner is not installed (pip install 'autotune[bench]')")
    from autotune.search_spaces.replay import KTCache, ReplaySpace

    peers = load_script("bench_peers")
    bench = load_script("bench_search")
    cache = KTCache.load(write_cache(tmp_path / "GPU_A.json.gz", NAMES["turing"], turing_time))
    full, _ = peers.kt_evaluations("genetic_algorithm", cache, seed=3, max_fevals=12, cap=10**9)
    assert len(full) > 20 > len(set(full))  # it converges on this tiny space, repeating points
    seen, stopped = peers.kt_evaluations("genetic_algorithm", cache, seed=3, max_fevals=12, cap=20)
    assert 20 <= len(seen) < len(full) and seen == full[: len(seen)] and not stopped
    calls = []
    original = peers.kt_evaluations
    monkeypatch.setattr(peers, "kt_evaluations", lambda *a, **k: calls.append(a[2]) or original(*a, **k, cap=20))
    peers.run_kt("genetic_algorithm", cache, ReplaySpace(cache), 3, 12, bench.Tracker)
    assert calls[:2] == [3, 1003]  # ended by the cap, then restarted with another seed


def test_kernel_tuners_strategies_run_on_a_t4_results_file(tmp_path, load_script):
    """A T4 results file is handed to Kernel Tuner's simulation as the cache it stands for: its strategies
    evaluate the file's configurations, none of them stopped by an error of the cache (its problem size, a
    timing field it lacks)."""
    pytest.importorskip("kernel_tuner", reason="kernel_tuner is not installed (pip install 'autotune[bench]')")
    from autotune.search_spaces.replay import KTCache

    results = [{"configuration": {"block": b, "tile": t}, "invalidity": "correct", "correctness": 1,
                "times": {"compilation": 100.0, "runtimes": [1.0 + abs(b - 64) / 64 + t]},
                "objectives": ["time"], "measurements": [{"name": "time", "value": 1.0 + abs(b - 64) / 64 + t,
                                                          "unit": "ms"}]}
               for b in (16, 32, 64, 128, 256) for t in (1, 2, 4)]
    (tmp_path / "k").mkdir()
    path = tmp_path / "k" / "A100_T4.json"
    path.write_text(json.dumps({"schema_version": "1.0.0", "results": results}))
    peers = load_script("bench_peers")
    seen, stopped = peers.kt_evaluations("random_sample", KTCache.load(path), seed=3, max_fevals=10)
    assert len(set(seen)) == 10 and not stopped
