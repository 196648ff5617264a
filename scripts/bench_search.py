"""Benchmark search algorithms on recorded spaces (Kernel Tuner caches): measurements to reach
within 5% / 10% of the optimum, best-so-far ratio after 50/100/200/500 measurements, simulated
tuning time, and the engine overhead per measured candidate.

Counting rule (the same for ours and for the peers): a measurement is the first measurement
of a configuration that exists in the recorded space; a failed configuration counts (infinite
cost); repeats and points outside the space cost nothing. Algorithms are driven directly
(ask -> ReplayRunner.measure -> tell), without a database.

    python scripts/bench_search.py --seeds 10 --budget 1000 --json bench.json
    python scripts/bench_search.py --cache gemm/RTX_3090.json.gz --algorithms mcmc+xgb random

ALGORITHM names: any registered algorithm, NAME+xgb for its model-guided version, and the peers
``random``, ``optuna-tpe-direct`` and ``kt:STRATEGY`` (Kernel Tuner in simulation mode, needs
the ``bench`` extra). ``ratio_at`` is best-so-far cost / optimum (1.0 = optimal).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import KTCache, ReplaySpace
from bench_peers import kt_available, run_kt, run_optuna_direct
from replay_data import replay_caches

from autotune.algorithms.model_guided import make_guided
from autotune.algorithms.registry import make_algorithm

DEFAULT_ALGORITHM = "evolutionary+xgb"
OURS = ["random", "mcmc", "evolutionary", "backtracking", "optuna-tpe", "bandit"]
CHECKPOINTS = (50, 100, 200, 500)
# measurements to 5% of the best peer per space (Kernel Tuner strategies and Optuna TPE with their
# default settings, median over 10 seeds, budget 1000), used when the kt: peers are not run here
REFERENCE_BEST_PEER = {
    "gemm/RTX_3090": 146, "gemm/RTX_2080_Ti": 130, "gemm/RTX_Titan": 43, "convolution/RTX_3090": 42,
    "convolution/RTX_2080_Ti": 42, "convolution/RTX_Titan": 37, "convolution/RTX_3060_laptop": 51,
    "pnpoly/RTX_3090": 29, "pnpoly/RTX_3060_laptop": 29,
}
BATCH = 8


class Tracker:
    """Applies the counting rule and records the best-so-far after each counted measurement."""

    def __init__(self, space: ReplaySpace, budget: int):
        self.space, self.budget = space, budget
        self.counted: set[str] = set()
        self.trace: list[float] = []
        self.sim: list[float] = []
        self.best = math.inf
        self.clock = 0.0

    @property
    def done(self) -> bool:
        return len(self.trace) >= self.budget

    def record(self, key: str, in_space: bool, cost: float, simulated_s: float) -> bool:
        if not in_space or key in self.counted or self.done:
            return False
        self.counted.add(key)
        self.best = min(self.best, cost)
        self.clock += simulated_s
        self.trace.append(self.best)
        self.sim.append(self.clock)
        return True


MODEL_OPTIONS: dict = {}
GUIDED_OPTIONS: dict = {}


def _parse_options(items: list[str]) -> dict:
    out = {}
    for item in items:
        k, _, v = item.partition("=")
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def make(name: str):
    if name.endswith("+xgb"):
        return make_guided(name[: -len("+xgb")], "xgb", cost_model_options=MODEL_OPTIONS, **GUIDED_OPTIONS)
    return make_algorithm(name)


def run_ours(name: str, space: ReplaySpace, runner: ReplayRunner, seed: int, budget: int) -> tuple[Tracker, float]:
    tracker = Tracker(space, budget)
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


def summarise(trackers: list[Tracker], optimum: float) -> dict:
    def reach(tr: Tracker, tol: float) -> int | None:
        for i, b in enumerate(tr.trace):
            if b <= optimum * (1 + tol):
                return i + 1
        return None

    out: dict = {"seeds": len(trackers)}
    for tol, label in ((0.05, "5pct"), (0.10, "10pct")):
        hits = [reach(tr, tol) for tr in trackers]
        # median over seeds, a miss counting as worse than any hit (None when half or more missed)
        ranked = sorted(h if h is not None else math.inf for h in hits)
        med = ranked[(len(ranked) - 1) // 2] if len(ranked) % 2 else 0.5 * (ranked[len(ranked) // 2 - 1] + ranked[len(ranked) // 2])
        out[f"to_{label}_median"] = None if not math.isfinite(med) else math.ceil(med)
        out[f"success_{label}"] = round(sum(h is not None for h in hits) / len(hits), 3)
        if label == "5pct":
            sims = sorted(tr.sim[h - 1] if h else math.inf for tr, h in zip(trackers, hits))
            mid = sims[(len(sims) - 1) // 2]
            out["sim_time_to_5pct_s_median"] = round(mid, 2) if math.isfinite(mid) else None
    out["ratio_at"] = {
        str(k): round(float(np.median([(tr.trace[min(k, len(tr.trace)) - 1] if tr.trace else math.inf) / optimum
                                       for tr in trackers])), 4)
        for k in CHECKPOINTS
    }
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", nargs="+", default=None, help="Kernel Tuner cache files (default: all replay spaces)")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--algorithms", nargs="+", default=None, help="names (default: ours with and without +xgb, and the peers)")
    ap.add_argument("--json", default=None, help="write the results as JSON here")
    ap.add_argument("--model-option", nargs="*", default=[], help="KEY=VALUE options of the xgb model (experiments)")
    ap.add_argument("--guided-option", nargs="*", default=[], help="KEY=VALUE options of ModelGuided (experiments)")
    args = ap.parse_args(argv)
    MODEL_OPTIONS.update(_parse_options(args.model_option))
    GUIDED_OPTIONS.update(_parse_options(args.guided_option))
    caches = args.cache or replay_caches()
    names = args.algorithms or (OURS + [f"{a}+xgb" for a in OURS if a != "random"] + ["optuna-tpe-direct"]
                                + [f"kt:{s}" for s in ("genetic_algorithm", "simulated_annealing", "dual_annealing",
                                                       "pso", "diff_evo", "greedy_ils", "bayes_opt")])
    if any(n.startswith("kt:") for n in names) and not kt_available():
        print("note: kernel_tuner is not importable (pip install 'autotune[bench]'); skipping the kt: peers")
        names = [n for n in names if not n.startswith("kt:")]
    report: dict = {"default_algorithm": DEFAULT_ALGORITHM, "budget": args.budget, "spaces": {}, "overhead_ms": {}}
    for path in caches:
        cache = KTCache.load(path)
        label = f"{Path(path).parent.name}/{cache.label}" if os.sep in str(path) else cache.label
        space = ReplaySpace(cache)
        costs = [ReplayRunner(cache).measure(space.task, [c])[0].objective for c in space.enumerate()]
        optimum = min(costs)
        rows = report["spaces"].setdefault(label, {})
        print(f"\n## {label}: {space.size()} points, optimum {optimum * 1e3:.4f} ms\n")
        print("| algorithm | to 5% (median) | success 5% | to 10% | ratio@50 | @100 | @200 | @500 | sim time to 5% (s) | overhead ms/meas |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for name in names:
            trackers, overheads = [], []
            for seed in range(args.seeds):
                if name.startswith("kt:"):
                    tr, ov = run_kt(name[3:], cache, space, seed, args.budget, Tracker)
                elif name == "optuna-tpe-direct":
                    tr, ov = run_optuna_direct(space, ReplayRunner(cache), seed, args.budget, Tracker)
                else:
                    tr, ov = run_ours(name, space, ReplayRunner(cache), seed, args.budget)
                trackers.append(tr)
                overheads.append(ov)
            s = summarise(trackers, optimum)
            s["overhead_ms_median"] = round(1e3 * float(np.median(overheads)), 2)
            rows[name] = s
            r = s["ratio_at"]
            print(f"| {name} | {s['to_5pct_median']} | {s['success_5pct']} | {s['to_10pct_median']} | {r['50']} | "
                  f"{r['100']} | {r['200']} | {r['500']} | {s['sim_time_to_5pct_s_median']} | {s['overhead_ms_median']} |",
                  flush=True)
    print_summary(report, names)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


def print_summary(report: dict, names: list[str]) -> None:
    peers = [n for n in names if n == "random" or n == "optuna-tpe-direct" or n.startswith("kt:")]
    default = report["default_algorithm"]
    print("\n## Summary: measurements to reach within 5% of the optimum (median over seeds)\n")
    print("| space | " + " | ".join(names) + " | best peer here | reference best peer |")
    print("|---|" + "---|" * (len(names) + 2))
    wins = ratio_ok = compared = 0
    for label, rows in report["spaces"].items():
        vals = {n: rows[n]["to_5pct_median"] for n in names if n in rows}
        pv = [(vals[p], p) for p in peers if vals.get(p) is not None]
        best = min(pv) if pv else (None, "-")
        ref = REFERENCE_BEST_PEER.get(label)
        cands = [x for x in (best[0], ref) if x is not None]
        target = min(cands) if cands else None
        if default in vals and target is not None:
            compared += 1
            ours = vals[default] if vals[default] is not None else math.inf
            wins += ours < target
            ratio_ok += ours <= 1.5 * target
        print(f"| {label} | " + " | ".join(str(vals.get(n)) for n in names) + f" | {best[0]} ({best[1]}) | {ref} |")
    if compared:
        print(f"\n{default}: fewer measurements than the best peer (min of here and reference) on {wins}/{compared} "
              f"spaces, within 1.5x on {ratio_ok}/{compared}")
    for n in names:
        v = [rows[n]["to_5pct_median"] for rows in report["spaces"].values() if n in rows]
        v = [x if x is not None else math.inf for x in v]
        ov = [rows[n]["overhead_ms_median"] for rows in report["spaces"].values() if n in rows]
        print(f"{n}: median over spaces {np.median(v) if v else None}, engine overhead median {np.median(ov):.2f} ms/measurement")


if __name__ == "__main__":
    raise SystemExit(main())
