"""Benchmark: the strategy search against published Megatron-LM layouts, in simulation.

Every case is a GPT model (sequence 2048, vocabulary 51200, activation recomputation, mixed precision)
trained on DGX A100 nodes with the layout its source published: tensor (t) and pipeline (p) degrees,
data parallel degree d = GPUs / (t p).

- ``sc21``: Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
  Megatron-LM" (SC'21, arXiv:2104.04473), Table 1, the rows on up to 512 GPUs (the table as in
  ``validate_simulator.py``), as the authors' script for the table ran them (micro-batches of 16
  sequences for 1.7B to 7.5B, 8 for 18B, 4 for 39B; PyTorch's overlapped DDP without a pipeline).
- ``reduce-recompute``: Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
  Models" (arXiv:2205.05198), the GPT models of 22B, 175B, 530B and 1T parameters on 8, 64, 280 and 512
  GPUs at t = 8, p = 1, 8, 35 and 64, no data parallelism, one micro-batch of 4 sequences for 22B and
  micro-batches of one sequence for the others, 175B and 530B interleaved over 3 chunks per stage (its
  Table 3, as in ``validate_simulator.py``); published with full recomputation and with sequence
  parallelism and selective recomputation: the faster is the reference.
- ``held-out``: layouts the search's settings were never checked on, run only when named (``--cases held-out``):
  SC'21 Table 2's 175B at t = 8, p = 12 on 384 GPUs (batch 1536, micro-batches of one sequence); GPT-NeoX-20B
  at t = 2, p = 4 on its 96 A100 40GB (batch 1536, micro-batches of 4, ZeRO stage 1; ``published_rows.py``);
  BLOOM 176B at t = 4, p = 12 on its 384 A100s of Jean Zay (batch 2048, micro-batches of 2, 112 heads, its
  vocabulary of 250,880, ZeRO stage 1). Each on its own nodes, with the A100's (Megatron-LM's) figures.
- ``gpt3-xl``: the 1.3B model of Brown et al., "Language Models are Few-Shot Learners" (arXiv:2005.14165),
  Table 2.1 (24 layers, hidden 2048, 24 heads, batch 1M tokens: 512 sequences of 2,048), on one DGX A100 (8 GPUs),
  in the layout Megatron-LM runs a model that fits on one GPU with: SC'21 Table 1's 1.7B row (t = 1, p = 1,
  data parallel, micro-batches of 16 sequences, PyTorch's overlapped DDP).

For each case: the published layout's simulated iteration time (Megatron's strategy at its t and p,
``strategy.megatron``), then ``parallelize`` from scratch (the default algorithm, its baselines and seed
layouts first, then the search, within --time-budget seconds of wall time; the recomputation mode is
searched too) on the same GPUs and global batch. Reported: both times, their ratio (search / published: at most 1 is at least as fast), where the
best came from (a baseline, a seed layout or the search), and the wall time of the search.

    python scripts/bench_layouts.py [--time-budget 55] [--cases sc21 reduce-recompute gpt3-xl] [--json]
    python scripts/bench_layouts.py --trials 1000   # as `autotune parallelize` runs without a budget
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from autotune.drivers.parallel import parallelize
from autotune.search_spaces.parallel.clusters import DEVICES, get_cluster
from autotune.search_spaces.parallel.models import transformer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from published_results import BLOOM, BLOOM_RUN, REDUCE_RECOMPUTE, SEQ, TABLE1, TABLE2_MODELS, TABLE2_PTDP, VOCAB
from published_rows import NEOX_BATCH, NEOX_GPUS, NEOX_MICRO, NEOX_P, NEOX_SHAPE, NEOX_T, NEOX_VOCAB, neox_cluster
from published_runs import a100_40gb, iteration, jean_zay

# (source, name, layers, hidden, heads, GPUs, global batch, t, p, sequences per replica and micro-batch,
#  interleaved chunks per stage, gradients all-reduced during the backward: None for the simulator's default)
CASES = [
    *[("sc21", f"gpt-{size}b", layers, hidden, heads, gpus, batch, t, p, micro, virtual, overlap)
      for size, heads, hidden, layers, t, p, gpus, batch, _, micro, virtual, overlap in TABLE1 if gpus <= 512],
    *[("reduce-recompute", f"gpt-{name}", layers, hidden, heads, gpus, batch, t, p, micro, virtual, None)
      for name, heads, hidden, layers, t, p, gpus, batch, _, micro, virtual in REDUCE_RECOMPUTE],
    ("gpt3-xl", "gpt-1.3b", 24, 2048, 24, 8, 512, 1, 1, 16, 1, True),
]
_175B = TABLE2_MODELS["175b"]  # heads, hidden, layers
HELD_OUT = [
    *[("held-out", "gpt-175b-384", _175B[2], _175B[1], _175B[0], gpus, batch, t, p, micro, 1, None)
      for _, t, p, gpus, batch, micro, _ in TABLE2_PTDP[:1]],
    ("held-out", "gpt-neox-20b", *NEOX_SHAPE, NEOX_GPUS, NEOX_BATCH, NEOX_T, NEOX_P, NEOX_MICRO, 1, None),
    *[("held-out", "bloom-176b", BLOOM[0], BLOOM[1], heads, BLOOM[4], BLOOM[3], t, p, micro, 1, None)
      for t, p, micro, heads, _ in BLOOM_RUN],
]
# a held-out case's own nodes, vocabulary and ZeRO stage (the published layout's); every other case: DGX A100s
SITES = {"gpt-neox-20b": (lambda gpus: neox_cluster(a100_40gb(DEVICES["A100"])), NEOX_VOCAB, 1),
         "bloom-176b": (lambda gpus: jean_zay(gpus, DEVICES["A100"]), BLOOM[2], 1)}


def site(case):
    """(cluster, vocabulary, ZeRO stage of the published layout) of a case."""
    return SITES.get(case[1], (lambda gpus: get_cluster(f"dgx-a100-x{gpus // 8}"), VOCAB, 0))


def published(case) -> tuple[float | None, int]:
    """The published layout's simulated iteration time (None: it does not fit) and its micro-batch count; of
    the ``reduce-recompute`` cases the faster of the two published runs (full recomputation, and sequence
    parallelism with selective recomputation). Simulated as the search simulates every layout (the tensor-parallel
    reductions beside the weight gradients, ``Simulator``'s default), whatever code the source ran."""
    source, name, layers, hidden, heads, gpus, batch, t, p, per_micro, virtual, overlap = case
    make, vocab, zero = site(case)
    cluster = make(gpus)
    s, r, m = iteration(name, heads, hidden, layers, t, p, cluster, batch, SEQ, per_micro, overlap=overlap,
                        virtual=virtual, tp_overlap=True, vocab=vocab, zero=zero)
    best = s if r.fits else None
    if source == "reduce-recompute":
        s2, r2, _ = iteration(name, heads, hidden, layers, t, p, cluster, batch, SEQ, per_micro,
                              recompute="selective", sequence=True, virtual=virtual, tp_overlap=True)
        if r2.fits and (best is None or s2 < best):
            best = s2
    return best, m


def run_case(case, time_budget: float | None, seed: int, algorithm: str, trials: int | None = None) -> dict:
    source, name, layers, hidden, heads, gpus, batch, t, p, _, virtual, _ = case
    pub_s, pub_m = published(case)
    make, vocab, _ = site(case)
    graph = transformer(name, batch, layers, hidden, heads, SEQ, vocab, recompute=True)
    t0 = time.perf_counter()
    r = parallelize(graph, make(gpus), algorithm=algorithm, seed=seed,
                    time_budget=time_budget, trials=trials, db=None)  # a fresh search, kept nowhere
    wall = time.perf_counter() - t0
    best = r.best.cost if r.best.ok else None
    return {"source": source, "model": name, "gpus": gpus, "batch": batch, "published_layout": f"t{t} p{p} d{gpus // (t * p)}" + (f" v{virtual}" if virtual > 1 else ""),
            "published_microbatches": pub_m, "published_s": pub_s, "search_s": best, "best_source": r.best_source,
            "best_microbatches": r.space.microbatches_of(r.best.candidate),
            "ratio": best / pub_s if best and pub_s else None, "wall_s": wall, "simulations": r.simulations}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-budget", type=float, default=None, help="wall seconds of each search (default 55, "
                                                                    "none with --trials)")
    ap.add_argument("--trials", type=int, default=None,
                    help="simulations of each search after its baselines (`autotune parallelize` runs 1000 without a budget)")
    ap.add_argument("--cases", nargs="+", default=None, metavar="SOURCE|MODEL",
                    help="only the cases of these sources or models (default: every case but the held-out ones)")
    ap.add_argument("--algorithm", default="mcmc")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    named = CASES + HELD_OUT if args.cases else CASES  # the held-out cases run only when named
    cases = [c for c in named if not args.cases or c[0] in args.cases or c[1] in args.cases]
    if not cases:
        ap.error(f"no case matches {args.cases}; sources: {sorted({c[0] for c in CASES + HELD_OUT})}, "
                 f"models: {[c[1] for c in CASES + HELD_OUT]}")
    budget = args.time_budget if args.time_budget is not None or args.trials else 55.0
    rows = []
    for case in cases:
        rows.append(run_case(case, budget, args.seed, args.algorithm, args.trials))
        if not args.json:
            r = rows[-1]
            pub = f"{r['published_s']:.3f}" if r["published_s"] else "OOM"
            got = f"{r['search_s']:.3f}" if r["search_s"] else "none fits"
            ratio = f"{r['ratio']:.3f}" if r["ratio"] else "-"
            print(f"{r['source']:17} {r['model']:9} {r['gpus']:4} GPUs batch {r['batch']:5}  published "
                  f"{r['published_layout']:13} m{r['published_microbatches']:<4} {pub:>8} s  search {got:>8} s "
                  f"({r['best_source']}, m{r['best_microbatches']})  ratio {ratio}  {r['wall_s']:.1f} s wall, "
                  f"{r['simulations']} simulations", flush=True)
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    summary = {"cases": len(rows), "median_ratio": statistics.median(ratios) if ratios else None,
               "worst_ratio": max(ratios) if ratios else None,
               "at_least_as_fast": sum(r <= 1.0 + 1e-9 for r in ratios), "max_wall_s": max(r["wall_s"] for r in rows)}
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary}))
        return
    print(f"search / published: median {summary['median_ratio']:.3f}, worst {summary['worst_ratio']:.3f}; at least "
          f"as fast on {summary['at_least_as_fast']}/{len(ratios)}; longest search {summary['max_wall_s']:.1f} s")


if __name__ == "__main__":
    from autotune.errors import run_script

    run_script(main)
