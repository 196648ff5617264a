"""The published sources whose runs shard with PyTorch FSDP, as the simulator runs them (``published_rows.py``
lists them in ``SOURCES`` with the others): MosaicML's MPT benchmarks (full sharding over every GPU, on A100s and on
H100s) and Meta's Llama 3 405B (FSDP over the data-parallel groups beside tensor and pipeline parallelism, on H100s).
"""

from __future__ import annotations

import published_results as tables
import published_results_mpt as mpt
from published_runs import a100_40gb, dgx_nodes, gib, h100, iteration

from autotune.search_spaces.parallel.models import LLAMA


def mpt_fsdp(gpu: str):
    """MosaicML's MPT benchmarks on ``gpu``'s nodes of 8 ("A100", "A100-40GB" or "H100": the DGX A100's or the DGX
    H100's; FSDP full sharding over every GPU: data parallelism, ZeRO-3, gathers prefetched): MFU by the benchmark's
    count."""
    table, preset, card = {"A100": (mpt.MPT_FSDP_A100, "dgx-a100", lambda devices: devices["A100"]),
                           "A100-40GB": (mpt.MPT_FSDP_A100_40GB, "dgx-a100", lambda devices: a100_40gb(devices["A100"])),
                           "H100": (mpt.MPT_FSDP_H100, "dgx-h100", h100)}[gpu]

    def rows(devices):
        def row(size, seq, gpus, micro, accumulation, checkpointing, params):
            layers, hidden, heads = mpt.MPT_SHAPES[size]
            cluster = dgx_nodes(gpus, card(devices), preset)
            tokens = micro * gpus * accumulation * seq
            s, r, _ = iteration(f"mpt-{size}", heads, hidden, layers, 1, 1, cluster, tokens // seq, seq, micro,
                                kernels="flash", recompute="full" if checkpointing else "none", vocab=mpt.MPT_VOCAB,
                                zero=3, dropout=False, zero_prefetch=True)
            flops = (6 * params + 12 * layers * hidden * seq) * tokens  # the benchmark's count: 6 N + 12 l h s per token
            return 100 * flops / s / gpus / cluster.peak(2), {
                "fits": r.fits, "peak_memory_gib": gib(r), "iteration_s": round(s, 3)}
        return [(f"{r[0]} s{r[1]} {r[2]} GPUs mb{r[4]} x{r[5]}{' ckpt' if r[6] else ''}", r[3],
                 lambda r=r: row(r[0], r[1], r[2], r[4], r[5], r[6], r[7])) for r in table]
    return rows


def llama3_405b(devices):
    """Meta's Llama 3 405B on H100s (``published_results.LLAMA3_405B``): TFLOP/s per GPU by PaLM's count (6 N + 12 l h
    s FLOPs per token, N = 405e9; the paper's MFU cites PaLM's). Simulated as Section 3.3.2 describes the runs: tensor
    parallelism with sequence parallelism over a node, 16 pipeline stages of 8 interleaved chunks each, the first chunk
    the embedding alone and the last the output and loss alone (so one block a chunk: 126 layers and the two
    embeddings on 128 chunks), no recomputation, the gradients and optimizer state sharded over the data-parallel
    group (ZeRO stage 2), each tensor-parallel reduction beside the weight gradient; micro-batches of one sequence."""
    layers, hidden, heads, kv, ffn, _, vocab = LLAMA["llama-3-405b"]

    def row(gpus, t, p, d, seq, per_dp):
        s, r, _ = iteration("llama-3-405b", heads, hidden, layers, t, p, dgx_nodes(gpus, h100(devices), "dgx-h100"),
                            d * per_dp, seq, 1, kernels="flash", recompute="none", vocab=vocab, zero=2,
                            embedding_blocks=True, dropout=False, tp_overlap=True, sequence=True, virtual=8,
                            kv_heads=kv, ffn=ffn, gated=True, tied=False)
        flops = (6 * tables.LLAMA3_PARAMS + 12 * layers * hidden * seq) * d * per_dp * seq
        return flops / s / gpus / 1e12, {"fits": r.fits, "peak_memory_gib": gib(r), "iteration_s": round(s, 3)}
    return [(f"405B t{t} p{p} d{d} {gpus} GPUs", pub, lambda r=(gpus, t, p, d, seq, per_dp): row(*r))
            for gpus, t, cp, p, d, seq, per_dp, pub, _ in tables.LLAMA3_405B if cp == 1]
