"""Published results of Megatron-LM training runs and NCCL collectives that the simulator is validated
against (``validate_simulator.py``), each with its paper, table and the conditions it was measured under.

Sources (each a paper's table or figure; GPT models, vocabulary 51200, mixed precision, activation
recomputation; every row simulated with Megatron's strategy, ``strategy.megatron``, at the row's tensor
(t) and pipeline (p) degrees):

- ``sc21-table1``: Narayanan et al., SC'21 (arXiv:2104.04473), Table 1: weak scaling of 1.7B to 1T
  parameters on 32 to 3,072 A100s (DGX A100 nodes), sequence 2048; achieved TFLOP/s per GPU (Megatron's
  count 96 B s l h^2 (1 + s/6h + V/16lh), which includes the recomputed forward). Each row runs as the
  authors' script for the table ran it (Megatron-LM, examples/sc21/run_table_1.sh): its micro-batch size
  (16 sequences without a pipeline down to 1 for the largest models), interleaved chunks per stage (3, 2, 2
  and 3 for the 76B, 145B, 310B and 530B models), and the data-parallel gradients all-reduced during the
  backward by PyTorch's DDP without a pipeline, after it by Megatron's own DDP with one.
- ``sc21-table2``: the same paper's Table 2, its own layouts (PTD-P) for the 174.6B and 529.6B models at a fixed
  batch (1536 and 2240) on 384 to 1536 and 560 to 2240 A100s: t = 8 and p = 12 (the 174.6B model: 96 layers,
  hidden 12288, 96 heads) or p = 35 (529.6B: 105 layers, hidden 20480, 128 heads), micro-batches of one sequence,
  the gradients all-reduced after the backward (Megatron's DDP with a pipeline; interleaving not stated, none
  assumed); achieved TFLOP/s per GPU, as Table 1 counts them. Held out only (never calibrated on).
- ``sc21-table2-zero3``: the same table's baseline, ZeRO-3 without model parallelism (DeepSpeed's, every GPU a
  data-parallel rank holding a shard of every weight): 174.6B on 384, 768 and 1536 GPUs (micro-batches of 4, 2
  and 1, batch 1536), 529.6B on 640 (batch 2560, micro-batches of 4: it did not fit on 560), 1120 and 2240 (batch
  2240, micro-batches of 2 and 1); full recomputation; TFLOP/s per GPU. Simulated with ``zero=3`` as DeepSpeed's
  ZeRO-3 fetched weights then, each module's in its pre-forward and pre-backward hook (the compute waits for
  its gather), each gather and reduce-scatter on a list of per-rank tensors (``zero_rank_copies``). Reported
  under every calibration, never used to choose one (``REPORT_ONLY`` in ``validate_simulator.py``). The table
  as quoted by two public compilations of the paper (a reading of its Section 5.2, and a design note that
  transcribes Table 2 row by row), which agree.
- ``reduce-recompute``: Korthikanti et al. (arXiv:2205.05198), iteration times with full recomputation
  (the baseline of its end-to-end table, Table 5): 22B, 175B, 530B and 1T on 8, 64, 280 and 512 A100s
  80GB, t = 8, p = 1, 8, 35, 64, no data parallelism, sequence 2048; micro-batches of 4 sequences for 22B
  and of one for the others, the interleaved schedule with 3 chunks per stage for 175B and 530B (Table 3
  and Section 6); seconds.
- ``reduce-recompute-sp``: the same paper's end-to-end result, the same four runs with sequence
  parallelism and selective recomputation: 1.10, 13.75, 37.83 and 71.49 s.

Every row is a run that happened, so each must fit in its devices' memory: the report counts the rows
the simulator finds fitting ("fits 4/4").
- ``reduce-recompute-memory``: the same paper's memory result (Section 6.1): "without the memory
  savings provided by sequence parallelism and selective recompute together, none of these models will
  fit into memory". For each of the four runs, five modes: no recomputation, sequence parallelism alone,
  selective recomputation alone (published: does not fit, 0), both, and full recomputation (published:
  fits, 1, as the runs of Table 5 did); the simulated value is 1 where its peak memory fits in 80 GB.
  The error is 0 or 100% per row, so the MAPE is the share of rows it gets wrong.
- ``megatron19-weak``: Shoeybi et al., Megatron-LM 2019 (arXiv:1909.08053), Figure 1 and Table 1: weak
  scaling on DGX-2H nodes (16 V100 32GB each), sequence 1024, 1.2B on 1 GPU to 8.3B on 8 (tensor
  parallel, batch 8) and the same models data parallel on 64 to 512 GPUs (global batch 512): per-GPU
  throughput relative to the 1.2B model on one GPU, in percent. Each data-parallel run all-reduces its
  gradients as Megatron-LM's README says was faster for its model (``TORCH_DDP_2019``): after the backward
  (its own DDP, ``Simulator(overlap=False)``) for 1.2B and 2.5B, during it (PyTorch's DDP) for 4.2B and 8.3B.
- ``megatron19-ddp``: Megatron-LM's README (github.com/NVIDIA/Megatron-LM, "Distributed Pretraining"): the
  8.3B model on 512 GPUs (t = 8, 64 replicas) scales at 60% with Megatron's own data parallelism (the
  all-reduce after the backward) and at 76% with PyTorch's (overlapped), in the paper's unit.
- ``megatron19-strong``: the same paper's strong scaling of the 1.2B model (batch 8) over 2, 4 and 8
  GPUs of one DGX-2H: speed-up over one GPU.
- ``megatron19-single``: the same paper's single-GPU baseline, the 1.2B model on one V100 (batch 8):
  39 TFLOP/s. The v1.0 release note (below) calls its 62.4 TFLOP/s at 1,288 ms per iteration "a 60%
  improvement over our previously 39 teraFLOPs" for the same model, so both count the same FLOPs per
  iteration: the 2019 row is compared in milliseconds, 1,288 x 62.4 / 39 = 2,061 ms (Megatron's later
  FLOP formula, which counts 7% more for this model, would make a TFLOP/s comparison 7% off by itself).
  The 2019 code ran the attention's and the dropouts' elementwise work as separate PyTorch ops
  (``transformer(kernels="eager")``) for every Megatron-LM 2019 source, with a fixed cost per kernel of
  its own (``V100-2019``: the same V100, the same GEMMs).
- ``megatron-v1``: NVIDIA ADLR's Megatron-LM v1.0 release note (nv-adlr.github.io/MegatronLMV1), the same
  hardware with fused kernels, batch 8: the 1.2B model on one GPU (1,288 ms per iteration, 62.4 TFLOP/s).

Other teams' runs of Megatron's layers inside DeepSpeed (DeepSpeed's pipeline, Megatron's tensor slicing,
activation recomputation), added after the presets were fixed. They are simulated on a device of their own,
``A100-DeepSpeed`` in ``published_runs.py`` (the same A100 with its own GEMM efficiency and cost per kernel), which is calibrated
on one of these sources and never on a Megatron-LM one: they move no figure of the A100 or the V100s.

- ``mt-nlg-530b``: Smith et al. 2022, Megatron-Turing NLG 530B (arXiv:2201.11990) on Selene (DGX A100 nodes
  of 8 A100 80GB, HDR InfiniBand), bf16: 105 layers, hidden 20480, 128 heads, sequence 2048, global batch
  1920, "8-way tensor-slicing within a node and 35-way pipeline parallelism across nodes" (Section 2.2),
  vocabulary GPT-2's (51,200 padded); Section 2.4's end-to-end throughput on 280, 350 and 420 nodes (8, 10 and
  12 replicas): 60.1, 50.2 and 44.4 s per iteration ("126, 121 and 113 teraFLOP/s per GPU", which Megatron's
  count gives to within 0.6: 125.7, 120.4, 113.5), seconds compared. The figures as Section 2.4 gives them,
  quoted in cli99/llm-analysis (examples/megatron-turing-nlg/README.md) and in a second public compilation
  that cites the paper's page and section; PaLM's "65.43K tokens/sec" for the 280-node run is 1920 x 2048 /
  60.1 s. DeepSpeed's pipeline runs 1F1B without interleaving and all-reduces the gradients after the
  backward. The paper gives no micro-batch size: one sequence is assumed (``MT_NLG_MICRO``), the size
  Megatron-LM ran this model and layout with (SC'21 Table 1's 530B row, Korthikanti et al.'s 530B run).
- ``bloom-176b``: BigScience's BLOOM 176B run (arXiv:2211.05100; its training README, github.com/
  bigscience-workshop/bigscience, train/tr11-176B-ml/README.md): 70 layers, hidden 14336, 112 heads, sequence
  2048, vocabulary 250,680 padded to 250,880, global batch 2048 on 48 nodes of 8 A100 80GB (Jean Zay: NVLink
  inside a node, 4 x 100 Gb/s Omni-Path per node), t = 4, p = 12, d = 8, micro-batches of 2, bf16, full
  recomputation (DeepSpeed's activation checkpointing), ZeRO stage 1 (the BF16 optimizer's own sharding of
  the optimizer state), DeepSpeed's pipeline with each of the two tied embeddings given a pipeline slot like a
  transformer block (``--pp-partition-method 'type:transformer|embedding'``: [embed | 5 blocks], 10 x [6
  blocks], [5 blocks | embed]), every kernel launch synchronous (``CUDA_LAUNCH_BLOCKING=1`` in its
  tr11-176B-ml.slurm: "do not remove or the training will hang"). Its log line at iteration 85,376 (the end of the first epoch): 104.70 s per
  iteration, "TFLOPs: 149.77". TFLOP/s per GPU as Megatron-DeepSpeed logs them, 96 B s l h^2 (1 + s/6h +
  V/16lh) with V = 250,880 (149.77 from 104.70 s), which counts the recomputed forward.
- ``bloom-topologies``: the same model shape's topology benchmark on the 48 nodes before the run, with the
  run's software (the BF16 optimizer, the embeddings as pipeline blocks; train/tr11-176B-ml/
  chronicles-prequel.md, "Rebalancing layers", the table for NHIDDEN=14336; NLAYERS=70, 2022-02-28): global
  batch 2048, five layouts (t, p, d, micro-batch, heads), TFLOP/s per GPU counted as above (each row's seconds
  per iteration give its TFLOP/s), one early iteration's snapshot each, as those notes take them. Its "Mem"
  column (40-73 GB) says every layout fit.
- ``bloom-memory``: every table of the same section ("Rebalancing layers", 2022-02-28, the run's software) on the
  48 nodes: 20 layouts of six model shapes (hidden 12288-14336, 70-106 layers, 64-128 heads; t, p, d,
  micro-batch), 17 with their "Mem" (the first or last node's peak, nvidia-smi's, 40-79 GB: they fit) and 3 that
  ran out of memory ("OOM"); fits (1) or not (0) compared, the simulated peak beside the published one (GiB, as
  ``bloom-single-node-memory``). Its error depends on no calibrated time figure, so it is reported and never
  chooses one (``REPORT_ONLY``); the allocator slack is fitted on the single-node check, not on it.
- ``bloom-bf16-optimizer``: what the BF16 optimizer cost, from the same notes: the 195B shape (hidden 12288, 106
  layers, the embeddings as pipeline blocks) at t4 p12 d8, micro-batches of 2, global batch 2048, 64 and 96
  heads, timed the day before with gradients accumulated in fp16 (2022-02-27, "Re-do": 110.96 and 112.69 s per
  iteration) and with the BF16 optimizer (2022-02-28, "Rebalancing layers", whose preamble says from then on
  "testing is happening with BF16 optimizer that was just written to accumulate gradients in fp32, so it is
  more memory heavy and is a bit slower": 116.54 and 118.79 s). The ratio of the two iterations is compared,
  which no calibrated figure moves much, so it is reported and never chooses one (``REPORT_ONLY``).
- ``bloom-single-node``: the same notes' "Max possible TFLOPs check for NHIDDEN=14336" (chronicles-prequel.md,
  2022-02-21, "Choosing the fastest 3D Topology"): the model's width on one node, t = 8, p = 1, no data
  parallelism, batch 512 ("GBS=512" above the table, whose GBS column says 2048: the TFLOPs column is 512's),
  6 layers with micro-batches of 2 twice (130.43 and 119.19 s per iteration, the same settings) and 10 layers
  with micro-batches of 1 (205.52 s); 64 heads ("all NHEADS=64 (above too)", the next section of the notes).
  No pipeline and no network: the per-GPU speed of the stack on its own. Seconds per iteration compared.
- ``bloom-single-node-memory``: the same table's "Mem" column: 54, 54 and 80 GB per GPU, nvidia-smi's (the last
  the whole card: it ran at the limit). GiB are compared (nvidia-smi's MiB over 1024: the whole 81,920 MiB card
  reads 80). What a process holds beyond its tensors is fitted on it (the A100-DeepSpeed's allocator slack, its
  CUDA context the notes' own 1,573 MiB, ``A100_CONTEXT_MIB``), so its rows are in-sample; the other memory
  sources are held out.
- ``bloom-memory-fp16``: the 2022-02-25 layouts of ``bloom-layouts-fp16`` (the fp16 software), which ran (fits, 1;
  17 with their "Mem", 38-76 GB, beside), and the three that ran out of memory (t8 p1 d48, t2 p6 d32 with
  micro-batches of 1 and 2; 0): fits or not compared, as ``bloom-memory`` (``REPORT_ONLY``).
- ``bloom-layouts-fp16``: the same notes' 181B shape (hidden 14336, 72 layers, 64 heads) on the 48 nodes in
  every (t, p, d) layout, micro-batch and global batch the team timed on 2022-02-25 ("GBS Variations", "some
  more configs with lower PP", "Tweaking TP"; that day's PCI-Express/NUMA fix applies to all): t 2-8, p 2-24,
  d 4-24, micro-batches of 1-6, global batch 1568-2048; 21 rows, seconds per iteration (one early iteration
  each). The software before the BF16 optimizer (gradients accumulated in fp16, ZeRO stage 1 sharding the
  fp32 state) and before the embeddings got pipeline slots of their own (each Megatron-DeepSpeed stage holds
  its share of the transformer blocks, the first the embedding, the last the tied output layer). Three more
  layouts ran out of memory (t8 p1 d48, t2 p6 d32 with micro-batches of 1 and 2); they are not timed here.

Another stack on the same A100 (the A100's figures, no figure of its own):

- ``mpt-fsdp-a100``: MosaicML's MPT training benchmarks (github.com/mosaicml/llm-foundry,
  scripts/train/benchmarking/README.md, the table "A100 80GB with 1600 Gbps node-node interconnect (RoCE)"):
  MPT models of 125M to 70B parameters (GPT-style: 4h GELU feed-forward blocks, no biases, tied embeddings,
  vocabulary 50368, no dropout, FlashAttention), sequences of 512 to 65536, on 8 GPUs (one node) and 32 or 64
  (the 70B), PyTorch FSDP's full sharding (ZeRO-3) over every GPU, each row's micro-batch size, gradient
  accumulation and activation checkpointing (every block recomputed, or none); MFU (%) by the benchmark's own
  count, 6 N + 12 l h s FLOPs per token with N its published parameter count, over the A100's 312 TFLOP/s.
  Simulated as data parallelism with ``zero=3`` and each gather prefetched one weighted op ahead (FSDP issues
  the next unit's gather before the current one computes), ``transformer(kernels="flash", dropout=False)``.
  Not modelled: the rows but the 70B's ran Composer's DEFAULT mixed precision, which reduces gradients in fp32
  (the simulator reduce-scatters 2 bytes per parameter); the 70B's PURE bf16 does not.
  Reported under every calibration, never used to choose one (``REPORT_ONLY``): no figure is fitted on it, and
  its runs without recomputation, fast here by more than any GEMM efficiency moves, would choose the efficiency.

- ``mpt-fsdp-a100-40gb``: the same benchmarks' table "A100 40GB with 1600 Gbps node-node interconnect (RoCE)" (78
  rows: 125M to 70B, sequences of 512 to 32768, 8 to 128 GPUs, every run with Composer's PURE bf16), simulated as
  ``mpt-fsdp-a100`` is on the 40 GB card (``published_runs.a100_40gb``). Added after every figure was fitted, held
  out, reported and never choosing (``REPORT_ONLY``), as ``mpt-fsdp-a100`` is.
- ``mpt-fsdp-h100``: the same benchmarks' table "H100 80GB BF16" (52 rows: 760M to 70B, sequences of 512 to
  65536, 8 to 64 GPUs): simulated as ``mpt-fsdp-a100`` is, on the ``dgx-h100-xN`` preset's nodes (the table names
  no network), MFU over the H100's 989 TFLOP/s. The H100's GEMM efficiency is fitted on it (the protocol's choice
  of the two H100 sources, in the bare flag), and ``llama3-405b-h100`` is held out.

- ``llama3-405b-h100``: Meta's Llama 3 405B pre-training (Dubey et al. 2024, "The Llama 3 Herd of Models",
  arXiv:2407.21783, Table 4 and Section 3.3.2), on H100 80GB (700 W) in servers of 8 on NVLink, 400 Gb/s RoCE per
  GPU (the ``dgx-h100-xN`` preset's 8 x 400 Gb/s): t8 p16 over 8,192 and 16,384 GPUs (d 64 and 128), sequences of
  8,192, 32 and 16 sequences per data-parallel group (16M tokens a batch), 430 and 400 TFLOP/s per GPU (BF16 MFU
  43% and 41%). As Section 3.3.2 gives it: an interleaved pipeline whose first chunk holds the embedding alone and
  whose last the output and loss alone (a layer fewer on the first and last stages: one block a chunk, 8 chunks a
  stage), no activation recomputation at 8K sequences, FSDP sharding the gradients and optimizer state (ZeRO stage
  2 here; its parameters are not resharded after the forward). Assumed: sequence parallelism with the tensor
  parallelism (the paper cites Korthikanti et al. for it), each tensor-parallel reduction beside its weight gradient,
  micro-batches of one sequence. TFLOP/s by PaLM's count, 6 N + 12 l h s per token (the paper's MFU cites PaLM's),
  N = 405e9. The third row (context parallelism 16, sequences of 131,072) is not simulated: the simulator has no
  context parallelism. The protocol may calibrate the H100 on either H100 source; it chooses ``mpt-fsdp-h100``.

Collectives (every cluster's ``bus_efficiency`` and ``latency_scale``, ``runners/simulator/nccl.py``), NCCL
all-reduce bus bandwidth over 8 A100s on NVSwitch by message size (nccl-tests ``all_reduce_perf``, 1 MB to 4 GB):

- ``nccl-a100-azure``: Microsoft's Azure AI benchmarking guide, ND A100 v4 (8 A100 80GB), NCCL 2.18.5
  (github.com/Azure/AI-benchmarking-guide, Azure_Results/ND_A100_v4_results.md; in-place bus bandwidth). The
  presets' two collective figures are fitted on it (``--fit-collectives nccl-a100-azure`` refits them).
- ``nccl-a100-dgx``: an 8-GPU A100-SXM4-40GB node (DGX A100 class: NVSwitch) run kept as a fixture of
  Hetu-Galvatron's hardware profiler (github.com/AFDWang/Hetu-Galvatron, tests/profiler/test_hardware_profile.py;
  one nccl-tests process driving the 8 GPUs, 5 warm-up and 20 timed iterations, NCCL version not printed;
  out-of-place bus bandwidth).

"""

from __future__ import annotations

# (params B, heads, hidden, layers, t, p, GPUs, batch, published TFLOP/s per GPU, sequences per micro-batch,
#  interleaved chunks per stage, gradients all-reduced during the backward) - Table 1 of arXiv:2104.04473, with
# the micro-batch size, interleaving and data-parallel wrapper of the authors' script for it (Megatron-LM,
# examples/sc21/run_table_1.sh: PyTorch's DDP, which overlaps, without a pipeline; Megatron's own DDP, which
# all-reduces after the backward, with one)
TABLE1 = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 16, 1, True),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 16, 1, True),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 16, 1, True),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 8, 1, True),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 4, 1, False),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 2, 3, False),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 2, 2, False),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 1, 2, False),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 1, 3, False),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 1, 1, False),
]
# Table 2 of arXiv:2104.04473: (name, heads, hidden, layers, t, p, GPUs, batch, sequences per micro-batch, published
# TFLOP/s per GPU); PTD-P's rows, then ZeRO-3's (t = p = 1)
TABLE2_MODELS = {"175b": (96, 12288, 96), "530b": (128, 20480, 105)}
TABLE2_PTDP = [("175b", 8, 12, 384, 1536, 1, 153), ("175b", 8, 12, 768, 1536, 1, 149), ("175b", 8, 12, 1536, 1536, 1, 141),
               ("530b", 8, 35, 560, 2240, 1, 171), ("530b", 8, 35, 1120, 2240, 1, 167), ("530b", 8, 35, 2240, 2240, 1, 159)]
TABLE2_ZERO3 = [("175b", 1, 1, 384, 1536, 4, 144), ("175b", 1, 1, 768, 1536, 2, 88), ("175b", 1, 1, 1536, 1536, 1, 44),
                ("530b", 1, 1, 640, 2560, 4, 138), ("530b", 1, 1, 1120, 2240, 2, 98), ("530b", 1, 1, 2240, 2240, 1, 48)]
# (name, heads, hidden, layers, t, p, GPUs, batch, published seconds per iteration with full recomputation,
#  sequences per micro-batch, interleaved chunks per stage) - Tables 3 and 5 of arXiv:2205.05198
REDUCE_RECOMPUTE = [
    ("22b", 64, 6144, 48, 8, 1, 8, 4, 1.42, 4, 1),
    ("175b", 96, 12288, 96, 8, 8, 64, 64, 18.13, 1, 3),
    ("530b", 128, 20480, 105, 8, 35, 280, 280, 49.05, 1, 3),
    ("1t", 160, 25600, 128, 8, 64, 512, 512, 94.42, 1, 1),
]
# (recomputation, sequence parallelism, published: fits) - Section 6.1 of arXiv:2205.05198
REDUCE_RECOMPUTE_MEMORY = [("none", False, 0), ("none", True, 0), ("selective", False, 0), ("selective", True, 1),
                           ("full", False, 1)]
# the same four runs with sequence parallelism and selective recomputation (the paper's end-to-end result)
REDUCE_RECOMPUTE_SP = [1.10, 13.75, 37.83, 71.49]
# (params B, heads, hidden, layers, tensor-parallel GPUs) - Megatron-LM 2019, Table 1
MEGATRON19 = [(1.2, 16, 1536, 40, 1), (2.5, 20, 1920, 54, 2), (4.2, 24, 2304, 64, 4), (8.3, 32, 3072, 72, 8)]
MEGATRON19_WEAK_MP = [100, 95, 82, 77]  # % of the 1-GPU throughput per GPU, tensor parallel on 1, 2, 4, 8 GPUs
MEGATRON19_WEAK_DP = [96, 83, 79, 74]  # the same models x 64 data-parallel replicas: 64, 128, 256, 512 GPUs
MEGATRON19_STRONG = [(2, 1.64), (4, 2.34), (8, 2.98)]  # 1.2B, batch 8: speed-up over one GPU
# the 1.2B model on one GPU, ms per iteration: v1.0's 1,288 ms at 62.4 TFLOP/s, the 2019 code at 39
MEGATRON19_SINGLE_MS = 1288 * 62.4 / 39.0
# Megatron-LM's two data-parallel implementations (its README): its own, which all-reduces the gradients after
# the backward (``--DDP-impl local``), and PyTorch's DDP, which overlaps the all-reduce with the backward
# (``torch``): "for the 8.3 billion parameters model running on 512 GPUs, the scaling increases from 60% to 76%
# when Torch's distributed data parallel is used. However, the overlapping method requires more memory and for
# some configurations (e.g., 2.5 billion parameters using 2-way model parallel and 1.2 billion parameters with no
# model parallel) can make the overall training slower": so the weak-scaling runs of those two models all-reduce
# after the backward, those of the 4.2B and 8.3B models during it
TORCH_DDP_2019 = [False, False, True, True]  # per model of MEGATRON19
MEGATRON19_DDP = [(False, 60), (True, 76)]  # 8.3B, t = 8, x 64 (512 GPUs): (overlapped, % of the 1-GPU rate)
KERNELS_2019 = "eager"  # and ran the attention's and dropouts' elementwise work as separate PyTorch ops
# Megatron-LM v1.0 (fused kernels), batch 8, sequence 1024, on one DGX-2H: (model index in MEGATRON19,
# published milliseconds per iteration). The release note's larger models (2.0B, 4.2B, 8.7B on 2, 4, 8 GPUs)
# do not give their shapes, and their reported scaling does not match the 2019 paper's shapes, so they are
# left out.
MEGATRON_V1 = [(0, 1288)]
# (message bytes, published all-reduce bus bandwidth GB/s) on 8 A100s of one node
NCCL_A100_AZURE = [(2**20, 36.22), (2**21, 53.54), (2**22, 71.43), (2**23, 89.99), (2**24, 109.22), (2**25, 132.77),
                   (2**26, 166.63), (2**27, 174.18), (2**28, 213.87), (2**29, 221.58), (2**30, 228.10),
                   (2**31, 230.22), (2**32, 230.48)]
NCCL_A100_DGX = [(2**20, 23.29), (2**21, 33.73), (2**22, 55.97), (2**23, 80.04), (2**24, 99.99), (2**25, 141.27),
                 (2**26, 178.69), (2**27, 186.91), (2**28, 200.85), (2**29, 202.00), (2**30, 230.84)]
# Megatron-Turing NLG 530B (arXiv:2201.11990, Sections 2.2 and 2.4): (layers, hidden, heads, t, p, global batch)
MT_NLG = (105, 20480, 128, 8, 35, 1920)
# (DGX A100 nodes, published seconds per iteration, the paper's TFLOP/s per GPU)
MT_NLG_RUNS = [(280, 60.1, 126), (350, 50.2, 121), (420, 44.4, 113)]
MT_NLG_MICRO = 1  # sequences per micro-batch: not published; Megatron-LM's size for this model and layout
# BLOOM 176B (bigscience train/tr11-176B-ml): (layers, hidden, padded vocabulary, global batch, GPUs)
BLOOM = (70, 14336, 250880, 2048, 384)
# (t, p, sequences per micro-batch, heads, published TFLOP/s per GPU): the run (README, iteration 85,376, 104.70 s)
BLOOM_RUN = [(4, 12, 2, 112, 149.77)]
# the same shape's topology benchmark of 2022-02-28 (chronicles-prequel.md, "Rebalancing layers"), d = 384 / (t p)
BLOOM_TOPOLOGIES = [(8, 12, 2, 64, 128.92), (4, 12, 2, 64, 153.68), (4, 12, 2, 112, 150.05), (4, 12, 2, 128, 148.08),
                    (4, 12, 4, 64, 153.33)]
# the same section's memory (chronicles-prequel.md, 2022-02-28): (hidden, layers, heads, t, p, sequences per micro-batch,
# published peak GB per GPU, None where it ran out of memory); d = 384 / (t p), global batch 2048
BLOOM_MEMORY = [
    (12288, 100, 64, 4, 6, 2, None), (12288, 100, 64, 4, 6, 1, None), (12288, 100, 64, 8, 6, 2, 61),
    (12288, 100, 64, 8, 6, 4, 72), (12288, 106, 64, 4, 12, 2, 67), (12288, 106, 96, 4, 12, 2, 65),
    (12288, 106, 128, 4, 12, 2, 67), (12288, 106, 96, 4, 12, 4, 79), (13312, 82, 64, 8, 12, 4, 52),
    (13312, 82, 64, 4, 12, 2, 63), (13312, 82, 104, 4, 12, 2, 62), (13312, 82, 128, 4, 12, 2, 60),
    (13312, 82, 64, 4, 12, 4, 74), (13312, 94, 128, 4, 12, 2, 67), (14336, 70, 64, 8, 12, 2, 40),
    (14336, 70, 64, 4, 12, 2, 59), (14336, 70, 112, 4, 12, 2, 59), (14336, 70, 128, 4, 12, 2, 60),
    (14336, 70, 64, 4, 12, 4, 73), (14336, 82, 128, 4, 12, 2, None)]
# the 195B shape (hidden 12288, 106 layers) at t4 p12 d8, micro-batches of 2: (heads, seconds per iteration with the
# gradients accumulated in fp16 (2022-02-27), with the BF16 optimizer's fp32 accumulation (2022-02-28))
BLOOM_BF16_OPTIMIZER = [(64, 110.96, 116.54), (96, 112.69, 118.79)]
# the 181B shape (hidden 14336, 72 layers, 64 heads) on 384 A100s, 2022-02-25: (d, t, p, sequences per micro-batch,
# global batch, published seconds per iteration)
BLOOM_LAYOUTS_FP16 = [
    (8, 8, 6, 4, 1568, 113.01), (8, 8, 6, 4, 2048, 114.11), (8, 8, 6, 6, 2016, 123.57), (4, 8, 12, 4, 1568, 92.75),
    (4, 8, 12, 4, 2048, 117.07), (4, 8, 12, 2, 1568, 99.93), (4, 8, 12, 2, 2048, 128.82), (6, 8, 8, 4, 2016, 113.16),
    (12, 8, 4, 2, 2016, 125.52), (12, 8, 4, 4, 2016, 114.81), (24, 8, 2, 1, 2016, 145.45), (24, 8, 2, 2, 2016, 136.13),
    (8, 4, 12, 4, 2048, 111.89), (8, 4, 12, 2, 2048, 110.48), (8, 4, 12, 2, 2048, 113.54), (16, 4, 6, 4, 2048, 117.11),
    (16, 4, 6, 2, 2048, 111.71), (16, 2, 12, 2, 2048, 112.50), (8, 2, 24, 1, 2048, 119.53), (8, 2, 24, 2, 2048, 122.75),
    (4, 4, 24, 1, 2048, 130.60)]
# BLOOM's "Max possible TFLOPs check" (chronicles-prequel.md, 2022-02-21): its width on one node, t = 8, p = 1, batch
# 512, 64 heads: (layers, sequences per micro-batch, published seconds per iteration)
BLOOM_SINGLE_NODE = [(6, 2, 130.43), (6, 2, 119.19), (10, 1, 205.52)]
BLOOM_SINGLE_NODE_TFLOPS = [143.48, 157.02, 142.59]  # the notes' TFLOPs column for the same rows
BLOOM_SINGLE_NODE_BATCH, BLOOM_SINGLE_NODE_HEADS = 512, 64
BLOOM_SINGLE_NODE_MEM = [54, 54, 80]  # the same rows' "Mem" (GB as the notes write nvidia-smi's MiB / 1024)
# "40GB A100 takes 1573MiB for cuda kernels (probably about the same for 80GB?)": the same notes, "Possible topologies"
A100_CONTEXT_MIB = 1573
# the "Mem" of BLOOM_LAYOUTS_FP16's rows, in order (None: not noted), and the layouts of that day that ran out of
# memory: (d, t, p, sequences per micro-batch, global batch)
BLOOM_LAYOUTS_FP16_MEM = [56, 55, 66, None, 49, None, None, 52, 53, 59, 65, 76, 60, 44, 38, 75, 57, 63, 44, 53, None]
BLOOM_LAYOUTS_FP16_OOM = [(48, 8, 1, 1, 2016), (32, 2, 6, 2, 2048), (32, 2, 6, 1, 2048)]
SEQ, VOCAB = 2048, 51200
# Meta's Llama 3 405B pre-training (Table 4): GPUs, TP, CP, PP, DP, sequence, sequences per data-parallel group,
# TFLOP/s per GPU, BF16 MFU (%), as arXiv v3 prints it (v1 printed the long-context row's DP as 4, which gives 8,192
# GPUs and 8M tokens, not its 16,384 and 16M); the model's parameters by its name
LLAMA3_405B = [(8192, 8, 1, 16, 64, 8192, 32, 430, 43), (16384, 8, 1, 16, 128, 8192, 16, 400, 41),
               (16384, 8, 16, 16, 8, 131072, 16, 380, 38)]
LLAMA3_PARAMS = 405e9
