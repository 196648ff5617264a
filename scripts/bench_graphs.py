"""Graph-substitution benchmark on the eight locally built models.

    nice -n 10 python scripts/bench_graphs.py [--models resnet50,bert_base] [--time-budget 45] [--small]
    python scripts/bench_graphs.py --device cuda    # the same table with eager PyTorch on the GPU

For each model: runtime nodes before/after, search time, predicted speed-up (sum of
measured per-op costs), the searched graph's measured speed-up over the original,
whether the optimizer kept it (faster beyond noise) and the numeric check. On the
CPU (default) ops and models run in onnxruntime (one intra-op thread, its own best
level ORT_ENABLE_ALL); with --device cuda both run in torch on the GPU. Each search
is a campaign of `autotune.optimize_graph` (in a throw-away database unless --db names one).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from autotune.runners.graph import check_device
from autotune.search_spaces.graphs import model_zoo

from autotune.drivers.graph import DEFAULT_ALGORITHM, optimize_graph
from autotune.errors import AutotuneError


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(model_zoo.MODELS))
    ap.add_argument("--algorithm", default=DEFAULT_ALGORITHM)
    ap.add_argument("--time-budget", "--time-limit", dest="time_budget", type=float, default=45.0,
                    help="search seconds per model")
    ap.add_argument("--trials", "--budget", dest="trials", type=int, default=5000, help="graphs evaluated per model")
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--small", action="store_true", help="tiny model versions (smoke test)")
    ap.add_argument("--device", default="cpu", help="cpu (onnxruntime) or cuda (torch on the GPU)")
    ap.add_argument("--db", default=None, help="database URL keeping the campaigns and op costs (default: none kept)")
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    ap.add_argument("--no-fusion", action="store_true",
                    help="plain sum of per-op costs (TASO's cost), without onnxruntime's fusions counted free")
    args = ap.parse_args(argv)
    try:
        check_device(args.device)
    except AutotuneError as exc:
        ap.error(str(exc))
    rows = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for name in args.models.split(","):
        if name not in model_zoo.MODELS:
            ap.error(f"unknown model {name!r}; valid: {', '.join(model_zoo.MODELS)}")
        model = model_zoo.build(name, small=args.small)
        r = optimize_graph(model, device=args.device, algorithm=args.algorithm, trials=args.trials,
                           time_budget=args.time_budget, rounds=args.rounds, db=args.db,
                           fusion=False if args.no_fusion else None,
                           campaign=f"bench-graphs-{name}-{args.algorithm}-{stamp}" if args.db else None)
        lb, la = r["latency_before"], r["latency_after"]
        row = {"model": name, "device": r["op_device"], "nodes_before": r["nodes_before"],
               "nodes_after": r["nodes_searched"], "search_s": round(r["search_s"], 1), "evaluated": r["evaluated"],
               "ops_measured": r["ops_measured"], "predicted_speedup": round(r["predicted_speedup"], 3),
               "e2e_before_ms": round(lb["median_s"] * 1e3, 3), "e2e_before_iqr_ms": round(lb["iqr_s"] * 1e3, 3),
               "e2e_searched_ms": round(la["median_s"] * 1e3, 3), "e2e_searched_iqr_ms": round(la["iqr_s"] * 1e3, 3),
               "searched_speedup": round(r["candidate_speedup"], 3), "kept": r["kept"],
               "final_speedup": round(r["measured_speedup"], 3),
               "max_abs_error": r["check"]["max_abs_error"], "max_rel_error": r["check"]["max_rel_error"],
               "check_passed": r["check"]["passed"], "rules": r["rule_counts"], "campaign": r["campaign"],
               "finalize_s": round(r["total_s"] - r["search_s"], 1)}
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    cols = ["model", "nodes_before", "nodes_after", "search_s", "predicted_speedup", "e2e_before_ms",
            "e2e_searched_ms", "searched_speedup", "kept", "final_speedup", "max_rel_error"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(f"{r[c]:.2g}" if c == "max_rel_error" else str(r[c]) for c in cols) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    bad = [r["model"] for r in rows if not r["check_passed"] and r["kept"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
