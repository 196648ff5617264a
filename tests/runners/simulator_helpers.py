"""Toy clusters and graphs shared by the simulator's tests (test_simulator_compute_memory.py and
test_simulator_collectives_pipeline.py): a cluster of ideal devices (peak rate on every GEMM, no launch
cost) with round-number link bandwidths and latencies, a chain of linear layers, an op's configuration by
its dimensions' degrees, and a weight gradient's share of a bucketed all-reduce."""

import math

from autotune.runners.simulator import costs, nccl
from autotune.search_spaces.parallel.clusters import Cluster, DeviceSpec
from autotune.search_spaces.parallel.graph import Builder
from autotune.search_spaces.parallel.strategy import OpConfig

PEAK, INTRA, INTER, LAT_I, LAT_N = 1e12, 1e9, 1e8, 1e-6, 1e-5


def cluster(nodes=1, per_node=4, memory=1e12, **kw) -> Cluster:
    dev = DeviceSpec("toy", PEAK, PEAK, memory, math.inf, gemm_efficiency=1.0, launch_s=0.0)
    return Cluster("toy", nodes, per_node, dev, INTRA, LAT_I, INTER, LAT_N, **kw)


def grad_sync(n, nbytes, bw=INTRA, **kw):
    """A weight gradient's all-reduce: its share of a gradient bucket's (frameworks reduce gradients in buckets)."""
    return nccl.allreduce_time(n, costs.GRADIENT_BUCKET, bw, **kw) * nbytes / costs.GRADIENT_BUCKET


def chain(layers=1, b=8, f=16, width=32):
    g = Builder("chain", b)
    x = g.input("x", {"b": b, "f": f}, {"b": "sample", "f": None})
    for i in range(layers):
        x = g.linear(x, width, f"l{i}")
    return g.build(state_bytes_per_param=16)


def cfg(graph, op, start=0, **degrees):
    o = graph.ops[graph.index[op]]
    return OpConfig(tuple(degrees.get(d, 1) for d in o.parallel_dims), start)
