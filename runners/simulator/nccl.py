"""Collective times as NCCL runs them: a ring over the group, in whichever of NCCL's three protocols is the
fastest for the message size.

The protocols trade latency for bandwidth: LL (8-byte stores with a flag, lowest latency, a quarter of the
bandwidth in an all-reduce), LL128 (128-byte lines, 92% of the bandwidth, NVLink only) and Simple (the whole
bandwidth, the highest latency). A ring all-reduce over n ranks takes 2 (n - 1) steps, each paying a hop
latency on its link (NVLink, PCIe, or the network for steps that cross nodes), plus a base latency per call.
The latencies and bandwidth shares are those of NCCL's own tuning model (``src/graph/tuning.cc``); what
Simple reaches of the link rate is the cluster's ``bus_efficiency`` (NCCL's maintainers put the protocol
overhead on NVLink at about 20%; nccl-tests' large-message bus bandwidth gives it per system), and measured
latencies run above NCCL's model by the cluster's ``latency_scale``. So the bus
bandwidth rises with the message size (latency-bound below about a megabyte) and falls with the group size
(more steps), as the nccl-tests curves do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autotune.search_spaces.parallel.clusters import BUS_EFFICIENCY, LATENCY_SCALE

US = 1e-6


@dataclass(frozen=True)
class Protocol:
    name: str
    base: float  # seconds per call
    hop: dict[str, float]  # seconds per step, by link kind
    share: float  # of Simple's ring bandwidth, in an all-reduce
    links: tuple[str, ...]  # link kinds NCCL enables it on


PROTOCOLS = (  # the ring's
    Protocol("LL", 3.6 * US, {"nvlink": 0.47 * US, "pcie": 1.0 * US, "net": 2.7 * US}, 0.25, ("nvlink", "pcie")),
    Protocol("LL128", 10.0 * US, {"nvlink": 1.9 * US, "pcie": 2.5 * US, "net": 4.0 * US}, 0.92, ("nvlink",)),
    Protocol("Simple", 8.4 * US, {"nvlink": 3.4 * US, "pcie": 5.7 * US, "net": 9.6 * US}, 1.0, ("nvlink", "pcie")),
)
# across nodes NCCL may run a double binary tree instead: a hop per level (log2 of the nodes) rather than per
# rank, at 90% of the ring's bandwidth with Simple (whose per-hop latency is that of a whole 256 KB chunk)
TREE = (
    Protocol("LL", 4.4 * US, {"nvlink": 0.52 * US, "pcie": 1.0 * US, "net": 5.0 * US}, 0.9 / 3.8, ("nvlink", "pcie")),
    Protocol("Simple", 0.0, {"nvlink": 28 * US, "pcie": 28 * US, "net": 50 * US}, 0.9, ("nvlink", "pcie")),
)


def _fastest(protocols, link: str, latency, seconds_at_link_rate: float, efficiency: float,
             latency_scale: float) -> float:
    """The least, over the protocols enabled on ``link``, of the protocol's ``latency(p)`` (None: not used
    here) times ``latency_scale`` plus ``seconds_at_link_rate`` over its share of ``efficiency``."""
    return min(latency_scale * lat + seconds_at_link_rate / (p.share * efficiency)
               for p in protocols if link in p.links and (lat := latency(p)) is not None)


def ring_time(steps: int, inter_steps: int, seconds_at_link_rate: float, link: str, efficiency: float,
              latency_scale: float) -> float:
    """Seconds of a ring collective of ``steps`` steps, ``inter_steps`` of them across nodes, whose traffic
    takes ``seconds_at_link_rate`` on the busiest port at its full rate: the fastest protocol's latency (NCCL's
    model times ``latency_scale``) plus that time over the protocol's share of ``efficiency`` (Simple's share
    of the link rate)."""
    if steps <= 0:
        return 0.0

    def latency(p: Protocol) -> float | None:
        if p.name == "LL128" and inter_steps:
            return None  # NCCL enables LL128 on NVLink within a node only (by default)
        hop = p.hop[link] * (1.8 if p.name == "LL" and inter_steps else 1.0)
        return p.base + (steps - inter_steps) * hop + inter_steps * p.hop["net"]
    return _fastest(PROTOCOLS, link, latency, seconds_at_link_rate, efficiency, latency_scale)


def allreduce_time(n: int, nbytes: float, bandwidth: float, link: str = "nvlink", efficiency: float = BUS_EFFICIENCY,
                   nodes: int = 1, latency_scale: float = LATENCY_SCALE) -> float:
    """A ring all-reduce of ``nbytes`` over ``n`` ranks on ``nodes`` nodes whose busiest port runs at
    ``bandwidth`` bytes/s (NCCL's bus bandwidth at Simple is ``efficiency`` times it); the defaults are the
    clusters' (fitted to a published nccl-tests curve of 8 A100s)."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    ring = ring_time(2 * (n - 1), 2 * (nodes - 1), 2 * (n - 1) / n * nbytes / bandwidth, link, efficiency,
                     latency_scale)
    return min(ring, tree_time(n, nodes, nbytes, bandwidth, link, efficiency, latency_scale)) if nodes > 1 else ring


def allgather_time(n: int, nbytes: float, bandwidth: float, link: str = "nvlink", efficiency: float = BUS_EFFICIENCY,
                   nodes: int = 1, latency_scale: float = LATENCY_SCALE) -> float:
    """A ring all-gather of a tensor of ``nbytes`` whole over ``n`` ranks on ``nodes`` nodes (each rank receives the
    other ranks' n - 1 slices), or a ring reduce-scatter (the same traffic reversed). NCCL runs both as a ring
    only (no tree): n - 1 steps, ``nodes - 1`` of them across nodes, so their latency grows with the group."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    return ring_time(n - 1, nodes - 1, (n - 1) / n * nbytes / bandwidth, link, efficiency, latency_scale)


def tree_time(n: int, nodes: int, nbytes: float, bandwidth: float, link: str, efficiency: float,
              latency_scale: float) -> float:
    """A tree all-reduce over ``nodes`` nodes of n / nodes ranks each (a chain inside each node, a tree across
    them; reduce up, broadcast down): each rank moves about twice the message, as in a ring, but the latency
    grows with the tree's depth."""
    per_node, depth = n / nodes, math.log2(nodes)
    return _fastest(TREE, link, lambda p: p.base + 2 * ((per_node - 1) * p.hop[link] + depth * p.hop["net"]),
                    2 * nbytes / bandwidth, efficiency, latency_scale)


def bus_bandwidth(n: int, nbytes: float, seconds: float) -> float:
    """nccl-tests' bus bandwidth of an all-reduce: the bytes each rank moves, 2 (n - 1) / n of the message,
    per second; a rate comparable across group sizes."""
    return 2 * (n - 1) / n * nbytes / seconds
