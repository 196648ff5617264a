"""Equality saturation against the one-rewrite-at-a-time searches, on the eight bundled models.

    python scripts/bench_egraph.py [--models nasrnn,inception_v3] [--trials 3000] [--time-budget 45] [--small]
    python scripts/bench_egraph.py --measured    # op costs timed in onnxruntime instead

Each model is searched by ``equality-saturation`` (Tensat: every rule application at once in an
e-graph, the cheapest graph extracted by an integer program), ``backtracking`` and ``taso-queue``
with the budgets of ``autotune tune graph`` (3000 graphs, 45 s). All three rank graphs by one
deterministic per-op cost model: FLOPs and bytes moved at nominal rates (``OpCosts`` without an op
runner), ops that onnxruntime fuses into their producer free, as in the default graph cost. With no
op timing, the search time is the search's own and the costs are comparable across algorithms; the
table gives each one's predicted speed-up over the input (input cost / best cost found), its search
seconds and the graphs it evaluated.

With ``--measured`` the op costs are timed in onnxruntime (one thread, as ``tune graph`` on the CPU),
each distinct op once per model in a cache the three searches share: every search runs twice, the
first pass filling the cache, and the second (reported) pass is timed on the warm cache, so the search
times compare searching rather than op timing, and all three rank graphs by the same op costs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

from autotune.algorithms.registry import make_algorithm
from autotune.campaign import Campaign
from autotune.db import open_database
from autotune.errors import check_choice
from autotune.runners.graph import GraphCostRunner, OpCostCache, OpCosts, make_backend
from autotune.search_spaces.graphs import model_zoo, onnx_io
from autotune.search_spaces.graphs.space import GraphSpace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from script_args import output_file, write_json  # noqa: E402

ALGORITHMS = ("equality-saturation", "backtracking", "taso-queue")


def search(graph, algorithm: str, trials: int, time_budget: float, db, seed: int = 0, op_runner=None,
           cache=None, tag: str = "") -> dict:
    space = GraphSpace(graph)
    op_costs = OpCosts(op_runner, cache, max_measure=10**9, model=False)
    space.op_cost, space.fusion = op_costs.op_cost, op_costs.fusion
    runner = GraphCostRunner(space, op_costs)
    before = op_costs.graph_cost(graph)
    result = Campaign(f"{graph.name}-{algorithm}{tag}", space, make_algorithm(algorithm), runner, db, trials=trials,
                      time_budget=time_budget, batch=16, seed=seed, progress=False).run()
    best = result.best_evaluated.objective
    payload = result.best_evaluated.candidate.payload
    return {"model": graph.name, "algorithm": algorithm, "cost_before": before, "best_cost": best,
            "predicted_speedup": round(before / best, 4), "search_s": round(result.wall_s, 2),
            "evaluated": result.evaluations,
            "rules": [s[0] if isinstance(s, list) else "e-graph extraction" for s in payload], **({"saturation": space.saturation} if space.saturation else {})}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(model_zoo.MODELS))
    ap.add_argument("--algorithms", default=",".join(ALGORITHMS))
    ap.add_argument("--trials", type=int, default=3000, help="graphs evaluated per search (tune graph's default)")
    ap.add_argument("--time-budget", type=float, default=45.0, help="seconds per search (tune graph's default)")
    ap.add_argument("--small", action="store_true", help="tiny model versions (smoke test)")
    ap.add_argument("--measured", action="store_true", help="op costs timed in onnxruntime, shared by the searches")
    ap.add_argument("--json", type=output_file, default=None, help="also write the rows as JSON here (its folder must exist)")
    args = ap.parse_args(argv)
    for name in args.models.split(","):  # an unknown name: refused before the first search
        check_choice("model (--models)", name, model_zoo.MODELS)
    for name in args.algorithms.split(","):
        make_algorithm(name)  # an unknown algorithm is refused here (the registry names the valid ones)
    op_runner = make_backend("cpu").op_runner if args.measured else None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        dbs = {}  # one database per pass: a search must not look up the warm-up's trials
        for name in args.models.split(","):
            graph = onnx_io.from_onnx(model_zoo.build(name, small=args.small), name=name)
            cache = OpCostCache()
            passes = ("-warm-up", "") if args.measured else ("",)
            for tag in passes:
                db = dbs.setdefault(tag, open_database(f"sqlite:///{tmp}/bench{tag}.db"))
                for algorithm in args.algorithms.split(","):
                    row = search(graph, algorithm, args.trials, args.time_budget, db, op_runner=op_runner,
                                 cache=cache, tag=tag)
                    if tag:
                        continue
                    rows.append({**row, "op_costs": "measured" if args.measured else "nominal"})
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        for db in dbs.values():
            db.close()
    algos = args.algorithms.split(",")
    print("| model | " + " | ".join(f"{a}: speed-up, s, graphs" for a in algos) + " |")
    print("|---" * (len(algos) + 1) + "|")
    for name in args.models.split(","):
        cells = [next(r for r in rows if r["model"] == name and r["algorithm"] == a) for a in algos]
        print(f"| {name} | " + " | ".join(f"{r['predicted_speedup']:.4f}, {r['search_s']:.2f}, {r['evaluated']}"
                                           for r in cells) + " |")
    if "equality-saturation" in algos and len(algos) > 1:
        for other in algos[1:]:
            ratio = [next(r["best_cost"] for r in rows if r["model"] == m and r["algorithm"] == "equality-saturation")
                     / next(r["best_cost"] for r in rows if r["model"] == m and r["algorithm"] == other)
                     for m in args.models.split(",")]
            faster = [next(r["search_s"] for r in rows if r["model"] == m and r["algorithm"] == other)
                      / max(next(r["search_s"] for r in rows if r["model"] == m and r["algorithm"] == "equality-saturation"),
                            1e-3) for m in args.models.split(",")]
            print(f"equality-saturation vs {other}: cost ratio median {sorted(ratio)[len(ratio) // 2]:.4f}, worst "
                  f"{max(ratio):.4f} (<= 1: at least as good on {sum(r <= 1 + 1e-9 for r in ratio)}/{len(ratio)}); "
                  f"search time {other}/ours geomean "
                  f"{math.exp(sum(math.log(f) for f in faster) / len(faster)):.1f}x, least {min(faster):.1f}x")
    if args.json:
        write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    from autotune.errors import run_script

    run_script(main)
