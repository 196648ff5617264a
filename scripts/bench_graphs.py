"""Graph-substitution benchmark on the eight locally built models.

    nice -n 10 python scripts/bench_graphs.py [--models resnet50,bert_base] [--time-limit 45] [--small]
    python scripts/bench_graphs.py --device cuda    # the same table with eager PyTorch on the GPU

For each model: runtime nodes before/after, search time, predicted speed-up (sum of
measured per-op costs), the searched graph's measured speed-up over the original,
whether the optimizer kept it (faster beyond noise) and the numeric check. On the
CPU (default) ops and models run in onnxruntime (one intra-op thread, its own best
level ORT_ENABLE_ALL); with --device cuda both run in torch on the GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter

from autotune.drivers import graph as optimizer
from autotune.search_spaces.graphs import model_zoo, onnx_io

from autotune.errors import AutotuneError


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(model_zoo.MODELS))
    ap.add_argument("--algorithm", default="backtracking")
    ap.add_argument("--time-limit", type=float, default=45.0)
    ap.add_argument("--budget", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--small", action="store_true", help="tiny model versions (smoke test)")
    ap.add_argument("--device", default="cpu", help="cpu (onnxruntime) or cuda (torch on the GPU)")
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    ap.add_argument("--no-fusion", action="store_true",
                    help="plain sum of per-op costs (TASO's cost), without onnxruntime's fusions counted free")
    args = ap.parse_args(argv)
    try:
        optimizer.check_device(args.device)
    except AutotuneError as exc:
        ap.error(str(exc))
    rows = []
    for name in args.models.split(","):
        model = model_zoo.build(name, small=args.small)
        graph = onnx_io.from_onnx(model)
        cm = optimizer.default_cost_model(device=args.device)
        cm.fusion = cm.fusion and not args.no_fusion
        res = optimizer.search(graph, args.algorithm, budget=args.budget, time_limit=args.time_limit, cost_model=cm)
        t0 = time.perf_counter()
        _, rep = optimizer.finalize(model, res, rounds=args.rounds, device=args.device)
        row = {"model": name, "device": cm.device, "nodes_before": len(graph.runtime_nodes()), "nodes_after": len(res.graph.runtime_nodes()),
               "search_s": round(res.search_s, 1), "evaluated": res.evaluated, "ops_measured": cm.measured,
               "predicted_speedup": round(res.cost_before / res.cost_after, 3),
               "e2e_before_ms": round(rep["latency_before"]["median_s"] * 1e3, 3),
               "e2e_before_iqr_ms": round(rep["latency_before"]["iqr_s"] * 1e3, 3),
               "e2e_searched_ms": round(rep["latency_after"]["median_s"] * 1e3, 3),
               "e2e_searched_iqr_ms": round(rep["latency_after"]["iqr_s"] * 1e3, 3),
               "searched_speedup": round(rep["candidate_speedup"], 3), "kept": rep["kept"],
               "final_speedup": round(rep["measured_speedup"], 3),
               "max_abs_error": rep["check"]["max_abs_error"], "max_rel_error": rep["check"]["max_rel_error"],
               "check_passed": rep["check"]["passed"], "rules": dict(Counter(res.applied)),
               "finalize_s": round(time.perf_counter() - t0, 1)}
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
