"""Compare the xgb cost model's objectives on recorded spaces: train on N random measurements,
rank the rest of the space, report Spearman and top-k recall (median over seeds), and the time
to train and to score the rest (from 10,000 rows the members score side by side on the process's
cores: ``taskset -c 0`` runs it on one).

    python scripts/bench_cost_model.py --train 100 --seeds 3

Without --cache, every space of the replay data (scripts/replay_data.py) is used.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from autotune.cost_models.metrics import quality
from autotune.cost_models.xgb import OBJECTIVES, XGBCostModel
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import ReplaySpace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay_data import replay_caches  # noqa: E402
from script_args import positive_int  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", nargs="+", default=None, help="Kernel Tuner cache files (default: all replay spaces)")
    ap.add_argument("--train", type=positive_int, default=100, help="training measurements")
    ap.add_argument("--seeds", type=positive_int, default=3, help="random training samples per space (default 3); figures are medians over them")
    ap.add_argument("--k", type=positive_int, default=50, help="k of the top-k recall")
    ap.add_argument("--objectives", nargs="+", default=list(OBJECTIVES), choices=list(OBJECTIVES),
                    help=f"the xgb objectives compared (default: all of {', '.join(OBJECTIVES)})")
    ap.add_argument("--members", type=positive_int, default=None, help="ensemble members (default: the model's default)")
    args = ap.parse_args(argv)
    caches = args.cache or replay_caches()
    extra = {} if args.members is None else {"members": args.members}
    print("| space | " + " | ".join(f"{o} spearman | {o} recall@{args.k} | {o} fit ms | {o} score ms" for o in args.objectives) + " |")
    print("|---|" + "---|---|---|---|" * len(args.objectives))
    totals = {o: [] for o in args.objectives}
    for path in caches:
        space = ReplaySpace(path)
        cs = list(space.enumerate())
        X = space.features(cs)
        y = np.array([m.objective for m in ReplayRunner(space.cache).measure(space.task, cs)])
        cells = []
        for obj in args.objectives:
            sp, rec, fit, score = [], [], [], []
            for seed in range(args.seeds):
                idx = np.random.default_rng(seed).permutation(len(cs))
                tr, te = idx[: args.train], idx[args.train:]
                t = time.perf_counter()
                model = XGBCostModel(objective=obj, **extra).fit(X[tr], y[tr])
                fit.append(time.perf_counter() - t)
                t = time.perf_counter()
                pred = model.predict(X[te])
                score.append(time.perf_counter() - t)
                q = quality(y[te], pred, k=args.k)
                sp.append(q["spearman"] or 0.0)
                rec.append(q["top_k_recall"] or 0.0)
            totals[obj].append((np.median(sp), np.median(rec)))
            cells.append(f"{np.median(sp):.3f} | {np.median(rec):.3f} | {1e3 * np.median(fit):.0f} | "
                         f"{1e3 * np.median(score):.1f}")
        label = f"{Path(path).parent.name}/{space.cache.label}"
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
    for obj, v in totals.items():
        a = np.array(v)
        print(f"{obj}: mean Spearman {a[:, 0].mean():.3f}, mean recall@{args.k} {a[:, 1].mean():.3f}")
    return 0


if __name__ == "__main__":
    from autotune.errors import run_script

    run_script(main)
