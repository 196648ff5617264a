"""The published sources as the simulator runs them: each source's rows, simulated as its runs ran
(``published_runs.py``: the devices, clusters and iteration), on the devices and clusters they ran on.

``SOURCES`` maps each source's name to (what it is, the device calibration fits for it, its unit, its rows). A
source's rows are a function of the devices' current figures (``published_runs.fresh_devices``) that gives, per
row, its label, its published value (from ``published_results.py``, which names each source's paper, table and
conditions) and a function that simulates it. GPT-NeoX-20B, a held-out source only, keeps its facts and its
published figure beside its rows here, each with where it is from.

What is simulated lives here, and how it is scored lives in ``validate_simulator.py`` (calibration, the
leave-one-source-out protocol, the report), so each published run's simulation reads in one place.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import published_results as tables
from published_rows_fsdp import llama3_405b, mpt_fsdp
from published_runs import a100_40gb, a100_nodes, deepspeed, dgx2h, dgx_nodes, gib, iteration, jean_zay, megatron_flops, v100

from autotune.runners.simulator import costs, nccl
from autotune.search_spaces.parallel.clusters import DEVICES, Cluster, DeviceSpec
from autotune.search_spaces.parallel.models import optimizer_layout


def _sc21(devices):
    def row(size, heads, hidden, layers, t, p, gpus, batch, _, per_micro, virtual, overlap):
        s, r, micro = iteration(f"{size}b", heads, hidden, layers, t, p, dgx_nodes(gpus, devices["A100"]), batch, tables.SEQ,
                                per_micro, overlap=overlap, virtual=virtual)
        return megatron_flops(batch, layers, hidden) / s / gpus / 1e12, {"microbatches": micro, "fits": r.fits}
    return [(f"{r[0]}B t{r[4]} p{r[5]} {r[6]} GPUs", r[8], lambda r=r: row(*r)) for r in tables.TABLE1]


def _sc21_table2(rows, zero=0):
    """SC'21 Table 2's rows (PTD-P's, or with ``zero=3`` the ZeRO-3 baseline's, its gathers on demand): TFLOP/s per
    GPU as Table 1 counts them."""
    def row(devices, name, t, p, gpus, batch, per_micro):
        heads, hidden, layers = tables.TABLE2_MODELS[name]
        s, r, micro = iteration(name, heads, hidden, layers, t, p, dgx_nodes(gpus, devices["A100"]), batch, tables.SEQ,
                                per_micro, zero=zero, zero_rank_copies=zero == 3)
        return megatron_flops(batch, layers, hidden) / s / gpus / 1e12, {"microbatches": micro, "fits": r.fits}
    return lambda devices: [(f"{r[0]} t{r[1]} p{r[2]} {r[3]} GPUs mb{r[5]}", r[6],
                             lambda r=r: row(devices, *r[:6])) for r in rows]


def _reduce_recompute_run(devices, row, recompute, sequence):
    """One of Korthikanti et al.'s runs; their code (Megatron-LM of 2022) reduces each column-parallel layer's input
    gradient beside its weight gradient (the asynchronous all-reduce, or sequence parallelism's reduce-scatter)."""
    name, heads, hidden, layers, t, p, gpus, batch, _, micro_size, virtual = row
    return iteration(name, heads, hidden, layers, t, p, dgx_nodes(gpus, devices["A100"]), batch, tables.SEQ, micro_size,
                     recompute=recompute, sequence=sequence, virtual=virtual, tp_overlap=True)


def _reduce_recompute(devices, selective_sp: bool = False):
    def row(r):
        s, res, micro = _reduce_recompute_run(devices, r, "selective" if selective_sp else "full", selective_sp)
        return s, {"microbatches": micro, "fits": res.fits, "peak_memory_gib": gib(res)}
    published = tables.REDUCE_RECOMPUTE_SP if selective_sp else [r[8] for r in tables.REDUCE_RECOMPUTE]
    return [(f"{r[0]} t{r[4]} p{r[5]} {r[6]} GPUs", pub, lambda r=r: row(r))
            for r, pub in zip(tables.REDUCE_RECOMPUTE, published)]


def _reduce_recompute_memory(devices):
    def row(r, recompute, sequence):
        _, res, _ = _reduce_recompute_run(devices, r, recompute, sequence)
        return float(res.fits), {"peak_memory_gib": gib(res)}
    return [(f"{r[0]} {mode}{' +sp' if sp else ''}", fits, lambda r=r, mode=mode, sp=sp: row(r, mode, sp))
            for r in tables.REDUCE_RECOMPUTE for mode, sp, fits in tables.REDUCE_RECOMPUTE_MEMORY]


def _m19_seconds(devices, i: int, t: int, gpus: int, batch: int, overlap: bool = False) -> float:
    """Seconds per iteration of Megatron-LM 2019's model i, tensor parallel over t of ``gpus`` GPUs (the rest
    data parallel, its gradients all-reduced after the backward or, ``overlap``, during it), as the 2019 code ran
    it, sequence 1024."""
    size, heads, hidden, layers, _ = tables.MEGATRON19[i]
    return iteration(f"{size}b", heads, hidden, layers, t, 1, dgx2h(gpus, v100(devices, "2019")), batch, 1024,
                     overlap=overlap, kernels=tables.KERNELS_2019)[0]


def _m19_throughput(devices, i: int, replicas: int, batch: int, overlap: bool = False) -> float:
    """FLOP/s per GPU of Megatron-LM 2019's model i on t GPUs x ``replicas``, sequence 1024."""
    _, _, hidden, layers, t = tables.MEGATRON19[i]
    gpus = t * replicas
    return megatron_flops(batch, layers, hidden, 1024) / _m19_seconds(devices, i, t, gpus, batch, overlap) / gpus


def _m19_relative(devices):
    """Per-GPU throughput of a 2019 run in % of the 1.2B model's on one GPU (that simulated once per evaluation,
    at the devices' figures then)."""
    base = functools.cache(lambda: _m19_throughput(devices, 0, 1, 8))

    def rel(i, replicas, batch, overlap=False):
        return 100 * _m19_throughput(devices, i, replicas, batch, overlap) / base(), {}
    return rel


def _m19_weak(devices):
    rel = _m19_relative(devices)
    rows = [(f"{tables.MEGATRON19[i][0]}B t{tables.MEGATRON19[i][4]}", tables.MEGATRON19_WEAK_MP[i], lambda i=i: rel(i, 1, 8))
            for i in range(1, 4)]
    rows += [(f"{tables.MEGATRON19[i][0]}B t{tables.MEGATRON19[i][4]} x64", tables.MEGATRON19_WEAK_DP[i],
              lambda i=i: rel(i, 64, 512, tables.TORCH_DDP_2019[i])) for i in range(4)]
    return rows


def _m19_ddp(devices):
    rel = _m19_relative(devices)
    return [(f"8.3B t8 x64, {'overlapped' if on else 'after the backward'}", pub, lambda on=on: rel(3, 64, 512, on))
            for on, pub in tables.MEGATRON19_DDP]


def _m19_strong(devices):
    one = functools.cache(lambda: _m19_seconds(devices, 0, 1, 1, 8))  # once per evaluation, at the figures then

    def speedup(g):
        return one() / _m19_seconds(devices, 0, g, g, 8), {}
    return [(f"1.2B on {g} GPUs", pub, lambda g=g: speedup(g)) for g, pub in tables.MEGATRON19_STRONG]


def _m19_single(devices):
    return [("1.2B on 1 GPU", round(tables.MEGATRON19_SINGLE_MS), lambda: (1000 * _m19_seconds(devices, 0, 1, 1, 8), {}))]


def _megatron_v1(devices):
    def ms(i):
        size, heads, hidden, layers, t = tables.MEGATRON19[i]
        return 1000 * iteration(f"{size}b", heads, hidden, layers, t, 1, dgx2h(t, v100(devices)), 8, 1024)[0], {}
    return [(f"{tables.MEGATRON19[i][0]}B t{tables.MEGATRON19[i][4]}", pub, lambda i=i: ms(i)) for i, pub in tables.MEGATRON_V1]


def _mt_nlg(devices):
    """Megatron-Turing NLG 530B on 280-420 DGX A100 nodes: seconds per iteration (DeepSpeed's 1F1B pipeline, no
    interleaving; the gradients all-reduced after the backward, the Simulator's default with several micro-batches)."""
    layers, hidden, heads, t, p, batch = tables.MT_NLG

    def row(nodes):
        s, r, micro = iteration("530b", heads, hidden, layers, t, p, dgx_nodes(8 * nodes, deepspeed(devices)), batch,
                                tables.SEQ, tables.MT_NLG_MICRO)
        tflops = megatron_flops(batch, layers, hidden) / s / (8 * nodes) / 1e12
        return s, {"microbatches": micro, "fits": r.fits, "tflops_per_gpu": round(tflops, 1)}
    return [(f"530B t{t} p{p} {8 * n} GPUs", pub, lambda n=n: row(n)) for n, pub, _ in tables.MT_NLG_RUNS]


def _bloom_run(devices, name, hidden, layers, heads, t, p, per_micro, batch=None, bf16_optimizer=True,
               embedding_blocks=True):
    """One of BLOOM's layouts on the 48 Jean Zay nodes (its padded vocabulary; global batch ``batch``, default the
    run's 2048) with ZeRO stage 1, as the run's software ran it: DeepSpeed's BF16 optimizer (its fp32 gradients
    whole on every rank, each micro-batch's added in) and the embeddings given pipeline slots of their own. The
    notes' earlier software had neither (``bf16_optimizer``: gradients accumulated in fp16; ``embedding_blocks``:
    each stage its share of the transformer blocks). Returns ``iteration``'s (seconds, result, micro-batches)."""
    _, _, vocab, run_batch, gpus = tables.BLOOM
    return iteration(name, heads, hidden, layers, t, p, jean_zay(gpus, deepspeed(devices)), batch or run_batch,
                     tables.SEQ, per_micro, vocab=vocab, zero=1, embedding_blocks=embedding_blocks,
                     whole_grad_bytes=optimizer_layout("deepspeed-bf16") if bf16_optimizer else 0.0)


def _bloom(rows):
    """BLOOM 176B (:func:`_bloom_run`): TFLOP/s per GPU (Megatron-DeepSpeed's count, its padded vocabulary)."""
    layers, hidden, vocab, batch, gpus = tables.BLOOM

    def rows_of(devices):
        def row(t, p, per_micro, heads):
            s, r, micro = _bloom_run(devices, "176b", hidden, layers, heads, t, p, per_micro)
            return megatron_flops(batch, layers, hidden, vocab=vocab) / s / gpus / 1e12, {
                "microbatches": micro, "fits": r.fits, "peak_memory_gib": gib(r)}
        return [(f"t{t} p{p} d{gpus // (t * p)} mb{m} {a} heads", pub, lambda t=t, p=p, m=m, a=a: row(t, p, m, a))
                for t, p, m, a, pub in rows]
    return rows_of


def _bloom_memory(devices):
    """BLOOM's layouts of 2022-02-28 (:func:`_bloom_run`): fits in 80 GB (1) or not (0), the simulated and the
    published peak (GiB) beside."""
    def row(hidden, layers, heads, t, p, per_micro, published):
        _, r, _ = _bloom_run(devices, f"bloom-{layers}l", hidden, layers, heads, t, p, per_micro)
        return float(r.fits), {"peak_memory_gib": gib(r), "published_gib": published}
    return [(f"h{r[0]} L{r[1]} a{r[2]} t{r[3]} p{r[4]} mb{r[5]}", int(r[6] is not None), lambda r=r: row(*r))
            for r in tables.BLOOM_MEMORY]


def _bloom_memory_fp16(devices):
    """BLOOM's 181B shape on 2022-02-25 (:func:`_bloom_layouts_fp16`'s software): the layouts that ran (1) and
    those that ran out of memory (0), the simulated and the published peak (GiB) beside."""
    def row(d, t, p, per_micro, batch, published):
        _, r, _ = _bloom_run(devices, "181b", 14336, 72, 64, t, p, per_micro, batch, bf16_optimizer=False,
                             embedding_blocks=False)
        return float(r.fits), {"peak_memory_gib": gib(r), "published_gib": published}
    ran = [(*r[:5], mem) for r, mem in zip(tables.BLOOM_LAYOUTS_FP16, tables.BLOOM_LAYOUTS_FP16_MEM)]
    return [(f"t{r[1]} p{r[2]} d{r[0]} mb{r[3]} batch {r[4]}", fits, lambda r=r: row(*r))
            for rows, fits in ((ran, 1), ([(*r, None) for r in tables.BLOOM_LAYOUTS_FP16_OOM], 0)) for r in rows]


def _bloom_bf16_optimizer(devices):
    """BLOOM's 195B shape at t4 p12 d8 (:func:`_bloom_run`'s software but the optimizer): the iteration with the BF16
    optimizer (fp32 gradients, accumulated after every micro-batch) over the one that accumulated them in fp16."""
    def row(heads):
        fp16, bf16 = (_bloom_run(devices, "195b", 12288, 106, heads, 4, 12, 2, bf16_optimizer=b)[0] for b in (False, True))
        return bf16 / fp16, {"fp16_s": round(fp16, 2), "bf16_optimizer_s": round(bf16, 2)}
    return [(f"195B t4 p12 d8 mb2 {heads} heads", round(bf16 / fp16, 4), lambda heads=heads: row(heads))
            for heads, fp16, bf16 in tables.BLOOM_BF16_OPTIMIZER]


def _bloom_layouts_fp16(devices):
    """BLOOM's 181B shape in every layout timed on 2022-02-25: seconds per iteration (ZeRO stage 1, gradients
    accumulated in fp16, each stage holding its share of the transformer blocks)."""
    def row(d, t, p, per_micro, batch):
        s, r, micro = _bloom_run(devices, "181b", 14336, 72, 64, t, p, per_micro, batch, bf16_optimizer=False,
                                 embedding_blocks=False)
        return s, {"microbatches": micro, "fits": r.fits, "peak_memory_gib": gib(r)}
    return [(f"t{t} p{p} d{d} mb{m} batch {b}", pub, lambda r=(d, t, p, m, b): row(*r))
            for d, t, p, m, b, pub in tables.BLOOM_LAYOUTS_FP16]


def _bloom_single_node(devices, memory=False):
    """BLOOM's width on one Jean Zay node, t = 8, no pipeline, no data parallelism: seconds per iteration, or with
    ``memory`` the peak GiB per GPU."""
    _, hidden, vocab, _, _ = tables.BLOOM
    batch, heads = tables.BLOOM_SINGLE_NODE_BATCH, tables.BLOOM_SINGLE_NODE_HEADS

    def row(layers, per_micro):
        s, r, micro = iteration(f"bloom-{layers}l", heads, hidden, layers, 8, 1, jean_zay(8, deepspeed(devices)), batch,
                                tables.SEQ, per_micro, vocab=vocab)
        return (r.peak_memory / 2**30 if memory else s), {"microbatches": micro, "fits": r.fits,
                                                           "peak_memory_gib": gib(r)}
    published = tables.BLOOM_SINGLE_NODE_MEM if memory else [pub for *_, pub in tables.BLOOM_SINGLE_NODE]
    return [(f"{layers} layers t8 mb{m}, row {k + 1}", pub, lambda layers=layers, m=m: row(layers, m))
            for k, ((layers, m, _), pub) in enumerate(zip(tables.BLOOM_SINGLE_NODE, published))]


# GPT-NeoX-20B (Black et al. 2022, "GPT-NeoX-20B: An Open-Source Autoregressive Language Model", arXiv:2204.06745,
# ACL Anthology 2022.bigscience-1.9), trained with EleutherAI's gpt-neox (Megatron's layers in DeepSpeed's pipeline),
# a held-out check of the A100-DeepSpeed: in no PROTOCOL_CHOICES, so never a calibration source. Its facts are here,
# each with where it is from, since its one published figure needs them to become seconds per iteration.
# Shape (EleutherAI/gpt-neox, configs/20B.yml, "the configuration file for the GPT-NeoX-20B model as it was trained on
# 96x 40GB A100 GPUs"; the paper's Section 2: "44 layers, a hidden dimension size of 6144, and 64 heads"): layers,
# hidden, heads (sequence 2048, "seq-length" there). Vocabulary: the tokenizer's 50,257 (Section 3.2) padded, as
# gpt-neox pads it, to a multiple of 128 x the tensor-parallel size, 50,432 (the released model's embedding rows)
NEOX_SHAPE = (44, 6144, 64)
NEOX_VOCAB = 50432
# Layout (configs/20B.yml: "model-parallel-size": 2, "pipe-parallel-size": 4; Section 3: "a tensor parallel size of
# 2, and a pipeline parallel size of 4") on 96 GPUs: d = 96 / (2 x 4) = 12. "train_micro_batch_size_per_gpu": 4 and
# "gradient_accumulation_steps": 32 there: global batch 4 x 32 x 12 = 1536 sequences, 3,145,728 tokens (Section 3:
# "approximately 3.15M tokens, or 1538 contexts of 2048 tokens each": 1538, not a multiple of 12 replicas of 4, is
# 3.15M / 2048 rounded; the configuration's 1536 is taken)
NEOX_T, NEOX_P, NEOX_GPUS, NEOX_MICRO, NEOX_BATCH = 2, 4, 96, 4, 1536
# also from configs/20B.yml: "zero_optimization": {"stage": 1} (Section 3: AdamW "with the ZeRO optimizer ...
# distributing optimizer states across ranks"), "fp16" enabled (the A100's fp16 and bf16 tensor-core peaks are the
# same), "checkpoint-activations": true with "checkpoint-num-layers": 1 (every layer recomputed: full recomputation),
# "partition-activations": false, the fused softmax and bias-GELU kernels. The pipeline is cut by gpt-neox's default
# "pipe_partition_method": "type:transformer|mlp" (megatron/neox_arguments/neox_args.py, NeoXArgsParallelism), which
# balances transformer layers, 11 a stage, the embedding on the first and the head on the last: Megatron's cut, so
# no embeddings_as_blocks. The gradients are simulated all-reduced after the backward, as the group's other DeepSpeed
# pipelines are; the config's ZeRO "overlap_comm": true is not modelled (overlapped, Simulator(overlap=True), the
# row is 1% slower). Not simulated, as the graph has no such option: the parallel attention and feed-forward
# ("gpt_j_residual": one tensor-parallel all-reduce a layer instead of two, Section 2.1), rotary embeddings on a
# quarter of each head, dropout 0, and the untied input embedding ("no-weight-tying": 50,432 x 6144 more weights on
# the first stage, 155M per GPU there; the graph ties it to the head)
# The published figure (Section 3): "117 teraFLOPS per GPU". The paper does not say how it counts them; gpt-neox
# logged "approx flops per GPU" from PR #167 (2021) until PR #1044 (September 2023, after the run) by
# megatron/logging.py's get_flops: global batch x sequence x (6 x total parameters + 60 x sequence x hidden x layers)
# per iteration (total parameters: every rank's, the untied embedding and head included). Assumed: the paper's
# figure is that count, so 117 TFLOP/s is 43.84 s per iteration, which is compared. (Megatron's count with the
# recomputed forward, megatron_flops, would make it 47.66 s.) Cross-check: 150,000 iterations at 43.84 s are 1,827
# hours, against the "1,830 hours" of training a summary of the paper gives (nl2code.github.io/posts/GPT-NeoX)
NEOX_TFLOPS = 117


def neox_params(layers=NEOX_SHAPE[0], hidden=NEOX_SHAPE[1], vocab=NEOX_VOCAB) -> int:
    """GPT-NeoX-20B's parameters: per layer 12 h^2 + 13 h (weights, biases, two layer norms), the untied embedding
    and head, the final layer norm: 20,554,567,680, the released model's 20,556,201,984 (its model card,
    huggingface.co/EleutherAI/gpt-neox-20b) to within 0.01%."""
    return layers * (12 * hidden**2 + 13 * hidden) + 2 * vocab * hidden + 2 * hidden


def neox_flops(batch=NEOX_BATCH, seq=tables.SEQ, layers=NEOX_SHAPE[0], hidden=NEOX_SHAPE[1]) -> float:
    """FLOPs per iteration as gpt-neox counted them at the time of the run (megatron/logging.py, get_flops)."""
    return batch * seq * (6 * neox_params(layers, hidden) + 60 * seq * hidden * layers)


def neox_cluster(device: DeviceSpec) -> Cluster:
    """GPT-NeoX-20B's cluster (Section 2.3): twelve Supermicro AS-4124GO-NART servers of 8 A100-SXM4-40GB, each GPU
    reaching the InfiniBand fabric "through one of four ConnectX-6 HCAs" per node, two MQM8700-HS2R (HDR) switches.
    Assumed: the server's HGX A100 board has NVSwitch (the DGX A100 preset's NVLink figures), and each HCA runs at
    HDR's 200 Gb/s, the switches' rate (the paper gives none): 4 x 200 Gb/s, 100 GB/s per node, half a DGX A100's.
    The two-switch spine (16 links between them) is not modelled."""
    return a100_nodes(f"neox-a100-40gb-x{NEOX_GPUS // 8}", NEOX_GPUS, device, 100e9)


def _gpt_neox(devices):
    """GPT-NeoX-20B on 96 A100 40GB: seconds per iteration (the published TFLOP/s by gpt-neox's count of the time)."""
    layers, hidden, heads = NEOX_SHAPE
    d = NEOX_GPUS // (NEOX_T * NEOX_P)

    def row():
        s, r, micro = iteration("neox-20b", heads, hidden, layers, NEOX_T, NEOX_P,
                                neox_cluster(a100_40gb(deepspeed(devices))), NEOX_BATCH, tables.SEQ, NEOX_MICRO,
                                vocab=NEOX_VOCAB, zero=1)
        return s, {"microbatches": micro, "fits": r.fits, "peak_memory_gib": gib(r),
                   "tflops_per_gpu": round(neox_flops() / s / NEOX_GPUS / 1e12, 1)}
    published = round(neox_flops() / (NEOX_TFLOPS * 1e12 * NEOX_GPUS), 2)
    return [(f"20B t{NEOX_T} p{NEOX_P} d{d} mb{NEOX_MICRO} {NEOX_GPUS} GPUs", published, row)]


def _nccl(table):
    def busbw(nbytes):
        cluster = dgx_nodes(8, DEVICES["A100"])
        t, _ = costs.allreduce(cluster, np.arange(8)[None, :], nbytes)
        return nccl.bus_bandwidth(8, nbytes, t) / 1e9, {}
    return lambda devices: [(f"{size / 2**20:g} MiB", pub, lambda size=size: busbw(size)) for size, pub in table]

SOURCES: dict[str, tuple[str, str, str, Callable]] = {  # name -> (what, device, unit, rows(devices))
    "nccl-a100-azure": ("NCCL all-reduce on 8 A100s, Azure ND A100 v4 (the presets' collectives are fitted on it)",
                        "A100", "bus GB/s", _nccl(tables.NCCL_A100_AZURE)),
    "nccl-a100-dgx": ("NCCL all-reduce on 8 A100s, an A100-SXM4-40GB node", "A100", "bus GB/s", _nccl(tables.NCCL_A100_DGX)),
    "sc21-table1": ("Narayanan et al. SC'21 Table 1, weak scaling on A100", "A100", "TFLOP/s per GPU", _sc21),
    "sc21-table2": ("Narayanan et al. SC'21 Table 2, PTD-P at a fixed batch on A100", "A100", "TFLOP/s per GPU",
                    _sc21_table2(tables.TABLE2_PTDP)),
    "sc21-table2-zero3": ("Narayanan et al. SC'21 Table 2, ZeRO-3 without model parallelism on A100", "A100",
                          "TFLOP/s per GPU", _sc21_table2(tables.TABLE2_ZERO3, zero=3)),
    "reduce-recompute": ("Korthikanti et al. 2022, full recomputation on A100", "A100", "s per iteration",
                         _reduce_recompute),
    "reduce-recompute-sp": ("Korthikanti et al. 2022, sequence parallelism and selective recomputation on A100",
                            "A100", "s per iteration", lambda devices: _reduce_recompute(devices, selective_sp=True)),
    "reduce-recompute-memory": ("Korthikanti et al. 2022, which recomputation modes fit in 80 GB", "A100",
                                "fits (1) or not (0)", _reduce_recompute_memory),
    "megatron19-weak": ("Megatron-LM 2019, weak scaling on V100", "V100-2019", "% of 1-GPU throughput per GPU",
                        _m19_weak),
    "megatron19-ddp": ("Megatron-LM README, 8.3B on 512 V100s with each data-parallel implementation", "V100-2019",
                       "% of 1-GPU throughput per GPU", _m19_ddp),
    "megatron19-strong": ("Megatron-LM 2019, strong scaling of 1.2B on V100", "V100-2019", "speed-up over 1 GPU",
                          _m19_strong),
    "megatron19-single": ("Megatron-LM 2019, 1.2B on one V100", "V100-2019", "ms per iteration",
                          _m19_single),
    "megatron-v1": ("Megatron-LM v1.0 (fused kernels), 1.2B on one V100", "V100", "ms per iteration",
                    _megatron_v1),
    "bloom-single-node": ("BigScience BLOOM's width on one node of 8 A100s, t = 8, no pipeline", "A100-DeepSpeed",
                          "s per iteration", _bloom_single_node),
    "bloom-176b": ("BigScience BLOOM 176B, the training run on 384 A100s", "A100-DeepSpeed", "TFLOP/s per GPU",
                   _bloom(tables.BLOOM_RUN)),
    "bloom-topologies": ("BigScience BLOOM 176B, five 3D layouts benchmarked on 384 A100s", "A100-DeepSpeed",
                         "TFLOP/s per GPU", _bloom(tables.BLOOM_TOPOLOGIES)),
    "mt-nlg-530b": ("Smith et al. 2022, Megatron-Turing NLG 530B on 2,240-3,360 A100s", "A100-DeepSpeed",
                    "s per iteration", _mt_nlg),
    "mpt-fsdp-a100": ("MosaicML MPT 125M-70B, PyTorch FSDP (ZeRO-3) on 8-64 A100 80GB (llm-foundry), reported only",
                      "A100", "MFU %", mpt_fsdp("A100")),
    "mpt-fsdp-a100-40gb": ("MosaicML MPT 125M-70B, PyTorch FSDP (ZeRO-3) on 8-128 A100 40GB (llm-foundry), reported only",
                           "A100", "MFU %", mpt_fsdp("A100-40GB")),
    "mpt-fsdp-h100": ("MosaicML MPT 760M-70B, PyTorch FSDP (ZeRO-3) on 8-64 H100 80GB (llm-foundry), the H100's fit",
                      "H100", "MFU %", mpt_fsdp("H100")),
    "llama3-405b-h100": ("Meta's Llama 3 405B, t8 p16 with FSDP on 8,192 and 16,384 H100s", "H100", "TFLOP/s per GPU",
                         llama3_405b),
    "gpt-neox-20b": ("Black et al. 2022, GPT-NeoX-20B on 96 A100 40GB (gpt-neox), held out only", "A100-DeepSpeed",
                     "s per iteration", _gpt_neox),
    "bloom-memory": ("BigScience BLOOM, 20 layouts of six shapes on 384 A100s: which fit in 80 GB", "A100-DeepSpeed",
                     "fits (1) or not (0)", _bloom_memory),
    "bloom-memory-fp16": ("BigScience BLOOM's 181B shape, 24 layouts on 384 A100s (fp16): which fit in 80 GB",
                          "A100-DeepSpeed", "fits (1) or not (0)", _bloom_memory_fp16),
    "bloom-single-node-memory": ("BigScience BLOOM's width on one node of 8 A100s: peak memory (nvidia-smi's)",
                                 "A100-DeepSpeed", "GiB per GPU", lambda devices: _bloom_single_node(devices, True)),
    "bloom-bf16-optimizer": ("BigScience BLOOM, 195B on 384 A100s with its BF16 optimizer and without",
                             "A100-DeepSpeed", "iteration with / without", _bloom_bf16_optimizer),
    "bloom-layouts-fp16": ("BigScience BLOOM's 181B shape in 21 layouts on 384 A100s, before its BF16 optimizer",
                           "A100-DeepSpeed", "s per iteration", _bloom_layouts_fp16),
}
