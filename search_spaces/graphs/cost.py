"""Per-op costs for graph search: measured once per op key, cached, estimated when not measured.

``OpCostCache`` is the hook for the experiment database: anything with
``get(key) -> float | None`` and ``put(key, seconds, measurement)`` works (the lead
backs it with trials of task kind "op"). ``OpCostModel`` asks the cache, then
measures with the op runner (up to ``max_measure`` new keys), and otherwise
estimates from FLOPs and bytes with rates calibrated on the measured ops.
"""

from __future__ import annotations

import json
import os

import numpy as np

from autotune.search_spaces.graphs import ops
from autotune.search_spaces.graphs.ir import Graph, Node
from autotune.types import Candidate, Task, stable_key


class OpCostCache:
    """In-memory op costs, optionally persisted as a JSON file (key -> seconds)."""

    def __init__(self, path: str | None = None):
        self.path, self.costs = path, {}
        if path and os.path.exists(path):
            with open(path) as f:
                self.costs = json.load(f)

    def get(self, key: str) -> float | None:
        return self.costs.get(key)

    def put(self, key: str, seconds: float, measurement=None) -> None:
        self.costs[key] = seconds

    def save(self) -> None:
        if self.path:
            with open(self.path, "w") as f:
                json.dump(self.costs, f)


def node_spec(g: Graph, n: Node) -> dict:
    from autotune.runners.onnx_ops import op_spec
    ins = [(g.shape[t], g.dtype[t], g.is_weight[t]) if t else None for t in n.inputs]
    return op_spec(n.op, n.a, ins, [g.shape[t] for t in n.outputs])


class OpCostModel:
    """Cost of a graph = sum of its run-time ops' costs (weight-only ops are folded: free)."""

    def __init__(self, runner=None, cache=None, max_measure: int = 400, device: str = "cpu", predictor=None):
        self.runner, self.cache = runner, cache if cache is not None else OpCostCache()
        self.max_measure, self.device, self.predictor = max_measure, device, predictor
        self.measured = 0
        self.memo: dict[tuple, float] = {}
        self.calib: list[tuple[float, float, float]] = []  # (flops, bytes, seconds)
        self.rates: tuple[float, float] | None = None
        self.estimated = 0

    def op_cost(self, g: Graph, n: Node) -> float:
        k = g.op_key(n)
        if k in self.memo:
            return self.memo[k]
        spec = node_spec(g, n)
        key = stable_key({"device": self.device, **spec})
        cost = self.cache.get(key)
        if cost is None and self.runner is not None and self.measured < self.max_measure:
            self.measured += 1
            task = Task("op", n.op, {"device": self.device})
            m = self.runner.measure(task, [Candidate(spec, key)])[0]
            if m.ok:
                cost = m.cost
                self.cache.put(key, cost, m)
        if cost is not None:
            ins = [g.shape[t] for t in n.inputs if t]
            outs = [g.shape[t] for t in n.outputs]
            self.calib.append((ops.flops(n.op, ins, outs, n.a), ops.bytes_moved(ins, outs), cost))
            self.rates = None
        else:
            cost = self.estimate(g, n)
            self.estimated += 1
            return cost  # not memoised: a later calibration may change it
        self.memo[k] = cost
        return cost

    def estimate(self, g: Graph, n: Node) -> float:
        """Analytic estimate: FLOPs and bytes at rates fitted on the measured ops (plus an overhead)."""
        ins = [g.shape[t] for t in n.inputs if t]
        outs = [g.shape[t] for t in n.outputs]
        f, b = ops.flops(n.op, ins, outs, n.a), ops.bytes_moved(ins, outs)
        if self.rates is None:
            if len(self.calib) >= 3:
                arr = np.array(self.calib)
                flop_rate = float(np.median(arr[:, 0] / arr[:, 2]))
                byte_rate = float(np.median(arr[:, 1] / arr[:, 2]))
                self.rates = (max(flop_rate, 1e8), max(byte_rate, 1e8))
            else:
                self.rates = (2e10, 5e9)  # ~one core: 20 GFLOP/s, 5 GB/s
        return 2e-6 + max(f / self.rates[0], b / self.rates[1])

    def graph_cost(self, g: Graph) -> float:
        return float(sum(self.op_cost(g, n) for n in g.runtime_nodes()))
