"""Graph-substitution benchmark on the eight locally built models.

    nice -n 10 python scripts/bench_graphs.py [--models resnet50,bert_base] [--time-budget 45] [--small]
    python scripts/bench_graphs.py --device cuda    # the same table with eager PyTorch on the GPU
    python scripts/bench_graphs.py --peers          # the optimizers users pick instead, side by side
    python scripts/bench_graphs.py --exported --peers   # models exported by PyTorch from transformers

With --peers (CPU), each model is also optimized by the tools a user would reach for instead:
onnxruntime's offline optimizer (``optimized_model_filepath`` at the extended level, which writes
onnxruntime's fused contrib ops) and onnxsim (the ``bench`` extra; skipped when absent), and ours is
also run with ``--start-from best`` (from the fastest peer's output, as a user chains tools). Every model
is then timed interleaved against the original at onnxruntime's full optimization level, at 1 and 2
intra-op threads (--peer-rounds rounds in 5 blocks, each block with fresh sessions created in a shuffled
order: two sessions of one model differ by about 1%, which only fresh sessions average out), with its
numeric error: the table gives each one's speed-up over the original, marked + or - where it differs
beyond noise (a t-test over the blocks and at least 1%), and ours against the best peer.

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
import tempfile
import time
from pathlib import Path

import onnx

from autotune.drivers import graph_peers
from autotune.drivers.graph import DEFAULT_ALGORITHM, optimize_graph
from autotune.errors import AutotuneError
from autotune.runners.graph import check_device
from autotune.runners.timing import compare_blocks
from autotune.search_spaces.graphs import model_zoo

sys.path.insert(0, str(Path(__file__).resolve().parent))
from script_args import output_file, write_json  # noqa: E402

OURS = ("autotune", "autotune --start-from best")


def peer_rows(name: str, model, ours, from_best, rounds: int) -> list[dict]:
    """Speed-up over the original and numeric error of each optimizer's model, interleaved timing at full
    optimization, 1 and 2 threads, in 5 blocks of fresh sessions (``blocked_latency``). Each row's
    ``vs_original`` is the verdict over the blocks (``compare_blocks``: "faster", "slower" or "within noise");
    ours also get ``vs_best_peer``, against the peer with the least median at that thread count."""
    from autotune.runners.onnx_ops import blocked_latency, max_errors

    peers = graph_peers.peer_outputs(model, "best")  # onnxsim where it is installed
    models = {"original": model, **{"onnxruntime-extended" if k == "onnxruntime" else k: m for k, m in peers.items()}}
    models[OURS[0]], models[OURS[1]] = ours, from_best
    rows = []
    for threads in (1, 2):
        lat = dict(zip(models, blocked_latency(list(models.values()), rounds=rounds, threads=threads)))
        base = lat["original"]
        best_peer = min((k for k in lat if k not in ("original", *OURS)), key=lambda k: lat[k]["median_s"])
        for peer, t in lat.items():
            if peer == "original":
                continue
            rows.append({"model": name, "threads": threads, "optimizer": peer,
                         "speedup": round(base["median_s"] / t["median_s"], 3), "median_ms": round(t["median_s"] * 1e3, 3),
                         "vs_original": compare_blocks(base["block_medians"], t["block_medians"]),
                         **({"best_peer": best_peer, "vs_best_peer": compare_blocks(lat[best_peer]["block_medians"],
                                                                                   t["block_medians"])}
                            if peer in OURS else {}),
                         "max_rel_error": max_errors(model, models[peer], trials=1)["max_rel_error"]
                         if threads == 1 else None})
    return rows


MARK = {"faster": "+", "slower": "-", "within noise": ""}


def print_peer_tables(peers: list[dict]) -> None:
    """The peers side by side (speed-up over the original at 1 / 2 threads; + and - mark a difference beyond
    noise), then ours against the best peer."""
    def cell(p):
        return f"{p['speedup']}{MARK[p['vs_original']]}"

    def other(p):
        return next(q for q in peers if q["threads"] == 2 and q["model"] == p["model"] and q["optimizer"] == p["optimizer"])

    print("\n| model | optimizer | speed-up, 1 / 2 threads | max rel. error |")
    print("|---|---|---|---|")
    for p in (p for p in peers if p["threads"] == 1):
        print(f"| {p['model']} | {p['optimizer']} | {cell(p)} / {cell(other(p))} | {p['max_rel_error']:.2g} |")
    print("\n| model | ours | vs original, 1 / 2 threads | best peer, 1 thread | vs best peer, 1 / 2 threads |")
    print("|---|---|---|---|---|")
    for p in (p for p in peers if p["threads"] == 1 and p["optimizer"] in OURS):
        q = other(p)
        print(f"| {p['model']} | {p['optimizer']} | {p['vs_original']} / {q['vs_original']} | {p['best_peer']} | "
              f"{p['vs_best_peer']} / {q['vs_best_peer']} |")


EXPORTED = ("bert", "gpt2", "vit")
#: torchvision's classics (random weights, one 224x224 image), exported when torchvision is installed
VISION = ("resnet18", "mobilenet_v2", "squeezenet1_1", "efficientnet_b0", "shufflenet_v2_x1_0", "densenet121")


def exported_models(folder: str, small: bool = False, names=EXPORTED + VISION) -> dict:
    """Models exported by PyTorch's exporters with random weights (the ``bench`` extra): from transformers,
    BERT-base and GPT-2 on 128 token ids and ViT-B/16 on a 224x224 image; from torchvision (where it is
    installed) the CNNs of ``VISION`` on a 224x224 image; each by the TorchScript exporter at opset 17 and,
    where onnxscript is installed, by the dynamo exporter at opset 18. ``small``: two-layer versions of
    the transformers (for tests). {name: ModelProto}."""
    import os

    import onnx
    import torch
    import transformers

    torch.manual_seed(0)
    tiny = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128}

    class Last(torch.nn.Module):  # the last hidden state: one output, as a user exports it
        def __init__(self, m, key):
            super().__init__()
            self.m, self.key = m, key

        def forward(self, x):
            return self.m(**{self.key: x}).last_hidden_state

    def build(name):
        if name in VISION:
            import torchvision

            return torchvision.models.get_model(name, weights=None), torch.randn(1, 3, 224, 224), "input"
        if name == "bert":
            cfg = transformers.BertConfig(**(tiny | {"vocab_size": 100} if small else {}))
            return Last(transformers.BertModel(cfg), "input_ids"), torch.randint(0, cfg.vocab_size, (1, 128)), "input_ids"
        if name == "gpt2":
            cfg = transformers.GPT2Config(**({"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 100} if small else {}))
            return Last(transformers.GPT2Model(cfg), "input_ids"), torch.randint(0, cfg.vocab_size, (1, 128)), "input_ids"
        cfg = transformers.ViTConfig(**(tiny if small else {}))
        return Last(transformers.ViTModel(cfg), "pixel_values"), torch.randn(1, 3, 224, 224), "pixel_values"

    try:
        import onnxscript  # noqa: F401 - the dynamo exporter's dependency
        dynamo = True
    except ImportError:
        dynamo = False
    try:
        import torchvision  # noqa: F401
    except ImportError:
        names = [n for n in names if n not in VISION]
    out = {}
    for name in names:
        module, example, input_name = build(name)
        for kind, opset in (("torchscript", 17), ("dynamo", 18)):
            if kind == "dynamo" and not dynamo:
                continue
            path = os.path.join(folder, f"{name}-{kind}.onnx")
            torch.onnx.export(module.eval(), (example,), path, opset_version=opset, dynamo=kind == "dynamo",
                              input_names=[input_name])
            out[f"{name}-{kind}"] = onnx.load(path)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(model_zoo.MODELS))
    ap.add_argument("--algorithm", default=DEFAULT_ALGORITHM)
    ap.add_argument("--time-budget", "--time-limit", dest="time_budget", type=float, default=45.0,
                    help="search seconds per model")
    ap.add_argument("--trials", "--budget", dest="trials", type=int, default=5000, help="graphs evaluated per model")
    ap.add_argument("--rounds", type=int, default=25, help="rounds of the search's own end-to-end check")
    ap.add_argument("--peer-rounds", type=int, default=40, help="rounds of the peers' table (in 5 blocks)")
    ap.add_argument("--small", action="store_true", help="tiny model versions (smoke test)")
    ap.add_argument("--device", default="cpu", help="cpu (onnxruntime) or cuda (torch on the GPU)")
    ap.add_argument("--db", default=None, help="database URL keeping the campaigns and op costs (default: none kept)")
    ap.add_argument("--json", type=output_file, default=None, help="also write the rows as JSON here (its folder must exist)")
    ap.add_argument("--no-fusion", action="store_true",
                    help="plain sum of per-op costs (TASO's cost), without onnxruntime's fusions counted free")
    ap.add_argument("--exported", action="store_true",
                    help="models exported by PyTorch (BERT, GPT-2, ViT from transformers; torchvision's CNNs; "
                         "the bench extra) instead of the bundled ones; --models picks among them")
    ap.add_argument("--peers", action="store_true",
                    help="also time onnxruntime's offline optimizer and onnxsim (and ours from onnxsim's output)")
    args = ap.parse_args(argv)
    try:
        check_device(args.device)
    except AutotuneError as exc:
        ap.error(str(exc))
    if args.peers and args.device != "cpu":
        ap.error("--peers compares onnxruntime optimizers: use it with --device cpu")
    rows, peers = [], []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if args.exported:
        tmp = tempfile.mkdtemp(prefix="bench-graphs-")
        names = [m for m in args.models.split(",") if m in EXPORTED + VISION] or list(EXPORTED + VISION)
        models = exported_models(tmp, small=args.small, names=names)
    else:
        for name in args.models.split(","):
            if name not in model_zoo.MODELS:
                ap.error(f"unknown model {name!r}; valid: {', '.join(model_zoo.MODELS)}")
        models = {name: model_zoo.build(name, small=args.small) for name in args.models.split(",")}
    for name, model in models.items():
        with tempfile.NamedTemporaryFile(suffix=".onnx") as kept:  # ours, for the peers' table
            r = optimize_graph(model, kept.name, device=args.device, algorithm=args.algorithm, trials=args.trials,
                               time_budget=args.time_budget, rounds=args.rounds, db=args.db,
                               fusion=False if args.no_fusion else None,
                               campaign=f"bench-graphs-{name}-{args.algorithm}-{stamp}" if args.db else None)
            ours = onnx.load(kept.name) if args.peers else None
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
        if args.peers:
            chained = _optimized(model, args, start_from="best")
            before = len(peers)
            peers += peer_rows(name, model, ours, chained, args.peer_rounds)
            for p in peers[before:]:
                print(json.dumps(p), file=sys.stderr, flush=True)
    cols = ["model", "nodes_before", "nodes_after", "search_s", "predicted_speedup", "e2e_before_ms",
            "e2e_searched_ms", "searched_speedup", "kept", "final_speedup", "max_rel_error"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(f"{r[c]:.2g}" if c == "max_rel_error" else str(r[c]) for c in cols) + " |")
    if peers:
        print_peer_tables(peers)
    if args.json:
        write_json(args.json, {"rows": rows, "peers": peers})
    bad = [r["model"] for r in rows if not r["check_passed"] and r["kept"]]
    return 1 if bad else 0


def _optimized(model, args, start_from: str | None = None):
    """The model ``optimize_graph`` keeps (never slower than its input, by its own end-to-end check)."""
    with tempfile.NamedTemporaryFile(suffix=".onnx") as f:
        optimize_graph(model, f.name, device="cpu", algorithm=args.algorithm, trials=args.trials,
                       time_budget=args.time_budget, rounds=args.rounds, start_from=start_from, db=None)
        return onnx.load(f.name)


if __name__ == "__main__":
    from autotune.errors import run_script

    run_script(main)
