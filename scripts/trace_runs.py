"""Trace searches batch by batch on recorded spaces: what each batch measured and how the best went.

One line per seed: the measurements until within 5% of the optimum, then one token per batch of 8,
``ARMS:BEST``, where ARMS has a letter per measurement (``s``: the search's own; for a warm start the
arm that proposed it: ``w`` warm, ``c`` cold, ``p`` probe), followed by ``x`` when it failed, and BEST
is the best cost so far over the optimum. What the benchmarks' medians hide: where a run spends its
measurements (failures, a plateau, an arm that keeps its slots).

    python scripts/trace_runs.py search ../shared/datasets/replay/gemm/RTX_2080_Ti.json.gz --seeds 10
    python scripts/trace_runs.py search limited/pnpoly/RTX_2080_Ti.json.gz --algorithm evolutionary+xgb:spread_avoid=1.0
    python scripts/trace_runs.py transfer SOURCE.json.gz TARGET.json.gz --adversarial top --seeds 5
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_search
import bench_transfer
import protocol
from script_args import positive_int

from autotune.algorithms.warm_start import SourceData
from autotune.runners.replay import ReplayRunner, replay_device
from autotune.search_spaces.replay import KTCache, ReplaySpace

BATCH = 8


def trace(algo, cache: KTCache, optimum: float, seed: int, limit: int, arm_of=None) -> tuple[int | None, list[str]]:
    """Measurements until within 5% of ``optimum`` (None: not within ``limit``), counted as the benchmarks
    count them, and one token per batch."""
    tokens, best = [], math.inf

    def token(results) -> None:
        nonlocal best
        letters = ""
        for m in results:
            letters += (arm_of(m.candidate.key) if arm_of else "s") + ("" if m.ok else "x")
            if m.ok:
                best = min(best, m.cost)
        tokens.append(f"{letters}:{best / optimum:.2f}")
    n = bench_transfer.trials_to_target(algo, ReplaySpace(cache), ReplayRunner(cache), 1.05 * optimum, limit, BATCH,
                                        seed, on_batch=token)
    return n, tokens


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("search", help="a search on one recorded space")
    s.add_argument("cache")
    s.add_argument("--algorithm", default=bench_search.DEFAULT_ALGORITHM, help="as bench_search.py names them")
    t = sub.add_parser("transfer", help="a warm start from one recorded space on another")
    t.add_argument("source")
    t.add_argument("target")
    t.add_argument("--adversarial", choices=bench_transfer.MISLEADING, default=None)
    t.add_argument("--warm", nargs="*", default=[], metavar="OPTION=VALUE", help="WarmStart options")
    for p in (s, t):
        p.add_argument("--seeds", type=positive_int, default=5, help="runs, seeds 0 to N-1, one line each (default 5)")
        p.add_argument("--limit", type=positive_int, default=400, help="measurements per run at most (default 400)")
    args = ap.parse_args(argv)
    cache = KTCache.load(args.cache if args.what == "search" else args.target)
    optimum = bench_transfer.optimum(bench_transfer.all_measurements(cache))

    def show(seed: int, n: int | None, tokens: list[str]) -> None:  # each seed's line as soon as it is traced
        print(f"seed {seed}: {n if n is not None else f'> {args.limit}'}  " + " ".join(tokens), flush=True)

    if args.what == "search":
        bench_search.make(args.algorithm)  # an unknown name or option: refused before the first run
        for seed in range(args.seeds):
            show(seed, *trace(bench_search.make(args.algorithm), cache, optimum, seed, args.limit))
    else:
        source = KTCache.load(args.source)
        data = SourceData(replay_device(source), bench_transfer.all_measurements(source))
        if args.adversarial:
            data = bench_transfer.misleading(data, args.adversarial)
        for seed in range(args.seeds):
            algo = bench_transfer.warm_algorithm([data], seed, target_device=replay_device(cache),
                                                 **protocol.parse_options(args.warm))
            show(seed, *trace(algo, cache, optimum, seed, args.limit, lambda k, a=algo: a.owner.get(k, "?")[0]))
    return 0


if __name__ == "__main__":
    from autotune.errors import run_script

    run_script(main)
