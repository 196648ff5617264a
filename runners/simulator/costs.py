"""Cost pieces of the simulator: per-op task times, collectives and tensor transfers.

Every function returns (duration seconds, resource ids). Resources: compute queue of
device d is ``d``, its link port ``D + d``, the network port of node n ``2D + n``.
"""

from __future__ import annotations

import math

import numpy as np

from autotune.runners.simulator import nccl
from autotune.search_spaces.parallel.clusters import Cluster
from autotune.search_spaces.parallel.graph import Op
from autotune.search_spaces.parallel.strategy import OpConfig

COMPUTE_BOUND = {"linear", "conv2d", "attention", "lstm", "matmul", "moe"}
UNFUSED = {"attention"}  # scores GEMM, softmax (memory-bound), context GEMM
EMPTY = np.zeros(0, dtype=np.int64)


def part_index(op: Op, cfg: OpConfig) -> dict[str, np.ndarray]:
    """For each partitioned dim, the index of every partition along it (partitions row-major)."""
    grid = np.indices(cfg.degrees).reshape(len(cfg.degrees), -1) if cfg.degrees else np.zeros((0, 1), int)
    return {d: grid[j] for j, d in enumerate(op.parallel_dims)}


def degree(op: Op, cfg: OpConfig) -> dict[str, int]:
    return dict(zip(op.parallel_dims, cfg.degrees))


def held(op: Op, cfg: OpConfig) -> tuple[dict[str, int], list[str], float, float, list[str], int]:
    """What one partition of ``op`` holds under ``cfg``: the degree of every dim, the split dims, its output's
    elements (an expert partition: its routed tokens' outputs), its weight shard's elements, the split dims its
    weight does not span, and how many devices hold the same shard (the gradient's sync group, ZeRO's shard group)."""
    deg = degree(op, cfg)
    split = [d for d in op.parallel_dims if deg[d] > 1]
    out_part = op.out_elems / math.prod(deg.get(d, 1) for d in op.out)
    if op.routed and deg.get(op.routed, 1) > 1:
        out_part *= min(1.0, op.route_share / deg[op.routed])
    w_shard = op.weight_elems / math.prod(deg.get(d, 1) for d in op.weight) if op.weight_elems else 0.0
    wrep = [d for d in split if d not in op.weight]
    return deg, split, out_part, w_shard, wrep, math.prod(deg[d] for d in wrep)


def partition(op: Op, cfg: OpConfig) -> dict[str, int]:
    """The size of every dim of one partition of ``op``."""
    deg = degree(op, cfg)
    return {d: n // deg.get(d, 1) for d, n in op.dims.items()}


TILE = 128  # output tile edge of a typical tensor-core GEMM kernel


def gemm_efficiency(m: float, n: float, k: float, batch: float, dev) -> float:
    """Share of the device's large-GEMM rate an [m, k] x [k, n] GEMM (``batch`` of them) reaches.

    Two effects of small shapes (NVIDIA's GEMM performance guide): wave quantization (output tiles
    fill the multiprocessors in whole waves) and the fixed prologue/epilogue per tile, which a
    short reduction does not amortise (``k / (k + gemm_k_half)``). A device with neither
    figure set runs every GEMM at ``gemm_efficiency``.
    """
    eff = 1.0
    if dev.sm_count:
        tiles = batch * math.ceil(m / TILE) * math.ceil(n / TILE)
        eff *= tiles / (math.ceil(tiles / dev.sm_count) * dev.sm_count)
    if dev.gemm_k_half:
        eff *= k / (k + dev.gemm_k_half)
    return eff


def shape_efficiency(op: Op, part: dict[str, int], parts: int, dev) -> float:
    """:func:`gemm_efficiency` of one partition of a compute-bound op, from its per-partition dims."""
    if not (dev.sm_count or dev.gemm_k_half) or not op.flops:
        return 1.0
    if op.type == "attention":  # per (sample, head): scores [s, d] x [d, s], then context [s, s] x [s, d]
        s, batch = op.dims["s"], part["b"] * part["n"]
        d = op.flops / (4.0 * op.dims["b"] * s * s * op.dims["n"])
        return (gemm_efficiency(s, s, d, batch, dev) + gemm_efficiency(s, d, s, batch, dev)) / 2
    if op.routed:  # each expert: [tokens routed to it, h] x [h, ffn], then [tokens, ffn] x [ffn, h]
        h, experts = op.dims["h"], op.dims[op.routed]
        ffn = (op.weight_elems / experts - h) / (2 * h)
        tokens = math.prod(part[d] for d in op.out if d != "h") * op.route_share / experts
        return (gemm_efficiency(tokens, ffn, h, part[op.routed], dev)
                + gemm_efficiency(tokens, h, ffn, part[op.routed], dev)) / 2
    if op.type == "lstm":  # one step: [b, i + h] x [i + h, 4h], steps in sequence
        return gemm_efficiency(part["b"], 4 * part["o"], part["i"] + part["o"], 1, dev)
    # a gated projection (SwiGLU) holds ``gates`` weights of its shape side by side: one GEMM that many times wider
    gates = op.weight_elems / math.prod(op.dims[d] for d in op.weight) if op.type == "linear" and op.weight else 1.0
    n = math.prod(part[d] for d, r in op.roles.items() if r == "parameter") * max(gates, 1.0)
    m = math.prod(part[d] for d, r in op.roles.items() if r in ("sample", "attribute") or (r is None and d in op.out))
    k = op.flops / parts / (2.0 * m * n)
    return gemm_efficiency(m, n, k, 1, dev)


def _rate(op: Op, part: dict[str, int], parts: int, cluster: Cluster, dtype_bytes: int) -> float:
    """FLOP/s of one partition of ``op``: the device's large-GEMM rate, times its shape's efficiency if it is
    compute-bound."""
    rate = cluster.peak(dtype_bytes) * cluster.device.gemm_efficiency
    return rate * shape_efficiency(op, part, parts, cluster.device) if op.type in COMPUTE_BOUND else rate


def weight_grad_time(op: Op, cfg: OpConfig, cluster: Cluster, dtype_bytes: int) -> float:
    """Time of a weighted compute-bound op's weight-gradient GEMM on one partition: half of its backward's FLOPs
    (the other half computes the input gradient), or half its measured backward. 0 for other ops."""
    if not op.weight_elems or op.type not in COMPUTE_BOUND or not op.bwd_flops:
        return 0.0
    part = partition(op, cfg)
    if cluster.op_key(op.type, part) in cluster.op_times:
        return compute_times(op, cfg, cluster, dtype_bytes, False)[1] / 2
    return op.bwd_flops / 2 / cfg.parts / _rate(op, part, cfg.parts, cluster, dtype_bytes)


def compute_times(op: Op, cfg: OpConfig, cluster: Cluster, dtype_bytes: int, recompute: bool) -> tuple[float, float]:
    """Forward and backward time of one partition (all partitions are equal)."""
    if op.type == "input":
        return 0.0, 0.0
    dev, p = cluster.device, cfg.parts
    part = partition(op, cfg)
    key = cluster.op_key(op.type, part)
    if key in cluster.op_times:
        f = cluster.op_times[key]
        b = cluster.op_times.get(key + "#bwd", f * (op.bwd_flops / op.flops if op.flops else 1.0))
    else:
        rate = _rate(op, part, p, cluster, dtype_bytes)
        mem = op.mem_elems * dtype_bytes / p / dev.mem_bandwidth
        post = op.post_elems * dtype_bytes / p / dev.mem_bandwidth
        cf = op.flops / p / rate if op.type in COMPUTE_BOUND else 0.0
        cb = op.bwd_flops / p / rate if op.type in COMPUTE_BOUND else 0.0
        if op.type in UNFUSED:  # separate GEMM and softmax kernels: their times add up
            f, b = cf + mem, cb + 2 * mem
        else:
            f, b = max(cf, mem), max(cb, 2 * mem)
        # separate elementwise kernels (bias-GELU, dropout, copies) stream their tensors after the main kernel
        f += post + op.kernels * dev.launch_s
        b += 2 * post + 2 * op.kernels * dev.launch_s
    if recompute:
        b += f
    return f, b


def groups(op: Op, cfg: OpConfig, varying: list[str]) -> np.ndarray:
    """Partition ids grouped so that each row differs only along the ``varying`` dims."""
    if not cfg.degrees:
        return np.zeros((1, 1), dtype=np.int64)
    ids = np.arange(cfg.parts).reshape(cfg.degrees)
    axes = [op.parallel_dims.index(d) for d in varying]
    rest = [a for a in range(len(cfg.degrees)) if a not in axes]
    g = math.prod(cfg.degrees[a] for a in axes)
    return ids.transpose(rest + axes).reshape(-1, g)


GRADIENT_BUCKET = 25 * 2**20  # bytes: PyTorch DDP's default bucket (Megatron-LM also reduces flat buffers)


def allreduce(cluster: Cluster, device_groups: np.ndarray, nbytes: float, bucket: float = 0.0) -> tuple[float, np.ndarray]:
    """Concurrent all-reduces, one per row of ``device_groups``, as NCCL runs them (:mod:`.nccl`): one ring
    over the group, or within each node and then across nodes (hierarchical), whichever is cheaper; a
    measured time for the group size and bytes overrides both. With a ``bucket`` (weight gradients, which
    frameworks reduce in buckets of many tensors) a smaller tensor pays its share of a bucket's all-reduce
    rather than a whole call's latency."""
    n = device_groups.shape[1]
    if n <= 1 or nbytes <= 0:
        return 0.0, EMPTY
    if nbytes < bucket:
        t, res = allreduce(cluster, device_groups, bucket)
        return t * nbytes / bucket, res
    measured = cluster.measured_collective("allreduce", n, nbytes)
    k, m, intra, inter, res = _ports(cluster, device_groups)
    link, lat = cluster.link, cluster.latency_scale
    if k == 1:
        return measured or nccl.allreduce_time(n, nbytes, intra, link, 1.0, latency_scale=lat), res
    flat = nccl.allreduce_time(n, nbytes, min(intra, inter), link, 1.0, k, lat)
    hier = (nccl.allreduce_time(m, nbytes, intra, link, 1.0, latency_scale=lat)
            + nccl.allreduce_time(k, nbytes, inter, link, 1.0, k, lat))
    return measured or min(flat, hier), res


def allgather(cluster: Cluster, device_groups: np.ndarray, nbytes: float) -> tuple[float, np.ndarray]:
    """Concurrent all-gathers of a tensor of ``nbytes`` whole, one per row of ``device_groups`` (or reduce-scatters
    of one: the same time), as NCCL runs them: one ring over the group, whose latency grows with the group
    (:func:`.nccl.allgather_time`); a measured time for the group size and bytes overrides it."""
    n = device_groups.shape[1]
    if n <= 1 or nbytes <= 0:
        return 0.0, EMPTY
    k, _, intra, inter, res = _ports(cluster, device_groups)
    measured = cluster.measured_collective("allgather", n, nbytes)
    return measured or nccl.allgather_time(n, nbytes, min(intra, inter), cluster.link, 1.0, k,
                                           cluster.latency_scale), res


def _ports(cluster: Cluster, device_groups: np.ndarray) -> tuple[int, int, float, float, np.ndarray]:
    """What concurrent collectives over the rows of ``device_groups`` share: the nodes a group spans (k), the most
    ranks of a group on one node (m), the rates NCCL's Simple protocol reaches inside a node and, across nodes,
    on a network port shared by every group using it, and the resources they hold (link ports; node ports
    when k > 1)."""
    D = cluster.devices
    nodes = device_groups // cluster.per_node
    k = max(len(np.unique(row)) for row in nodes[:4])
    m = max(int(np.max(np.unique(row, return_counts=True)[1])) for row in nodes[:4])
    intra = cluster.intra_bw * cluster.bus_efficiency
    res = [D + device_groups.ravel()]
    if k == 1:
        return k, m, intra, float("inf"), np.unique(np.concatenate(res))
    share = np.zeros(cluster.nodes, dtype=np.int64)  # groups sharing one node's network port
    for row in nodes:
        share[np.unique(row)] += 1
    res.append(2 * D + np.unique(nodes))
    return k, m, intra, cluster.inter_bw * cluster.net_efficiency / int(share.max()), np.unique(np.concatenate(res))


def transfer(src: Op, scfg: OpConfig, dst: Op, dcfg: OpConfig, axes: tuple, cluster: Cluster,
             dtype_bytes: int) -> tuple[float, np.ndarray, float]:
    """Moving ``src``'s output to the partitions of ``dst`` that need it (forward; backward is charged the same:
    an approximation where several copies of one producer rectangle each need its whole gradient).

    Each consumer partition needs the sub-rectangle its dims select; it is served by the
    replica of the producer's rectangle on its own device, else on its node, else over the network,
    once per node and rectangle: the consumers on that node needing it share it over their links.
    Returns (seconds, resources, bytes moved across devices).
    """
    D = cluster.devices
    total = src.out_elems * dtype_bytes
    sdeg, ddeg = degree(src, scfg), degree(dst, dcfg)
    sidx, didx = part_index(src, scfg), part_index(dst, dcfg)
    ps, pd = scfg.parts, dcfg.parts
    ov = np.ones((ps, pd))
    gkey = np.zeros(ps, dtype=np.int64)
    rkey = np.zeros(pd, dtype=np.int64)  # consumer partitions with equal keys need the same rectangle
    for a, cd in zip(src.out, axes):
        ks, kd = sdeg.get(a, 1), ddeg.get(cd, 1) if cd is not None else 1
        if ks == 1 and kd == 1:
            continue
        slo = sidx[a] / ks if ks > 1 else np.zeros(ps)
        dlo = didx[cd] / kd if kd > 1 else np.zeros(pd)
        lo = np.maximum(slo[:, None], dlo[None, :])
        hi = np.minimum((slo + 1 / ks)[:, None], (dlo + 1 / kd)[None, :])
        ov *= np.clip(hi - lo, 0.0, None)
        if ks > 1:
            gkey = gkey * ks + sidx[a]
        if kd > 1:
            rkey = rkey * kd + didx[cd]
    # a mixture of experts split over its experts: each expert partition takes (dispatch) or gives back
    # (combine) only the tokens routed to it, route_share / degree of each slice: an all-to-all
    for op, deg, idx, consumer in ((src, sdeg, sidx, False), (dst, ddeg, didx, True)):
        k = deg.get(op.routed, 1) if op.routed else 1
        if k > 1:
            ov *= min(1.0, op.route_share / k)
            if consumer:
                rkey = rkey * k + idx[op.routed]
            else:
                gkey = gkey * k + idx[op.routed]
    if scfg.replicas > 1:  # every copy of a partition holds its rectangle, every copy needs its input
        ov, gkey = np.repeat(ov, scfg.replicas, axis=0), np.repeat(gkey, scfg.replicas)
    if dcfg.replicas > 1:
        ov, rkey = np.repeat(ov, dcfg.replicas, axis=1), np.repeat(rkey, dcfg.replicas)
    sdev = scfg.start + np.arange(scfg.span)
    ddev = dcfg.start + np.arange(dcfg.span)
    snode, dnode = sdev // cluster.per_node, ddev // cluster.per_node
    _, rep, gid = np.unique(gkey, return_index=True, return_inverse=True)
    G = len(rep)
    holds = np.zeros((G, D), dtype=bool)  # group g has a replica on device d
    holds[gid, sdev] = True
    need = ov[rep] * total  # (groups, consumer partitions)
    want = (need > 0) & ~holds[:, ddev]
    if not want.any():
        return 0.0, EMPTY, 0.0
    first = np.full((G, cluster.nodes), -1, dtype=np.int64)  # first replica of g on each node
    first[gid[::-1], snode[::-1]] = sdev[::-1]
    src = first[:, dnode]
    intra = want & (src >= 0)
    inter = want & (src < 0)
    # bytes sent and received per device link port and node network port (full duplex: the two directions
    # do not share bandwidth)
    port, port_in = np.zeros(D), np.zeros(D)
    nic, nic_in = np.zeros(cluster.nodes), np.zeros(cluster.nodes)
    if intra.any():
        np.add.at(port, src[intra], need[intra])
        np.add.at(port_in, np.broadcast_to(ddev, need.shape)[intra], need[intra])
    if inter.any():
        # consumers on one node that need the same rectangle take it over the network once and share it
        # on the node's links (an all-gather of its pieces, as Megatron-LM's scatter/gather of pipeline
        # transfers across the tensor-parallel group)
        _, first_col, col_group, copies = np.unique(dnode * (int(rkey.max()) + 1) + rkey, return_index=True,
                                                    return_inverse=True, return_counts=True)
        once = np.zeros(len(ddev), dtype=bool)
        once[first_col] = True
        crossing = inter & once[None, :]
        np.add.at(nic, np.broadcast_to(snode[rep][:, None], need.shape)[crossing], need[crossing])
        np.add.at(nic_in, np.broadcast_to(dnode, need.shape)[crossing], need[crossing])
        share = copies[col_group]
        gather = inter & (share > 1)[None, :]
        if gather.any():  # each copy receives the pieces the others fetched and sends its own to them
            pieces = (need * ((share - 1) / share)[None, :])[gather]
            np.add.at(port_in, np.broadcast_to(ddev, need.shape)[gather], pieces)
            np.add.at(port, np.broadcast_to(ddev, need.shape)[gather], pieces)
    moved = float(need[want].sum())
    if moved == 0.0:
        return 0.0, EMPTY, 0.0
    t = 0.0
    if port.any() or port_in.any():
        t = max(port.max(), port_in.max()) / cluster.intra_bw + cluster.intra_latency
    if nic.any() or nic_in.any():
        t = max(t, max(nic.max(), nic_in.max()) / cluster.inter_bw + cluster.inter_latency)
    res = np.concatenate([D + np.flatnonzero(port + port_in), 2 * D + np.flatnonzero(nic + nic_in)])
    return float(t), res, moved
