"""Benchmark: the noise floor of bench_transfer.py's worst warm/cold, from the cold search alone.

bench_transfer.py reports, over ordered pairs (source, target) of one kernel's GPUs, the worst ratio of two
medians over S seeds: the warm start's on the pair, the cold search's on the target. This script asks
what a warm start that is the cold search itself would score there. On each target the cold search runs
with --pool seeds; then, --draws times, each target's cold median takes S seeds drawn from its pool and
each pair into it a "warm" median of S other seeds from the same pool, and the draw's statistic is
bench_transfer.py's: the worst warm/cold over the pairs, the pairs above 1.2x and the geometric mean of
warm/cold; and, for comparing two warm-start settings on the same pairs, the ratio of two such geometric
means when both settings are the cold search (each pair's two "warm" medians of S seeds apart). Printed:
the median and the 5-95% range of each over the draws. A figure inside that range is what seed choice
alone gives; only one outside it says the warm start (or one setting against another) differs.

    python scripts/transfer_noise_floor.py --seeds 5 --pool 30 --results floor.json
    python scripts/transfer_noise_floor.py --cache a.json.gz b.json.gz c.json.gz --seeds 30 --pool 90

A run that does not get within 5% of the optimum within --max-trials counts as --max-trials + 1, as in
bench_transfer.py; --results FILE [MORE ...] keeps every cold run, so an interrupted run continues.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_transfer import all_measurements, cold_algorithm, optimum, trials_to_target
from replay_data import replay_groups
from results_store import ResultStore
from script_args import output_file, positive_int, write_json

from autotune.errors import UsageError
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import KTCache, ReplaySpace, cache_labels

# every key of a --results file of this script: KERNEL/GPU/cap=C;batch=B/SEED
RESULT_KEYS = r".+/cap=\d+;batch=\d+/\d+$"


def cold_pools(groups: dict[str, list[str]], pool: int, max_trials: int, batch: int, store: ResultStore,
               log=print) -> dict[str, dict[str, list[int]]]:
    """Per kernel group, per target label: the cold search's measurements to 5% on seeds 0..pool-1
    (max_trials + 1 for a run that does not get there)."""
    out: dict[str, dict[str, list[int]]] = {}
    for kernel, paths in groups.items():
        out[kernel] = {}
        for path, label in cache_labels(paths).items():
            cache = KTCache.load(path)
            goal = optimum(all_measurements(cache)) * 1.05

            def run(seed: int, cache=cache, goal=goal) -> int:
                n = trials_to_target(cold_algorithm(seed), ReplaySpace(cache), ReplayRunner(cache), goal,
                                     max_trials, batch, seed)
                return max_trials + 1 if n is None else n
            runs = [store.get(f"{kernel}/{label}/cap={max_trials};batch={batch}/{s}", run, s) for s in range(pool)]
            log(f"  {kernel}/{label}: cold median {np.median(runs):g} over {pool} seeds ({min(runs)}..{max(runs)})")
            out[kernel][label] = runs
    return out


def null_draws(pools: dict[str, dict[str, list[int]]], seeds: int, draws: int, seed: int = 0) -> dict:
    """The worst warm/cold over every ordered pair and the pairs above 1.2x, per draw, when warm and
    cold are both the cold search: per target a cold median of ``seeds`` runs of its pool, per pair
    into it a warm median of ``seeds`` other runs."""
    rng = np.random.default_rng(seed)
    arrays = {kernel: {target: np.asarray(pool) for target, pool in runs.items()} for kernel, runs in pools.items()}
    for runs in arrays.values():
        for target, pool in runs.items():
            if len(pool) < 2 * seeds:
                raise ValueError(f"{target}: a pool of {len(pool)} runs cannot give two medians of {seeds}")
    worst, above, gmean, between = [], [], [], []
    for _ in range(draws):
        ratios, pairs = [], []
        for runs in arrays.values():
            for pool in runs.values():
                order = rng.permutation(len(pool))
                cold = np.median(pool[order[:seeds]])
                rest = pool[order[seeds:]]
                for _source in range(len(runs) - 1):  # one pair per other GPU of the kernel
                    ratios.append(np.median(rng.choice(rest, seeds, replace=False)) / cold)
                    two = rng.permutation(pool)[:2 * seeds]
                    pairs.append(np.median(two[:seeds]) / np.median(two[seeds:]))
        worst.append(max(ratios))
        above.append(sum(r > 1.2 for r in ratios))
        gmean.append(float(np.exp(np.mean(np.log(ratios)))))
        between.append(float(np.exp(np.mean(np.log(pairs)))))
    return {"pairs": len(ratios), "worst": worst, "above_1_2": above, "gmean": gmean, "between_settings": between}


def describe(values) -> dict:
    lo, mid, hi = np.percentile(values, [5, 50, 95])
    return {"median": round(float(mid), 2), "p5": round(float(lo), 2), "p95": round(float(hi), 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", nargs="+", help="caches of one kernel on several GPUs (default: every kernel folder "
                                               "of the replay data)")
    ap.add_argument("--seeds", type=positive_int, default=5, help="seeds per median, as bench_transfer.py --seeds")
    ap.add_argument("--pool", type=positive_int, default=30,
                    help="cold runs per target to draw from (at least 2 x --seeds)")
    ap.add_argument("--draws", type=positive_int, default=1000,
                    help="random splits of the pools; the report gives the median and 5-95%% range over them")
    ap.add_argument("--max-trials", type=positive_int, default=2000,
                    help="measurements per cold run at most, as bench_transfer.py --max-trials")
    ap.add_argument("--batch", type=positive_int, default=8, help="candidates asked for at once (default 8)")
    ap.add_argument("--results", nargs="+", default=None, metavar="FILE",
                    help="keep every cold run in the first file; more files after it are only read")
    ap.add_argument("--json", type=output_file, help="write the report as JSON to this file (its folder must exist)")
    args = ap.parse_args(argv)
    if args.pool < 2 * args.seeds:
        ap.error(f"--pool {args.pool} is below 2 x --seeds ({2 * args.seeds}): warm and cold need disjoint seeds")
    if args.cache:
        for path in args.cache:  # a missing file named first, as KTCache.load names it
            if not Path(path).exists():
                raise UsageError(f"cache file {path!r} does not exist")
        if len(args.cache) < 2:
            raise UsageError(f"--cache names {len(args.cache)} cache; the pairs need one kernel recorded on at least 2 GPUs")
        groups = {"cache": args.cache}
    else:
        groups = {k: ps for k, ps in replay_groups().items() if len(ps) > 1}
    store = ResultStore(args.results, keys=RESULT_KEYS, script="transfer_noise_floor.py", report=args.json)
    pools = cold_pools(groups, args.pool, args.max_trials, args.batch, store)
    null = null_draws(pools, args.seeds, args.draws)
    report = {"seeds": args.seeds, "pool": args.pool, "draws": args.draws, "pairs": null["pairs"],
              "worst_warm_over_cold": describe(null["worst"]), "pairs_above_1_2": describe(null["above_1_2"]),
              "geometric_mean_warm_over_cold": describe(null["gmean"]),
              "two_settings_geometric_mean_ratio": describe(null["between_settings"])}
    w, a = report["worst_warm_over_cold"], report["pairs_above_1_2"]
    g, b = report["geometric_mean_warm_over_cold"], report["two_settings_geometric_mean_ratio"]
    print(f"\na warm start that is the cold search, {null['pairs']} pairs, medians over {args.seeds} seeds "
          f"({args.draws} draws from {args.pool} cold runs per target):\n"
          f"  worst warm/cold: median {w['median']}, 5-95% {w['p5']}-{w['p95']}\n"
          f"  pairs above 1.2x: median {a['median']:g}, 5-95% {a['p5']:g}-{a['p95']:g}\n"
          f"  geometric mean of warm/cold: median {g['median']}, 5-95% {g['p5']}-{g['p95']}\n"
          f"  one setting's geometric mean over another's: median {b['median']}, 5-95% {b['p5']}-{b['p95']}")
    if args.json:
        write_json(args.json, {**report, "cold_runs": pools})
    return 0


if __name__ == "__main__":
    from autotune.errors import run_script

    run_script(main)
