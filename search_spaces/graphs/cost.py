"""Per-op costs for graph search: measured once per op key, cached, estimated when not measured.

The graph cost is the sum of its run-time ops' costs; with ``fusion`` on (default),
ops that onnxruntime fuses into their producer (activation or BatchNormalization
after a Conv, bias Add after a MatMul...) count as free, so that the search does
not chase gains the runtime already has, nor break its fusions.

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


class DatabaseOpCostCache:
    """Op costs as trials of task kind "op" in the experiment database: an op key is measured once
    per device, ever, and every measurement is a trial like any other (queryable, exportable)."""

    def __init__(self, db, device, device_label: str = "cpu"):
        from autotune.db.queries import costs_by_key

        self.db, self.device, self.label = db, device, device_label
        self.costs = costs_by_key(db, "op", db.device_id(device))

    def get(self, key: str) -> float | None:
        return self.costs.get(key)

    def put(self, key: str, seconds: float, measurement=None) -> None:
        self.costs[key] = seconds
        if measurement is not None:
            op = measurement.candidate.payload.get("op", "op")
            self.db.add_trials(Task("op", op, {"device": self.label}), self.device, [measurement])


def op_features(g: Graph, n: Node) -> list[float]:
    """Cost-model row of one op: its type, log2 FLOPs, bytes and output size, kernel area, stride, groups."""
    ins = [g.shape[t] for t in n.inputs if t]
    outs = [g.shape[t] for t in n.outputs]
    kernel = n.a.get("kernel_shape") or (ins[1][2:] if n.op == "Conv" and len(ins) > 1 else [1])
    return [float(OP_IDS.get(n.op, len(OP_IDS))), np.log2(1 + ops.flops(n.op, ins, outs, n.a)),
            np.log2(1 + ops.bytes_moved(ins, outs)), np.log2(1 + sum(int(np.prod(o)) for o in outs)),
            float(np.prod(kernel)), float(np.prod(n.a.get("strides") or [1])), float(n.a.get("group", 1))]


class OpCostPredictor:
    """XGBoost regression of log op time on ``op_features``, for ops the search has not measured:
    trained on the measured ops once there are ``min_samples``, retrained as more arrive."""

    def __init__(self, min_samples: int = 16, retrain_every: int = 8):
        self.X: list[list[float]] = []
        self.y: list[float] = []
        self.min_samples, self.retrain_every = min_samples, retrain_every
        self.model, self.trained_on = None, 0

    def add(self, features: list[float], seconds: float) -> None:
        if seconds > 0:
            self.X.append(features)
            self.y.append(float(np.log(seconds)))

    def predict(self, features: list[float]) -> float | None:
        n = len(self.y)
        if n < self.min_samples:
            return None
        import xgboost  # the native API: XGBRegressor would need scikit-learn

        if self.model is None or n - self.trained_on >= self.retrain_every:
            data = xgboost.DMatrix(np.asarray(self.X), label=np.asarray(self.y), nthread=1)
            self.model = xgboost.train({"max_depth": 4, "eta": 0.2, "nthread": 1}, data, num_boost_round=80)
            self.trained_on = n
        return float(np.exp(self.model.predict(xgboost.DMatrix(np.asarray([features]), nthread=1))[0]))


def node_spec(g: Graph, n: Node) -> dict:
    from autotune.runners.onnx_ops import op_spec
    ins = [(g.shape[t], g.dtype[t], g.is_weight[t]) if t else None for t in n.inputs]
    return op_spec(n.op, n.a, ins, [g.shape[t] for t in n.outputs])


class OpCostModel:
    """Cost of a graph = sum of its run-time ops' costs (weight-only ops are folded: free)."""

    def __init__(self, runner=None, cache=None, max_measure: int = 400, device: str = "cpu", predictor=None,
                 fusion: bool = True):
        self.fusion = fusion  # count ops onnxruntime fuses into their producer as free
        self.runner, self.cache = runner, cache if cache is not None else OpCostCache()
        self.max_measure, self.device = max_measure, device
        self.predictor = OpCostPredictor() if predictor is None else (predictor or None)  # False: none
        self.predicted_keys: set = set()
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
            if self.predictor is not None:
                self.predictor.add(op_features(g, n), cost)
        else:
            self.predicted_keys.add(k)
            cost = self.estimate(g, n)
            self.estimated += 1
            return cost  # not memoised: a later calibration may change it
        self.memo[k] = cost
        return cost

    def estimate(self, g: Graph, n: Node) -> float:
        """An op not measured (yet): the XGBoost predictor's cost once it has enough measured ops,
        else FLOPs and bytes at rates fitted on the measured ops (plus an overhead)."""
        if self.predictor is not None:
            predicted = self.predictor.predict(op_features(g, n))
            if predicted is not None:
                return predicted
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

    def confirm(self, g: Graph) -> int:
        """Measure the ops of ``g`` whose cost was only predicted (the ones a search result relies on),
        beyond ``max_measure``; returns how many were measured. ``graph_cost(g)`` is then all measured."""
        todo = [n for n in g.runtime_nodes() if g.op_key(n) in self.predicted_keys and g.op_key(n) not in self.memo]
        if self.runner is None or not todo:
            return 0
        cap, self.max_measure = self.max_measure, self.measured + len(todo)
        try:
            for n in todo:
                self.op_cost(g, n)
        finally:
            self.max_measure = cap
        return len(todo)

    def graph_cost(self, g: Graph) -> float:
        """Sum of the run-time ops' costs, plus a 1 ns tie-breaker per op (equal cost: fewer ops)."""
        total = 0.0
        for n in g.runtime_nodes():
            if not (self.fusion and fused_into_producer(g, n)):
                total += self.op_cost(g, n) + TIE_BREAK_S
        return float(total)


TIE_BREAK_S = 1e-9
OP_IDS = {op: i for i, op in enumerate(sorted(ops.OPS))}
FUSING_PRODUCERS = {"Conv", "Gemm", "MatMul"}
FUSED_ACTIVATIONS = {"Relu", "Sigmoid", "Tanh"}


def fused_into_producer(g: Graph, n: Node, depth: int = 0) -> bool:
    """Whether onnxruntime's own graph optimisations fuse ``n`` into the op producing its input
    (Conv/Gemm + activation, Conv + BatchNormalization, Conv + Mul/Add by a constant, MatMul + bias Add)."""
    src = n.inputs[0] if n.inputs else ""
    if n.op in ("Add", "Mul") and len(n.inputs) == 2 and g.is_weight.get(n.inputs[0]):
        src = n.inputs[1]
    prod = g.producer.get(src)
    if prod is None or src in g.outputs or len(g.consumers.get(src, ())) != 1:
        return False
    if prod[0].op not in FUSING_PRODUCERS:  # look through a node that is itself fused (Conv -> BN -> Relu)
        if n.op not in FUSED_ACTIVATIONS or depth > 0 or not fused_into_producer(g, prod[0], depth + 1):
            return False
        src = prod[0].inputs[0] if not g.is_weight.get(prod[0].inputs[0]) else prod[0].inputs[1]
        prod = g.producer.get(src)
    p = prod[0].op
    if n.op in FUSED_ACTIVATIONS:
        return p in ("Conv", "Gemm")
    if n.op == "BatchNormalization":
        return p == "Conv" and all(g.is_weight[t] for t in n.inputs[1:])
    if n.op in ("Add", "Mul"):
        other = n.inputs[1] if src == n.inputs[0] else n.inputs[0]
        return g.is_weight[other] and (p == "Conv" or (p == "MatMul" and n.op == "Add"))
    return False
