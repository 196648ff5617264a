"""How the simulator runs a published training run: the devices and clusters the published runs ran on (the
A100, the DGX-2H's V100 under Megatron-LM v1.0 and under the 2019 code, the A100 under Megatron-DeepSpeed; DGX-2H,
DGX A100 and Jean Zay's A100 nodes, at the collective figures in ``COLLECTIVES`` once those are fitted),
Megatron's FLOP count, and one iteration of Megatron's strategy at a run's degrees (``iteration``).

Each source's rows (``published_rows.py``) and other scripts (``bench_layouts.py``) simulate a published run
through these, so a published layout runs the same everywhere.
"""

from __future__ import annotations

import copy
import dataclasses

import published_results as tables

from autotune.runners.simulator.engine import Simulator
from autotune.search_spaces.parallel.clusters import DEVICES, Cluster, DeviceSpec, get_cluster
from autotune.search_spaces.parallel.models import transformer
from autotune.search_spaces.parallel.strategy import megatron

# bus_efficiency and latency_scale for every cluster, once fitted (validate_simulator.py --fit-collectives)
COLLECTIVES: dict[str, float] = {}
# the DGX-2H's V100s (SXM3, 450 W) run at higher clocks than the V100 preset: 2.1 PFLOP/s per 16 GPUs, 130 TFLOP/s
# each (the Megatron-LM v1.0 note's "62.4 teraFLOPs, 48% of the theoretical peak" says the same)
V100_32GB = DeviceSpec("V100-32GB", 15.7e12, 130e12, 32 * 2**30, 900e9, DEVICES["V100"].gemm_efficiency,
                       sm_count=80, gemm_k_half=DEVICES["V100"].gemm_k_half)


def fresh_devices() -> dict[str, DeviceSpec]:
    """The devices calibration fits, at their presets: the A100, the V100 (its GEMM efficiency None until a
    V100 source calibrates it: the A100's share of peak), the V100 running the 2019 code (its cost per
    kernel), the A100 running Megatron-DeepSpeed (its GEMM efficiency None until one of its sources calibrates
    it: the A100's; its cost per kernel the A100's until then) and the H100 (its GEMM efficiency None until its
    source calibrates it: the A100's)."""
    return {"A100": copy.deepcopy(DEVICES["A100"]), "V100": dataclasses.replace(V100_32GB, gemm_efficiency=None),
            "V100-2019": copy.deepcopy(V100_32GB),
            "A100-DeepSpeed": dataclasses.replace(DEVICES["A100-DeepSpeed"], gemm_efficiency=None,
                                                  launch_s=DEVICES["A100"].launch_s),
            "H100": dataclasses.replace(DEVICES["H100"], gemm_efficiency=None)}


def _at_a100_share(devices: dict, name: str) -> DeviceSpec:
    """A copy of ``devices[name]``, its GEMMs at the A100's share of peak unless one of its own sources
    calibrated them (its GEMM efficiency is None until then)."""
    dev = copy.copy(devices[name])
    if dev.gemm_efficiency is None:
        dev.gemm_efficiency = devices["A100"].gemm_efficiency
    return dev


def h100(devices: dict) -> DeviceSpec:
    """The H100: its GEMMs at the A100's share of peak unless one of its own sources (MosaicML's or Meta's runs on
    H100s) calibrated them."""
    return _at_a100_share(devices, "H100")


def deepspeed(devices: dict) -> DeviceSpec:
    """The A100 as Megatron-DeepSpeed ran on it: the same hardware, its GEMMs at the A100's share of peak unless
    a Megatron-DeepSpeed source calibrated its own."""
    return _at_a100_share(devices, "A100-DeepSpeed")


def v100(devices: dict, code: str = "v1") -> DeviceSpec:
    """The DGX-2H's V100 as Megatron-LM ``code`` ("v1" or "2019") ran on it: its GEMMs at the A100's share of
    peak unless a V100 source calibrated its own, and for the 2019 code that code's fixed cost per kernel."""
    dev = _at_a100_share(devices, "V100")
    if code == "2019":
        dev.launch_s = devices["V100-2019"].launch_s
    return dev


def dgx2h(gpus: int, device: DeviceSpec) -> Cluster:
    """DGX-2H nodes: 16 V100 32GB on NVSwitch (150 GB/s per GPU), 8 x 100 Gb/s InfiniBand per node; fewer
    than 16 GPUs are part of one node."""
    per_node = min(gpus, 16)
    return Cluster(f"dgx2h-{gpus}", gpus // per_node, per_node, device, 150e9, 3e-6, 100e9, 5e-6, **COLLECTIVES)


def jean_zay(gpus: int, device: DeviceSpec) -> Cluster:
    """Jean Zay's A100 nodes as BLOOM ran on them: 8 A100 80GB on NVLink (the DGX A100 preset's figures: an
    8-GPU NVSwitch board is assumed), 4 x 100 Gb/s Omni-Path per node (50 GB/s, a quarter of a DGX A100's)."""
    return a100_nodes(f"jean-zay-a100-x{gpus // 8}", gpus, device, 50e9)


def dgx_nodes(gpus: int, device: DeviceSpec, preset: str = "dgx-a100") -> Cluster:
    """``gpus`` GPUs in nodes of 8 of the ``preset`` (``dgx-a100`` or ``dgx-h100``), ``device`` their GPU, with the
    collective figures fitted in this run (COLLECTIVES) where any were."""
    cluster = get_cluster(f"{preset}-x{gpus // 8}")
    cluster.device = device
    for k, v in COLLECTIVES.items():
        setattr(cluster, k, v)
    return cluster


def gib(result) -> float:
    """A simulated run's peak memory per GPU, GiB to 0.1."""
    return round(result.peak_memory / 2**30, 1)


def a100_40gb(device: DeviceSpec) -> DeviceSpec:
    """``device`` on the A100-SXM4-40GB: 40 GB of HBM2 at 1,555 GB/s (NVIDIA's A100 datasheet), against the
    80 GB card's 2,039 GB/s; the same tensor cores, so the same peak and GEMM efficiency."""
    return dataclasses.replace(device, memory_bytes=40 * 2**30, mem_bandwidth=1555e9)


def a100_nodes(name: str, gpus: int, device: DeviceSpec, inter_bw: float) -> Cluster:
    """Another site's nodes of 8 A100s: the DGX A100's links and NCCL figures, the site's own network per node."""
    return dataclasses.replace(dgx_nodes(gpus, device), name=name, inter_bw=inter_bw)


def megatron_flops(batch, layers, hidden, seq=tables.SEQ, vocab=tables.VOCAB):
    return 96 * batch * seq * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


def embeddings_as_blocks(graph):
    """Cut the pipeline as DeepSpeed's ``--pp-partition-method 'type:transformer|embedding'`` does: the input
    embedding and the (tied) output embedding each count as one more block, so a stage holds the same number of
    blocks, the first and the last one embedding and one layer fewer."""
    last = max(op.layer for op in graph.ops if op.layer is not None)
    seen_layer = False
    for op in graph.ops:
        if op.layer is not None:
            seen_layer = True
            op.layer += 1
        elif op.type != "input":
            op.layer = last + 2 if seen_layer else 0
    return graph


def iteration(name, heads, hidden, layers, t, p, cluster, batch, seq, per_micro=None, overlap=None, kernels="fused",
              recompute="full", sequence=False, virtual=1, vocab=tables.VOCAB, zero=0, embedding_blocks=False,
              whole_grad_bytes=0.0, dropout=True, zero_prefetch=False, zero_rank_copies=False, tp_overlap=False,
              **shape):
    """Seconds per iteration of Megatron's strategy (t, p) on ``cluster`` (t = p = 1: data parallelism);
    micro-batches of ``per_micro`` sequences per replica, or (None) the fewest micro-batches that fit;
    ``kernels``, ``recompute`` and ``dropout`` as in ``transformer``, ``sequence`` parallelism and ``virtual``
    chunks per stage as in ``megatron``, ``zero`` as in ``Simulator``, as are ``whole_grad_bytes``,
    ``zero_prefetch``, ``zero_rank_copies`` and ``tp_overlap`` (off here, unlike the ``Simulator``: most published
    runs ran code from before it); ``embedding_blocks``: the pipeline cut of
    :func:`embeddings_as_blocks`; ``shape``: the model's other keywords of ``transformer`` (a Llama's ``kv_heads``,
    ``ffn``, ``gated``, ``tied``). Returns (seconds, result, count)."""
    d = cluster.devices // (t * p)
    per_replica = batch // d
    counts = [per_replica // per_micro] if per_micro else [m for m in range(1, per_replica + 1) if per_replica % m == 0]
    for micro in counts:
        graph = transformer(f"gpt-{name}", batch // micro, layers, hidden, heads, seq, vocab, recompute=recompute,
                            kernels=kernels, dropout=dropout, **shape)
        if embedding_blocks:
            embeddings_as_blocks(graph)
        r = Simulator(graph, cluster, microbatches=micro, overlap=overlap, zero=zero,
                      whole_grad_bytes=whole_grad_bytes, zero_prefetch=zero_prefetch,
                      zero_rank_copies=zero_rank_copies, tp_overlap=tp_overlap).simulate(
            megatron(graph, cluster, t, p, virtual=virtual, sequence=sequence))
        if r.fits:
            break
    return r.iteration_s, r, micro
