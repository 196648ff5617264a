"""Benchmark search algorithms on recorded spaces (Kernel Tuner caches): measurements to reach
within 5% / 10% of the optimum, best-so-far ratio after 50/100/200/500 measurements, simulated
tuning time, and the engine overhead per measured candidate.

Counting rule (the same for ours and for the peers): a measurement is the first measurement
of a configuration that exists in the recorded space; a failed configuration counts (infinite
cost); repeats and points outside the space cost nothing. Algorithms are driven directly
(ask -> ReplayRunner.measure -> tell), without a database.

    python scripts/bench_search.py --seeds 10 --budget 1000 --json bench.json
    python scripts/bench_search.py --cache gemm/RTX_3090.json.gz --algorithms mcmc+xgb random
    nice -n 10 python scripts/bench_search.py --protocol leave-one-gpu-out --seeds 10 --budget 1000 \
        --results search_results.json --json search_logo.json
    nice -n 10 python scripts/bench_search.py --protocol leave-one-kernel-out --seeds 10 --budget 1000 \
        --results search_results.json --json search_loko.json --candidates evolutionary+xgb bandit+xgb

ALGORITHM names: any registered algorithm, NAME+xgb for its model-guided version, and the peers
``random``, ``optuna-tpe-direct`` and ``kt:STRATEGY`` (Kernel Tuner in simulation mode, needs
the ``bench`` extra). ``ratio_at`` is best-so-far cost / optimum (1.0 = optimal).
A name may carry options, ``NAME[:KEY=VALUE,KEY=VALUE]`` (values read as JSON when they parse):
they go to make_guided for NAME+xgb (which splits them between ModelGuided and the inner
algorithm; ``xgb.KEY`` options go to its XGBoost model), to make_algorithm otherwise.

--protocol leave-one-kernel-out / leave-one-gpu-out (scripts/protocol.py has the folds): every
CANDIDATE (--candidates, default SEARCH_CANDIDATES) and every peer (--peers) is run once on every
space, seeds 0..S-1. Each fold then chooses, on its training spaces only, the candidate with the
smallest geometric mean over the training spaces of (its to-5% median / the best peer's to-5%
median on that space), a miss counting as budget + 1 on both sides (of its to-5% median alone when
no peer is run); ties go to the earlier candidate. The chosen candidate is reported on the fold's
test spaces against the best peer of each; then over all test spaces: median, distribution and
worst ratio ours / best peer, and the spaces where some seed missed. --results FILE keeps every
(candidate or peer, space, seed) result as it is measured, so an interrupted run continues.
--peers reference compares with the best peers' medians recorded in REFERENCE_BEST_PEER (the peers
are deterministic given the seed) instead of running them.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import protocol
from bench_peers import kt_available, run_kt, run_optuna_direct
from replay_data import replay_caches
from results_store import ResultStore
from script_args import non_negative_int, output_file, positive_int, refuse_unused, write_json
from search_report import label, print_summary, protocol_report, reach, summarise

from autotune.algorithms.model_guided import make_guided
from autotune.algorithms.registry import make_algorithm
from autotune.runners.replay import ReplayRunner, record_measurement
from autotune.search_spaces.replay import KTCache, ReplaySpace, cache_label
from autotune.types import Candidate

DEFAULT_ALGORITHM = "evolutionary+xgb"
OURS = ["random", "mcmc", "evolutionary", "backtracking", "optuna-tpe", "bandit"]
KT_PEERS = [f"kt:{s}" for s in ("genetic_algorithm", "simulated_annealing", "dual_annealing", "pso", "diff_evo",
                                "greedy_ils", "bayes_opt")]
# the settings a --protocol run chooses among, on the training spaces of each fold
SEARCH_CANDIDATES = ["evolutionary+xgb", "evolutionary+xgb:design=random", "evolutionary+xgb:avoid_failures=1.0"]
# the best peer per space: (its to-5% median, its name), over Kernel Tuner 1.5's strategies in
# simulation mode (genetic_algorithm, simulated_annealing, dual_annealing, pso, diff_evo, greedy_ils)
# and optuna-tpe-direct, seeds 0-9, budget 1000, measured by this script's protocol. The peers are
# deterministic given the seed (a rerun gives these figures again), so ``--peers reference`` compares against
# them without the hours Optuna takes on 2 cores. Every Kernel Tuner strategy that draws a Latin hypercube
# draws it from the run's seed (bench_peers.seeded_latin_hypercube), as these figures were measured.
REFERENCE_BEST_PEER = {
    "convolution/RTX_2080_Ti": (53.5, "optuna-tpe-direct"), "convolution/RTX_3060_laptop": (37.5, "kt:dual_annealing"),
    "convolution/RTX_3090": (40.5, "kt:simulated_annealing"), "convolution/RTX_Titan": (67, "optuna-tpe-direct"),
    "gemm/RTX_2080_Ti": (82, "optuna-tpe-direct"), "gemm/RTX_3090": (80.5, "optuna-tpe-direct"),
    "gemm/RTX_Titan": (76.5, "optuna-tpe-direct"), "pnpoly/RTX_2080_Ti": (40, "kt:dual_annealing"),
    "pnpoly/RTX_3060_laptop": (20.5, "optuna-tpe-direct"), "pnpoly/RTX_3090": (27, "optuna-tpe-direct"),
    "pnpoly/RTX_Titan": (69, "kt:simulated_annealing"),
    # the held-out recordings in scripts/recorded/hopper
    "conv2d/H100": (66, "optuna-tpe-direct"), "conv2d/H200": (61, "optuna-tpe-direct"),
    "gemm/H100": (55, "optuna-tpe-direct"), "gemm/H200": (52.5, "optuna-tpe-direct"),
    "conv2d_n8/H100": (41.5, "kt:diff_evo"), "conv2d_n8/H200": (41.5, "kt:diff_evo"),
}
DEFAULT_BATCH = 8  # a campaign's default
# every key of a --results file of this script: NAME|KERNEL/GPU|seed=N|budget=B[;more settings]
RESULT_KEYS = r"[^|]+\|[^|]+\|seed=-?\d+\|budget=\d+"
BATCH = DEFAULT_BATCH


class Tracker:
    """Applies the counting rule and records the best-so-far after each counted measurement;
    with ``stop_at``, done once the best-so-far is at or below it."""

    def __init__(self, space: ReplaySpace, budget: int, stop_at: float | None = None):
        self.space, self.budget, self.stop_at = space, budget, stop_at
        self.counted: set[str] = set()
        self.trace: list[float] = []
        self.sim: list[float] = []
        self.failed: list[bool] = []  # whether each counted measurement failed
        self.best = math.inf
        self.clock = 0.0

    @property
    def done(self) -> bool:
        return len(self.trace) >= self.budget or (self.stop_at is not None and self.best <= self.stop_at)

    def record(self, key: str, in_space: bool, cost: float, simulated_s: float) -> bool:
        if not in_space or key in self.counted or self.done:
            return False
        self.counted.add(key)
        self.best = min(self.best, cost)
        self.clock += simulated_s
        self.trace.append(self.best)
        self.sim.append(self.clock)
        self.failed.append(not math.isfinite(cost))
        return True


MODEL_OPTIONS: dict = {}
GUIDED_OPTIONS: dict = {}


def parse_candidate(spec: str) -> tuple[str, dict]:
    """``NAME[:KEY=VALUE,KEY=VALUE]`` -> (NAME, options)."""
    name, _, opts = spec.partition(":")
    return name, protocol.parse_options([o for o in opts.split(",") if o])


def make(spec: str):
    name, options = parse_candidate(spec)
    if name.endswith("+xgb"):
        model = {k[len("xgb."):]: v for k, v in options.items() if k.startswith("xgb.")}
        options = {k: v for k, v in options.items() if not k.startswith("xgb.")}
        return make_guided(name[: -len("+xgb")], "xgb", cost_model_options={**MODEL_OPTIONS, **model},
                           **{**GUIDED_OPTIONS, **options})
    return make_algorithm(name, **options)


def check_names(names: list[str]) -> None:
    """A UsageError for the first name (ours, NAME+xgb, a peer) that no run could make, with its options, before
    anything is measured: a name found wrong only when its turn comes would end a run of hours, and an unknown
    Kernel Tuner strategy would not fail at all (kt_evaluations reads a strategy's own error as its end: a row
    of misses)."""
    from autotune.errors import UsageError, check_choice

    for spec in names:
        if spec.startswith("kt:"):  # as run_one reads it: the rest is the strategy's name
            if kt_available():
                from kernel_tuner.interface import strategy_map

                check_choice("Kernel Tuner strategy", spec[3:], sorted(strategy_map))
        elif spec == "optuna-tpe-direct":
            continue
        elif parse_candidate(spec)[0] == "optuna-tpe-direct":
            raise UsageError(f"{spec}: optuna-tpe-direct takes no options")
        else:
            make(spec)  # an unknown algorithm or option is refused here


def run_one(name: str, cache: KTCache, space: ReplaySpace, seed: int, budget: int,
            stop_at: float | None = None) -> tuple[Tracker, float]:
    """One run of ``name`` (ours or a peer): its Tracker and engine seconds per measurement; with
    ``stop_at``, the run ends once a measurement costs at most that (a Kernel Tuner run is scored
    up to there)."""
    tracker = functools.partial(Tracker, stop_at=stop_at)
    if name.startswith("kt:"):
        return run_kt(name[3:], cache, space, seed, budget, tracker)
    if name == "optuna-tpe-direct":
        return run_optuna_direct(space, ReplayRunner(cache), seed, budget, tracker)
    return run_ours(name, space, ReplayRunner(cache), seed, budget, tracker)


@functools.cache
def start_libraries() -> float:
    """Import XGBoost and fit a tiny model, once per process before any timed run; returns the seconds it took.
    A process's one-time start-up (1-3 s on 2 cores: the import, the first fit's thread pool) would otherwise be
    charged to whichever run comes first, as engine time per measurement of that run alone (60 ms over a
    28-measurement run); it is said apart, on standard error."""
    t = time.perf_counter()
    import xgboost

    xgboost.train({"objective": "rank:pairwise"}, xgboost.DMatrix(np.arange(16.0).reshape(8, 2), label=np.arange(8.0)), 2)
    seconds = time.perf_counter() - t
    print(f"one-time start-up (XGBoost's import and first fit): {seconds:.2f} s, charged to no run", file=sys.stderr)
    return seconds


def run_ours(name: str, space: ReplaySpace, runner: ReplayRunner, seed: int, budget: int,
             tracker_class=Tracker) -> tuple[Tracker, float]:
    if parse_candidate(name)[0].endswith("+xgb"):  # the model-guided searches (as make reads the name) fit XGBoost
        start_libraries()
    tracker = tracker_class(space, budget)
    algo = make(name)
    engine = 0.0
    t = time.perf_counter()
    algo.bind(space, np.random.default_rng(seed), [])
    engine += time.perf_counter() - t
    idle = 0
    while not tracker.done and idle < 50:
        t = time.perf_counter()
        batch = algo.ask(min(BATCH, budget - len(tracker.trace)))
        engine += time.perf_counter() - t
        if not batch:
            break
        results = runner.measure(space.task, batch)
        new = 0
        for m in results:
            new += tracker.record(m.candidate.key, space.contains(m.candidate), m.objective, m.simulated_s)
        idle = 0 if new else idle + 1
        t = time.perf_counter()
        algo.tell(results)
        engine += time.perf_counter() - t
    return tracker, engine / max(1, len(tracker.trace))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", nargs="+", default=None, help="Kernel Tuner cache files (default: all replay spaces)")
    ap.add_argument("--seeds", type=positive_int, default=10, help="runs per algorithm and space, seeds "
                    "--first-seed, --first-seed + 1, ... (default 10); the figures are medians over them")
    ap.add_argument("--first-seed", type=non_negative_int, default=0, help="seeds from this one (fresh seeds to confirm a figure)")
    ap.add_argument("--peer-seeds", type=positive_int, default=None, metavar="N",
                    help="under a protocol, run the peers on seeds 0 to N-1 whatever --seeds and --first-seed say "
                         "(default: the candidates' seeds): a candidate's fresh or many seeds against peers' fixed ones")
    ap.add_argument("--budget", type=positive_int, default=1000,
                    help="measurements per run at most (default 1000); a run that has not come within 5%% of the "
                         "optimum by then is a miss")
    ap.add_argument("--algorithms", nargs="+", default=None,
                    help="names (default: ours with and without +xgb, and the peers; not used under --protocol)")
    ap.add_argument("--json", type=output_file, default=None,
                    help="write the results as JSON here (its folder must exist)")
    ap.add_argument("--model-option", nargs="*", default=[], help="KEY=VALUE options of the xgb model (experiments)")
    ap.add_argument("--batch", type=positive_int, default=DEFAULT_BATCH,
                    help=f"candidates asked for at once (default {DEFAULT_BATCH}, a campaign's default)")
    ap.add_argument("--guided-option", nargs="*", default=[], help="KEY=VALUE options of ModelGuided (experiments)")
    ap.add_argument("--protocol", choices=protocol.PROTOCOLS, default="none",
                    help="choose among --candidates on training spaces, report on held-out ones (default: none)")
    ap.add_argument("--candidates", nargs="+", default=None, metavar="NAME[:K=V,...]",
                    help=f"settings a protocol chooses among (default: {' '.join(SEARCH_CANDIDATES)})")
    ap.add_argument("--peers", nargs="*", default=None,
                    help="peers run under a protocol (default: optuna-tpe-direct and the kt: strategies); 'reference': "
                         "compare with the best peers' recorded medians (REFERENCE_BEST_PEER) instead of running them")
    ap.add_argument("--results", nargs="+", default=None, metavar="FILE",
                    help="JSON file of every measured (name, space, seed) result, reused when present (resume), new "
                         "results merged into it (processes may share it); more files after it are only read (runs "
                         "split over processes, reported together)")
    args = ap.parse_args(argv)
    if args.protocol == "none":
        refuse_unused({"--candidates": args.candidates is not None, "--peers": args.peers is not None,
                       "--peer-seeds": args.peer_seeds is not None, "--results": args.results is not None},
                      "applies to a --protocol run only")
    refuse_unused({"--algorithms": args.protocol != "none" and args.algorithms is not None},
                  "is not used under --protocol: --candidates and --peers name what runs")
    MODEL_OPTIONS.update(protocol.parse_options(args.model_option))
    GUIDED_OPTIONS.update(protocol.parse_options(args.guided_option))
    global BATCH
    BATCH = args.batch
    caches = args.cache or replay_caches()
    if args.protocol != "none":
        return run_protocol(args, caches)
    names = args.algorithms or (OURS + [f"{a}+xgb" for a in OURS if a != "random"] + ["optuna-tpe-direct"]
                                + [f"kt:{s}" for s in ("genetic_algorithm", "simulated_annealing", "dual_annealing",
                                                       "pso", "diff_evo", "greedy_ils", "bayes_opt")])
    if any(n.startswith("kt:") for n in names) and not kt_available():
        print("note: kernel_tuner is not importable (pip install 'autotune[bench]'); skipping the kt: peers")
        names = [n for n in names if not n.startswith("kt:")]
    check_names(names)
    report: dict = {"default_algorithm": DEFAULT_ALGORITHM, "budget": args.budget, "spaces": {}, "overhead_ms": {}}
    for path in caches:
        cache = KTCache.load(path)
        space_label = f"{Path(path).parent.name}/{cache.label}" if os.sep in str(path) else cache.label
        space = ReplaySpace(cache)
        costs = [m.objective for m in ReplayRunner(cache).measure(space.task, list(space.enumerate()))]
        optimum = min(costs)
        rows = report["spaces"].setdefault(space_label, {})
        print(f"\n## {space_label}: {space.size()} points, optimum {optimum * 1e3:.4f} ms\n")
        print("| algorithm | to 5% (median) | success 5% | to 10% | ratio@50 | @100 | @200 | @500 | sim time to 5% (s) | "
              "failed share to 5% | overhead ms/meas |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name in names:
            trackers, overheads = [], []
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                tr, ov = run_one(name, cache, space, seed, args.budget)
                trackers.append(tr)
                overheads.append(ov)
            s = summarise(trackers, optimum)
            s["overhead_ms_median"] = round(1e3 * float(np.median(overheads)), 2)
            rows[name] = s
            r = s["ratio_at"]
            print(f"| {name} | {s['to_5pct_median']} | {s['success_5pct']} | {s['to_10pct_median']} | {r['50']} | "
                  f"{r['100']} | {r['200']} | {r['500']} | {s['sim_time_to_5pct_s_median']} | "
                  f"{s['failed_share_to_5pct_median']} | {s['overhead_ms_median']} |",
                  flush=True)
    print_summary(report, names, REFERENCE_BEST_PEER)
    if args.json:
        write_json(args.json, report)
    return 0


def default_peers() -> list[str]:
    if kt_available():
        return ["optuna-tpe-direct"] + KT_PEERS
    print("note: kernel_tuner is not importable (pip install 'autotune[bench]'); the peers are "
          "optuna-tpe-direct and random only")
    return ["optuna-tpe-direct", "random"]


def measure(name: str, cache: KTCache, seed: int, budget: int, optimum: float) -> dict:
    """One run's figures, the run stopping once within 5% (the figures need no more; what an
    algorithm asks up to there does not depend on the budget). A fresh space per run: runs do not
    depend on their order."""
    tr, ov = run_one(name, cache, ReplaySpace(cache), seed, budget, stop_at=optimum * 1.05)
    return {"to_5pct": reach(tr.trace, optimum, 0.05), "to_10pct": reach(tr.trace, optimum, 0.10),
            "measured": len(tr.trace), "overhead_ms": round(1e3 * ov, 3)}


def run_protocol(args, caches: list[str]) -> int:
    """Every candidate and peer on every space, then per fold: choose on train, report on test."""
    candidates = args.candidates or SEARCH_CANDIDATES
    peers = default_peers() if args.peers is None else args.peers
    reference = peers == ["reference"]
    if reference:
        peers = []
    if any(n.startswith("kt:") for n in peers) and not kt_available():
        print("error: kernel_tuner is not importable: the kt: peers cannot run", file=sys.stderr)
        return 2
    check_names(candidates + peers)
    store = ResultStore(args.results, keys=RESULT_KEYS, script="bench_search.py", report=args.json)
    settings = f"budget={args.budget}" + (f";batch={BATCH}" if BATCH != DEFAULT_BATCH else "") + "".join(
        f";{k}={json.dumps(v, sort_keys=True)}" for k, v in (("model", MODEL_OPTIONS), ("guided", GUIDED_OPTIONS)) if v)
    units = [(Path(path).parent.name, cache_label(path)) for path in caches]
    try:
        folds = protocol.folds(units, args.protocol)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if reference:
        missing = [label(u) for u in units if label(u) not in REFERENCE_BEST_PEER]
        if missing:
            print(f"error: no reference best peer for {', '.join(missing)}; run the peers (--peers NAME ...)",
                  file=sys.stderr)
            return 2
    runs = {}
    t0 = time.time()
    for path, unit in zip(caches, units):
        cache = KTCache.load(path)
        optimum = min(record_measurement(cache, Candidate(cache.config(v)), rec).objective
                      for v, rec in cache.records.items())
        for name in dict.fromkeys(candidates + peers):
            t = time.time()
            seeds = range(args.peer_seeds) if args.peer_seeds and name in peers and name not in candidates else \
                range(args.first_seed, args.first_seed + args.seeds)
            runs[name, unit] = [store.get(f"{name}|{label(unit)}|seed={seed}|{settings}",
                                          measure, name, cache, seed, args.budget, optimum) for seed in seeds]
            med = protocol.capped_median([r["to_5pct"] for r in runs[name, unit]], args.budget)
            print(f"{label(unit)} {name}: to 5% median {med:g}; {time.time() - t:.1f} s, {time.time() - t0:.0f} s "
                  f"in all, {store.measured} runs measured so far", file=sys.stderr, flush=True)
    med = {k: protocol.capped_median([r["to_5pct"] for r in v], args.budget) for k, v in runs.items()}
    if reference:
        best_peer = {u: (REFERENCE_BEST_PEER[label(u)][0], REFERENCE_BEST_PEER[label(u)][1] + " (reference)")
                     for u in units}
    else:
        best_peer = {u: min((med[p, u], p) for p in peers) for u in units} if peers else {}
    report = protocol_report(args, candidates, peers, reference, units, folds, runs, med, best_peer)
    print(f"\n{store.measured} runs measured in this run, {time.time() - t0:.0f} s", file=sys.stderr)
    if args.json:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    from autotune.errors import run_script

    run_script(main)
