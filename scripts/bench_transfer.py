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
    nice -n 10 python scripts/bench_transfer.py --protocol leave-one-gpu-out --seeds 5 \
        --results transfer_results.json --json transfer_logo.json
    nice -n 10 python scripts/bench_transfer.py --protocol leave-one-kernel-out --seeds 5 \
        --results transfer_results.json --json transfer_loko.json --candidates default top_k=8 top_k=2,min_rho=0.3

Without --cache, every kernel folder of the replay data (scripts/replay_data.py:
../shared/datasets/replay next to the repository, or $AUTOTUNE_REPLAY_DIR) is one group. Prints a Markdown table and a summary (median ratio cold/warm over pairs, worst
warm/cold ratio).

--protocol leave-one-kernel-out / leave-one-gpu-out (scripts/protocol.py has the folds; a unit is an
ordered pair (source, target) of GPUs of one kernel): every CANDIDATE, a set of WarmStart options
``KEY=VALUE,KEY=VALUE`` or ``default`` (--candidates, default WARM_CANDIDATES; values read as JSON
when they parse), is run once on every pair, seeds 0..S-1, and cold search once per target. Each
fold then chooses, on its training pairs only, the candidate with the smallest worst warm/cold
(to-5% medians, a miss counting as --max-trials + 1) over the training pairs; candidates within 1%
of that worst case are a tie, broken by the larger median cold/warm, then by list order. The chosen
candidate is reported on the test pairs (leave-one-gpu-out: the pairs whose target is the left-out
GPU; its training pairs involve that GPU nowhere); then over all test pairs, split into same-vendor
and cross-vendor pairs: median cold/warm, its distribution and the worst warm/cold.
--results FILE keeps every (cold or candidate, pair, seed) result as it is measured, so an
interrupted run continues.

--auto: per target instead of per pair, the sources that `--transfer-from auto` would pick for it among the
kernel's other GPUs (the most similar by their properties, at most 2: autotune/transfer/sources.py), each
warm start against the cold search on the same target.

    python scripts/bench_transfer.py --auto --seeds 5
"""

from __future__ import annotations

import argparse
import functools
import itertools
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from autotune.algorithms.model_guided import ModelGuided
from autotune.algorithms.registry import make_algorithm
from autotune.algorithms.warm_start import SourceData, WarmStart
from autotune.cost_models.xgb import XGBCostModel
from autotune.runners.replay import ReplayRunner, record_measurement, replay_device
from autotune.search_spaces.replay import KTCache, ReplaySpace, cache_labels
from autotune.transfer.similarity import rank_similar
from autotune.transfer.sources import pick_auto, source_data
from autotune.types import Candidate

sys.path.insert(0, str(Path(__file__).resolve().parent))
import protocol
from replay_data import replay_groups
from results_store import ResultStore
from script_args import non_negative_int, output_file, positive_int, refuse_unused, write_json
from transfer_report import markdown, protocol_report, summary

from autotune.errors import UsageError, check_choice

# every key of a --results file of this script: cold|KERNEL/GPU or warm:CANDIDATE|KERNEL/SOURCE->TARGET, then
# |seed=N|cap=C;batch=B[;adversarial...]
RESULT_KEYS = r"(cold|warm:[^|]*)\|[^|]+\|seed=-?\d+\|cap=\d+;batch=\d+"

# the WarmStart settings a --protocol run chooses among, on the training pairs of each fold
WARM_CANDIDATES = ["default", "top_k=4", "top=3"]


def all_measurements(cache: KTCache) -> list:
    return [record_measurement(cache, Candidate(cache.config(v)), rec) for v, rec in cache.records.items()]


def optimum(ms: list) -> float:
    return min(m.cost for m in ms if m.ok)


def trials_to_target(algo, space, runner, target: float, max_trials: int, batch: int, seed: int,
                     on_batch=None) -> int | None:
    """1-based index of the first measurement within ``target`` cost, or None within max_trials;
    ``on_batch(results)`` sees every measured batch (the last one too)."""
    algo.bind(space, np.random.default_rng(seed))
    n = 0
    while n < max_trials:
        cs = algo.ask(min(batch, max_trials - n))
        if not cs:
            break
        ms = runner.measure(space.task, cs)
        if on_batch:
            on_batch(ms)
        for m in ms:
            n += 1
            if m.ok and m.cost <= target:
                return n
        algo.tell(ms)
    return None


def cold_algorithm(seed: int):
    return ModelGuided(make_algorithm("evolutionary"), XGBCostModel(seed=seed))


def warm_algorithm(sources: list[SourceData], seed: int, target_device=None, **options):
    return WarmStart(make_algorithm("evolutionary"), sources, target_device=target_device, **options)


def median_capped(values: list[int | None], cap: int) -> int | None:
    med = statistics.median([cap + 1 if v is None else v for v in values])
    return None if med > cap else round(med)


MISLEADING = ("inverted", "top")


def misleading(source: SourceData, how: str = "inverted") -> SourceData:
    """A deliberately poor guide made of the source's data. ``inverted``: its times inverted (its best
    becomes its worst: wrong everywhere). ``top``: its best 5% of successful configurations get its
    median time times 2, so it ranks the bulk as before but its top is wrong and its apparent best
    is a configuration that is merely good (the source that a check of overall agreement passes)."""
    from autotune.types import Measurement, Status

    ok = sorted(m.cost for m in source.measurements if m.ok)
    if how == "inverted":
        ms = [Measurement(m.candidate, Status.OK, cost=1.0 / m.cost) if m.ok else m for m in source.measurements]
    elif how == "top":
        cut, slow = ok[max(0, len(ok) // 20 - 1)], 2.0 * ok[len(ok) // 2]
        ms = [Measurement(m.candidate, Status.OK, cost=slow) if m.ok and m.cost <= cut else m
              for m in source.measurements]
    else:
        raise ValueError(f"misleading source: {how!r} is not one of {', '.join(MISLEADING)}")
    return SourceData(source.device, ms)


def source_best_ratio(source: SourceData, target: list) -> float:
    """The source's best configuration among the target's (a target may hold fewer): its time on the target
    over the target's optimum (1e9 when it fails there)."""
    by_key = {m.candidate.key: m for m in target}
    src_best = by_key[next(m.candidate.key for m in source.ranked() if m.candidate.key in by_key)]
    return src_best.cost / optimum(target) if src_best.ok else 1e9


def bench_group(paths: list[str], seeds: int, max_trials: int, batch: int, log=print, warm_options=None,
                adversarial: str | None = None) -> list[dict]:
    caches = {name: KTCache.load(p) for p, name in cache_labels(paths).items()}
    data = {name: all_measurements(c) for name, c in caches.items()}
    cold_cache: dict[str, list] = {}
    pairs = []
    for src, tgt in itertools.permutations(caches, 2):
        goal = optimum(data[tgt]) * 1.05
        if tgt not in cold_cache:
            cold_cache[tgt] = [trials_to_target(cold_algorithm(s), ReplaySpace(caches[tgt]), ReplayRunner(caches[tgt]), goal,
                                                max_trials, batch, s) for s in range(seeds)]
        source = SourceData(replay_device(caches[src]), data[src])
        if adversarial:
            source = misleading(source, adversarial)
        # a fresh space per run: a space samples differently once enumerated, so sharing one makes runs order-dependent
        warm = [trials_to_target(warm_algorithm([source], s, replay_device(caches[tgt]), **(warm_options or {})), ReplaySpace(caches[tgt]),
                                 ReplayRunner(caches[tgt]), goal, max_trials, batch, s) for s in range(seeds)]
        ratio = source_best_ratio(source, data[tgt])
        row = {"source": src, "target": tgt, "cold_to_5pct_median": median_capped(cold_cache[tgt], max_trials),
               "warm_to_5pct_median": median_capped(warm, max_trials), "source_best_ratio": round(ratio, 4),
               "cold_runs": cold_cache[tgt], "warm_runs": warm}
        log(f"  {src} -> {tgt}: cold {row['cold_to_5pct_median']} {cold_cache[tgt]}  warm {row['warm_to_5pct_median']} {warm}"
            f"  source-best x{ratio:.3f}")
        pairs.append(row)
    return pairs


def bench_auto(paths: list[str], seeds: int, max_trials: int, batch: int, log=print) -> list[dict]:
    """Per target: cold search against the warm start from the sources `auto` picks among the other caches."""
    caches = {name: KTCache.load(p) for p, name in cache_labels(paths).items()}
    data = {name: all_measurements(c) for name, c in caches.items()}
    devices = {name: replay_device(c) for name, c in caches.items()}
    rows = []
    for tgt, cache in caches.items():
        others = {devices[n].key: n for n in caches if n != tgt}
        ranked = rank_similar(devices[tgt], [devices[n] for n in others.values()],
                              {k: data[n] for k, n in others.items()})
        picked = pick_auto(ranked)
        sources = [source_data(s, data[others[s.device.key]]) for s in picked]
        goal = optimum(data[tgt]) * 1.05

        cold, warm = [], []
        for seed in range(seeds):
            for runs, algo in ((cold, cold_algorithm(seed)),
                               (warm, warm_algorithm(sources, seed, target_device=devices[tgt]))):
                runs.append(trials_to_target(algo, ReplaySpace(cache), ReplayRunner(cache), goal, max_trials, batch, seed))
        ratio = source_best_ratio(max(sources, key=lambda s: s.weight), data[tgt])  # whose best is measured first
        row = {"source": "+".join(others[s.device.key] for s in picked), "target": tgt,
               "cold_to_5pct_median": median_capped(cold, max_trials), "warm_to_5pct_median": median_capped(warm, max_trials),
               "source_best_ratio": round(ratio, 4), "similarity": [round(s.score, 3) for s in picked],
               "cold_runs": cold, "warm_runs": warm}
        log(f"  {row['source']} -> {tgt} (similarity {row['similarity']}): cold {row['cold_to_5pct_median']} {cold}  "
            f"warm {row['warm_to_5pct_median']} {warm}")
        rows.append(row)
    return rows


def parse_warm(candidate: str) -> dict:
    """``KEY=VALUE,KEY=VALUE`` (or ``default``) -> WarmStart options, values read as JSON when they parse."""
    return protocol.parse_options([] if candidate == "default" else candidate.split(","))


def vendor(cache: KTCache) -> str:
    from autotune.gpus import device_properties

    return device_properties(replay_device(cache)).get("vendor") or "unknown"


def run_protocol(args, groups_in: list[tuple[str, list[str]]]) -> int:
    """Cold search per target and every candidate on every pair, then per fold: choose on train, report on test."""
    candidates = args.candidates or WARM_CANDIDATES
    paths = {(kernel, name): p for kernel, ps in groups_in if len(ps) >= 2 for p, name in cache_labels(ps).items()}
    units = [(k, s, t) for (k, s), (k2, t) in itertools.permutations(paths, 2) if k == k2]
    try:
        folds = protocol.folds(units, args.protocol)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for c in candidates:  # an unknown option fails before anything is measured
        WarmStart(make_algorithm("evolutionary"), [], **parse_warm(c))
    store = ResultStore(args.results, keys=RESULT_KEYS, script="bench_transfer.py", report=args.json)
    settings = f"cap={args.max_trials};batch={args.batch}" + {None: "", "inverted": ";adversarial"}.get(
        args.adversarial, f";adversarial={args.adversarial}")
    caches = {g: KTCache.load(p) for g, p in paths.items()}
    data = {g: all_measurements(c) for g, c in caches.items()}
    goal = {g: optimum(ms) * 1.05 for g, ms in data.items()}
    cap, t0 = args.max_trials, time.time()

    def runs(key: str, make, target: tuple) -> list[int | None]:
        """Measurements to 5% on ``target`` of ``make(seed)`` per seed, from the store when there."""
        c = caches[target]

        def one(seed: int) -> int | None:
            # a fresh space per run: a space samples differently once enumerated, so sharing one makes runs order-dependent
            return trials_to_target(make(seed), ReplaySpace(c), ReplayRunner(c), goal[target], cap, args.batch, seed)

        return [store.get(f"{key}|seed={s}|{settings}", one, s) for s in range(args.first_seed, args.first_seed + args.seeds)]

    def progress(what: str, rs: list, t: float) -> None:
        print(f"{what}: to 5% median {protocol.capped_median(rs, cap):g} {rs}; {time.time() - t:.1f} s, "
              f"{time.time() - t0:.0f} s in all, {store.measured} runs measured so far", file=sys.stderr, flush=True)

    cold, warm = {}, {}
    for k, tgt in dict.fromkeys((k, t) for k, _, t in units):
        t = time.time()
        cold[k, tgt] = runs(f"cold|{k}/{tgt}", cold_algorithm, (k, tgt))
        progress(f"{k}/{tgt} cold", cold[k, tgt], t)
    for unit in units:
        k, src, tgt = unit
        source = SourceData(replay_device(caches[k, src]), data[k, src])
        source = misleading(source, args.adversarial) if args.adversarial else source
        device = replay_device(caches[k, tgt])
        for cand in candidates:
            t = time.time()
            options = parse_warm(cand)
            warm[cand, unit] = runs(f"warm:{cand}|{k}/{src}->{tgt}",
                                    functools.partial(warm_algorithm, [source], target_device=device, **options), (k, tgt))
            progress(f"{k}/{src}->{tgt} {cand}", warm[cand, unit], t)
    cold_med = {u: protocol.capped_median(cold[u[0], u[2]], cap) for u in units}
    warm_med = {cu: protocol.capped_median(rs, cap) for cu, rs in warm.items()}
    vendors = {g: vendor(c) for g, c in caches.items()}
    report = protocol_report(args, candidates, units, folds, cold, warm, cold_med, warm_med, vendors)
    print(f"\n{store.measured} runs measured in this run, {time.time() - t0:.0f} s", file=sys.stderr)
    if args.json:
        write_json(args.json, report)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", nargs="+", help="caches of one kernel on several GPUs (default: every kernel folder of the replay data)")
    ap.add_argument("--seeds", type=positive_int, default=5,
                    help="runs per pair, cold and warm (default 5); the figures are medians over them")
    ap.add_argument("--first-seed", type=non_negative_int, default=0, help="--protocol: seeds from this one (fresh seeds to confirm a choice)")
    ap.add_argument("--max-trials", type=positive_int, default=2000,
                    help="target measurements per run at most (default 2000); a run not within 5%% of the optimum by "
                         "then counts as --max-trials + 1")
    ap.add_argument("--batch", type=positive_int, default=8, help="candidates asked for at once (default 8)")
    ap.add_argument("--kernels", nargs="+", help="only these kernel folders (default: all)")
    ap.add_argument("--json", type=output_file, help="write the results as JSON to this file (its folder must exist)")
    ap.add_argument("--adversarial", nargs="?", const="inverted", choices=MISLEADING, default=None,
                    help="a deliberately misleading source made of each source's data, to check the fallback: "
                         "'inverted' (the default) inverts its times, 'top' makes its best 5%% look slow "
                         "(right on the bulk, wrong on the top)")
    ap.add_argument("--warm", nargs="*", default=[], metavar="OPTION=VALUE", help="WarmStart options (e.g. top_k=4)")
    ap.add_argument("--protocol", choices=protocol.PROTOCOLS, default="none",
                    help="choose among --candidates on training pairs, report on held-out ones (default: none)")
    ap.add_argument("--candidates", nargs="+", default=None, metavar="K=V,...",
                    help=f"WarmStart settings a protocol chooses among (default: {' '.join(WARM_CANDIDATES)})")
    ap.add_argument("--auto", action="store_true",
                    help="per target, warm-start from the sources `--transfer-from auto` picks among the other GPUs")
    ap.add_argument("--results", nargs="+", default=None, metavar="FILE",
                    help="JSON file of every measured (cold or candidate, pair, seed) result, reused when present (resume), new "
                         "results merged into it (processes may share it); more files after it are only read (runs "
                         "split over processes, reported together)")
    args = ap.parse_args(argv)
    if args.protocol == "none":
        refuse_unused({"--candidates": args.candidates is not None, "--results": args.results is not None,
                       "--first-seed": args.first_seed != 0}, "applies to a --protocol run only")
    else:
        refuse_unused({"--auto": args.auto, "--warm": bool(args.warm)},
                      "is not used under --protocol: --candidates name the warm starts that run")
    refuse_unused({"--warm": args.auto and bool(args.warm), "--adversarial": args.auto and bool(args.adversarial)},
                  "is not used with --auto: the sources are the ones `--transfer-from auto` picks, as they are")
    refuse_unused({"--kernels": args.cache is not None and args.kernels is not None},
                  "picks kernel folders of the replay data: it is not used with --cache")
    if args.cache:
        for path in args.cache:  # a missing file named first, as KTCache.load names it
            if not Path(path).exists():
                raise UsageError(f"cache file {path!r} does not exist")
        if len(args.cache) < 2:
            raise UsageError(f"--cache names {len(args.cache)} cache; a transfer needs one kernel recorded on at least "
                             "2 GPUs (a source and a target)")
        groups_in = [(Path(args.cache[0]).parent.name or "cache", args.cache)]
    else:
        groups = replay_groups()
        for k in args.kernels or []:
            check_choice("kernel folder (--kernels)", k, groups)
        groups_in = [(k, ps) for k, ps in groups.items() if not args.kernels or k in args.kernels]
        if not any(len(ps) >= 2 for _, ps in groups_in):
            raise UsageError("no kernel folder of the replay data has caches of 2 GPUs or more; a transfer needs a "
                             "source and a target")
    WarmStart(make_algorithm("evolutionary"), [], **protocol.parse_options(args.warm))  # bad --warm: refused now
    if args.protocol != "none":
        return run_protocol(args, groups_in)
    t0 = time.time()
    groups, all_pairs = [], []
    for kernel, paths in groups_in:
        if len(paths) < 2:
            continue
        print(f"{kernel}: {len(paths)} GPUs", file=sys.stderr)
        warm_options = protocol.parse_options(args.warm)
        log = functools.partial(print, file=sys.stderr)
        if args.auto:
            pairs = bench_auto(paths, args.seeds, args.max_trials, args.batch, log=log)
        else:
            pairs = bench_group(paths, args.seeds, args.max_trials, args.batch, log=log, warm_options=warm_options,
                                adversarial=args.adversarial)
        for p in pairs:
            p["kernel"] = kernel
        groups.append((kernel, pairs))
        all_pairs.extend(pairs)
    print(markdown(groups))
    summ = summary(all_pairs, args.max_trials)
    print(f"\nmedian cold/warm over {summ['pairs']} {'targets' if args.auto else 'pairs'}: {summ['median_speedup']}x; worst warm/cold: "
          f"{summ['worst_warm_over_cold']}x; seeds {args.seeds}, batch {args.batch}, cap {args.max_trials}; "
          f"{time.time() - t0:.0f} s")
    if args.json:
        out = {"pairs": [{k: p[k] for k in ("source", "target", "cold_to_5pct_median", "warm_to_5pct_median",
                                           "source_best_ratio")} | {"kernel": p["kernel"]} for p in all_pairs],
               "summary": summ, "seeds": args.seeds, "batch": args.batch, "max_trials": args.max_trials}
        write_json(args.json, out)
    return 0


if __name__ == "__main__":
    from autotune.errors import run_script

    run_script(main)
