"""Collective times as NCCL runs them: protocol by message size, latency by group size and link kind."""

from itertools import pairwise

import numpy as np
import pytest

from autotune.errors import UsageError
from autotune.runners.simulator import costs, nccl
from autotune.search_spaces.parallel.clusters import Cluster, get_cluster

US = 1e-6


def test_a_tiny_all_reduce_costs_the_low_latency_protocols_latency():
    # LL: 3.6 us per call and 0.47 us per NVLink step, 2 (8 - 1) steps; the 8 bytes cost nothing
    assert nccl.allreduce_time(8, 8, 300e9, latency_scale=1) == pytest.approx(3.6 * US + 14 * 0.47 * US, rel=1e-3)
    # on PCIe each step costs 1 us
    assert nccl.allreduce_time(8, 8, 300e9, link="pcie", latency_scale=1) == pytest.approx(3.6 * US + 14 * US, rel=1e-3)
    # measured latencies run above NCCL's model: the scale multiplies them
    assert nccl.allreduce_time(8, 8, 300e9, latency_scale=2.5) == pytest.approx(2.5 * (3.6 * US + 14 * 0.47 * US),
                                                                             rel=1e-3)


def test_a_large_all_reduce_reaches_the_simple_protocols_bus_bandwidth():
    t = nccl.allreduce_time(8, 2**30, 300e9, efficiency=0.8, latency_scale=1)
    simple = 8.4 * US + 14 * 3.4 * US + 2 * 7 / 8 * 2**30 / (0.8 * 300e9)
    assert t == pytest.approx(simple)
    assert nccl.bus_bandwidth(8, 2**30, t) == pytest.approx(240e9, rel=0.01)


def test_an_all_gather_is_a_ring_of_n_minus_1_steps_whose_latency_grows_with_the_group():
    """Each rank receives the other n - 1 slices of the whole tensor, in n - 1 steps (NCCL has no tree for it),
    the steps across nodes paying the network's hop: a tiny gather of 64 ranks costs eight times as many
    steps' latency as one of 8, where a tree all-reduce over the same nodes would grow with their log."""
    simple = 8.4 * US + 7 * 3.4 * US + 7 / 8 * 2**30 / (0.8 * 300e9)
    assert nccl.allgather_time(8, 2**30, 300e9, efficiency=0.8, latency_scale=1) == pytest.approx(simple)
    ll = [nccl.allgather_time(n, 8, 300e9, nodes=n // 8, latency_scale=1) for n in (8, 64)]
    assert ll[0] == pytest.approx(3.6 * US + 7 * 0.47 * US, rel=1e-3)
    assert ll[1] == pytest.approx(3.6 * US + 56 * 0.47 * 1.8 * US + 7 * 2.7 * US, rel=1e-3)
    assert nccl.allgather_time(1, 2**20, 300e9) == 0.0


def test_bus_bandwidth_rises_with_the_message_and_time_with_the_group():
    sizes = [2**k for k in range(10, 31, 2)]
    bw = [nccl.bus_bandwidth(8, s, nccl.allreduce_time(8, s, 300e9)) for s in sizes]
    assert all(a < b for a, b in pairwise(bw))
    assert bw[0] < 0.01 * bw[-1]  # 1 KB is latency-bound
    for size in (2**16, 2**20, 2**26):  # more ranks: more steps and more of the message each moves
        t = [nccl.allreduce_time(n, size, 300e9) for n in (2, 4, 8, 16)]
        assert all(a < b for a, b in pairwise(t))


def test_the_protocol_is_the_fastest_for_the_size():
    # at a mid size LL128 (92% of the bandwidth, lower latency than Simple) wins on NVLink: slower than its
    # own formula would be with Simple's share, faster than Simple
    n, size, bw = 8, 4 * 2**20, 300e9
    ll128 = 10.0 * US + 14 * 1.9 * US + 2 * 7 / 8 * size / bw / (0.92 * 0.8)
    simple = 8.4 * US + 14 * 3.4 * US + 2 * 7 / 8 * size / bw / 0.8
    assert ll128 < simple
    assert nccl.allreduce_time(n, size, bw, efficiency=0.8, latency_scale=1) == pytest.approx(ll128)
    # LL128 runs on NVLink inside a node only: across nodes the same size takes Simple (or LL)
    across = nccl.allreduce_time(n, size, bw, efficiency=0.8, nodes=2, latency_scale=1)
    simple_across = 8.4 * US + 12 * 3.4 * US + 2 * 9.6 * US + 2 * 7 / 8 * size / bw / 0.8
    assert across == pytest.approx(simple_across)


def test_one_rank_or_no_bytes_cost_nothing():
    assert nccl.allreduce_time(1, 2**20, 300e9) == 0.0
    assert nccl.allreduce_time(8, 0, 300e9) == 0.0


def test_cluster_files_give_the_link_kind_and_bus_efficiency():
    base = {"name": "c", "nodes": 1, "per_node": 8, "device": "A100", "intra_bw": 300e9, "inter_bw": 25e9}
    c = Cluster.from_json({**base, "link": "pcie", "bus_efficiency": 0.7, "latency_scale": 1.5})
    assert (c.link, c.bus_efficiency, c.latency_scale) == ("pcie", 0.7, 1.5)
    assert Cluster.from_json(base).link == "nvlink"
    with pytest.raises(UsageError, match="link must be one of nvlink, pcie"):
        Cluster.from_json({**base, "link": "infiniband"})
    with pytest.raises(UsageError, match="bus_efficiency"):
        Cluster.from_json({**base, "bus_efficiency": 1.5})
    assert get_cluster("k80-16x4").link == "pcie" and get_cluster("dgx-a100-x1").link == "nvlink"


def test_gradients_reduced_in_buckets_pay_a_share_of_the_latency():
    c = get_cluster("dgx-a100-x1")
    group = np.arange(8)[None, :]
    whole, _ = costs.allreduce(c, group, 4096)
    shared, _ = costs.allreduce(c, group, 4096, bucket=costs.GRADIENT_BUCKET)
    bucket, _ = costs.allreduce(c, group, costs.GRADIENT_BUCKET)
    assert shared == pytest.approx(bucket * 4096 / costs.GRADIENT_BUCKET) and shared < whole / 100
    big = 4 * costs.GRADIENT_BUCKET  # a tensor larger than a bucket is reduced on its own
    assert costs.allreduce(c, group, big, bucket=costs.GRADIENT_BUCKET)[0] == costs.allreduce(c, group, big)[0]
