"""Benchmark: cold vs warm-started tuning across GPUs on recorded Kernel Tuner spaces.

For every ordered pair (source, target) of GPUs that recorded one kernel: the target
measurements needed to get within 5% of the target's optimum, by cold model-guided search
(ModelGuided(evolutionary, xgb), the default of `--cost-model xgb`) and by WarmStart from the
source's full data, median over seeds; and the source's best configuration's time on the
target over the target's optimum. Algorithms are driven directly with a ReplayRunner (no
database). A run that does not get there within --max-trials counts as --max-trials + 1
in the median (reported as null when the median itself is above the cap).

    nice -n 10 python scripts/bench_transfer.py --seeds 5 --json transfer.json
    python scripts/bench_transfer.py --cache a.json.gz b.json.gz --seeds 3

Without --cache, every kernel folder of the replay data (scripts/replay_data.py:
../shared/datasets/replay next to the repository, or $AUTOTUNE_REPLAY_DIR) is one group. Prints a Markdown table and a summary (median ratio cold/warm over pairs, worst
warm/cold ratio).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from autotune.cost_models.xgb import XGBCostModel
from autotune.runners.replay import ReplayRunner, record_measurement, replay_device
from autotune.search_spaces.replay import KTCache, ReplaySpace, cache_label

from autotune.algorithms.model_guided import ModelGuided
from autotune.algorithms.registry import make_algorithm
from autotune.algorithms.warm_start import SourceData, WarmStart
from autotune.types import Candidate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay_data import replay_dir  # noqa: E402


def all_measurements(cache: KTCache) -> list:
    return [record_measurement(cache, Candidate(cache.config(v)), rec) for v, rec in cache.records.items()]


def optimum(ms: list) -> float:
    return min(m.cost for m in ms if m.ok)


def trials_to_target(algo, space, runner, target: float, max_trials: int, batch: int, seed: int) -> int | None:
    """1-based index of the first measurement within ``target`` cost, or None within max_trials."""
    algo.bind(space, np.random.default_rng(seed))
    n = 0
    while n < max_trials:
        cs = algo.ask(min(batch, max_trials - n))
        if not cs:
            break
        ms = runner.measure(space.task, cs)
        for m in ms:
            n += 1
            if m.ok and m.cost <= target:
                return n
        algo.tell(ms)
    return None


def cold_algorithm(seed: int):
    return ModelGuided(make_algorithm("evolutionary"), XGBCostModel(seed=seed))


def warm_algorithm(source: SourceData, seed: int, target_device=None, **options):
    return WarmStart(make_algorithm("evolutionary"), [source], target_device=target_device, **options)


def median_capped(values: list[int | None], cap: int) -> int | None:
    med = statistics.median([cap + 1 if v is None else v for v in values])
    return None if med > cap else int(round(med))


def misleading(source: SourceData) -> SourceData:
    """The source with its times inverted (its best becomes its worst): a deliberately poor guide."""
    from autotune.types import Measurement, Status

    ms = [Measurement(m.candidate, Status.OK, cost=1.0 / m.cost) if m.ok else m for m in source.measurements]
    return SourceData(source.device, ms)


def bench_group(paths: list[str], seeds: int, max_trials: int, batch: int, log=print, warm_options=None,
                adversarial: bool = False) -> list[dict]:
    caches = {cache_label(p): KTCache.load(p) for p in paths}
    data = {name: all_measurements(c) for name, c in caches.items()}
    cold_cache: dict[str, list] = {}
    pairs = []
    for src, tgt in itertools.permutations(caches, 2):
        best = optimum(data[tgt])
        goal = best * 1.05
        if tgt not in cold_cache:
            cold_cache[tgt] = [trials_to_target(cold_algorithm(s), ReplaySpace(caches[tgt]), ReplayRunner(caches[tgt]), goal,
                                                max_trials, batch, s) for s in range(seeds)]
        source = SourceData(replay_device(caches[src]), data[src])
        if adversarial:
            source = misleading(source)
        # a fresh space per run: a space samples differently once enumerated, so sharing one makes runs order-dependent
        warm = [trials_to_target(warm_algorithm(source, s, replay_device(caches[tgt]), **(warm_options or {})), ReplaySpace(caches[tgt]),
                                 ReplayRunner(caches[tgt]), goal, max_trials, batch, s) for s in range(seeds)]
        by_key = {m.candidate.key: m for m in data[tgt]}
        # the source's best among the target's configurations (a target may hold fewer)
        src_best = next(m.candidate.key for m in source.ranked() if m.candidate.key in by_key)
        ratio = by_key[src_best].cost / best if by_key[src_best].ok else 1e9
        row = {"source": src, "target": tgt, "cold_to_5pct_median": median_capped(cold_cache[tgt], max_trials),
               "warm_to_5pct_median": median_capped(warm, max_trials), "source_best_ratio": round(ratio, 4),
               "cold_runs": cold_cache[tgt], "warm_runs": warm}
        log(f"  {src} -> {tgt}: cold {row['cold_to_5pct_median']} {cold_cache[tgt]}  warm {row['warm_to_5pct_median']} {warm}"
            f"  source-best x{ratio:.3f}")
        pairs.append(row)
    return pairs


def summary(pairs: list[dict], cap: int) -> dict:
    def val(v):
        return cap + 1 if v is None else v

    ratios = [val(p["cold_to_5pct_median"]) / val(p["warm_to_5pct_median"]) for p in pairs]
    worst = max(val(p["warm_to_5pct_median"]) / val(p["cold_to_5pct_median"]) for p in pairs)
    return {"median_speedup": round(statistics.median(ratios), 3), "worst_warm_over_cold": round(worst, 3),
            "pairs": len(pairs)}


def markdown(groups: list[tuple[str, list[dict]]]) -> str:
    lines = ["| kernel | source | target | cold to 5% (median) | warm to 5% (median) | cold/warm | source best / target optimum |",
             "|---|---|---|---:|---:|---:|---:|"]
    for kernel, pairs in groups:
        for p in pairs:
            c, w = p["cold_to_5pct_median"], p["warm_to_5pct_median"]
            sp = f"{c / w:.1f}x" if c and w else "-"
            lines.append(f"| {kernel} | {p['source']} | {p['target']} | {c if c is not None else '>cap'} | "
                         f"{w if w is not None else '>cap'} | {sp} | {p['source_best_ratio']:.3f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", nargs="+", help="caches of one kernel on several GPUs (default: every kernel folder of the replay data)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--max-trials", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--kernels", nargs="+", help="only these kernel folders (default: all)")
    ap.add_argument("--json", help="write the results as JSON to this file")
    ap.add_argument("--adversarial", action="store_true",
                    help="invert each source's times (a deliberately misleading source) to check the fallback")
    ap.add_argument("--warm", nargs="*", default=[], metavar="OPTION=VALUE", help="WarmStart options (e.g. top_k=4)")
    args = ap.parse_args(argv)
    if args.cache:
        groups_in = [(Path(args.cache[0]).parent.name or "cache", args.cache)]
    else:
        folders = sorted(d for d in replay_dir().iterdir() if d.is_dir())
        groups_in = [(d.name, sorted(str(p) for p in d.glob("*.json*"))) for d in folders
                     if not args.kernels or d.name in args.kernels]
    t0 = time.time()
    groups, all_pairs = [], []
    for kernel, paths in groups_in:
        if len(paths) < 2:
            continue
        print(f"{kernel}: {len(paths)} GPUs", file=sys.stderr)
        warm_options = dict(o.split("=", 1) for o in args.warm)
        pairs = bench_group(paths, args.seeds, args.max_trials, args.batch, log=lambda s: print(s, file=sys.stderr),
                            warm_options=warm_options, adversarial=args.adversarial)
        for p in pairs:
            p["kernel"] = kernel
        groups.append((kernel, pairs))
        all_pairs.extend(pairs)
    print(markdown(groups))
    summ = summary(all_pairs, args.max_trials)
    print(f"\nmedian cold/warm over {summ['pairs']} pairs: {summ['median_speedup']}x; worst warm/cold: "
          f"{summ['worst_warm_over_cold']}x; seeds {args.seeds}, batch {args.batch}, cap {args.max_trials}; "
          f"{time.time() - t0:.0f} s")
    if args.json:
        out = {"pairs": [{k: p[k] for k in ("source", "target", "cold_to_5pct_median", "warm_to_5pct_median",
                                           "source_best_ratio")} | {"kernel": p["kernel"]} for p in all_pairs],
               "summary": summ, "seeds": args.seeds, "batch": args.batch, "max_trials": args.max_trials}
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
