"""Graph candidates costed by their ops, and the backends that time ops and whole models.

* :class:`OpCosts` gives the cost of a graph: the sum of its run-time ops' costs
  (``autotune.search_spaces.graphs.cost``). Each distinct op is looked up in a cache
  (the experiment database in practice: ``autotune.db.op_costs``), else timed once by an
  op runner (up to ``max_measure`` ops), else estimated: by the op-cost model
  (``autotune.cost_models.graph_ops``) once it has enough measured ops, before that from
  FLOPs and bytes at rates fitted on the measured ops. A timing that fails is kept in the
  cache too, as a failure with its reason (never a cost): the op is not timed again.
* :class:`GraphCostRunner` is the engine's runner of a ``GraphSpace``: a measurement is
  a candidate graph's cost from :class:`OpCosts`. With ``timed`` every op a graph's cost rests
  on is timed (the cap does not apply), so the cost is a sum of measurements, and a graph with
  an op that could not be timed is a failed measurement, never a guess; without it, ops beyond
  the cap are estimated and the device says so (:func:`estimating_device`), so that those costs
  are never stored, nor looked up, as measurements of the device itself.
* :func:`make_backend` gives, per device, the op runner and the end-to-end latency and
  numeric checks: "cpu" is onnxruntime (all its own optimisations on, so ops it fuses
  into their producer count as free), "cuda" eager PyTorch on the GPU and "torch-cpu"
  the same torch path on the CPU (eager torch fuses nothing: plain sum of op costs).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from autotune.cost_models.graph_ops import GraphOpCostModel
from autotune.errors import AutotuneError, UsageError
from autotune.runners.base import Runner
from autotune.runners.onnx_ops import op_spec
from autotune.search_spaces.graphs.cost import (
    NOMINAL_BYTE_RATE,
    NOMINAL_FLOP_RATE,
    counted_nodes,
    flops_and_bytes,
    graph_cost,
    op_features,
    roofline_cost,
)
from autotune.search_spaces.graphs import ops
from autotune.search_spaces.graphs.ir import Graph, Node
from autotune.search_spaces.graphs.onnx_prepare import runtime_message
from autotune.types import Candidate, Device, Measurement, Status, Task, stable_key

ANALYTIC_DEVICE = Device("analytic-op-costs", "simulated", {"op_costs": "FLOPs and bytes at fitted rates"})
#: what the name of a device whose graph costs are partly estimated ends with (:func:`estimating_device`)
ESTIMATED_SUFFIX = " (estimated op costs)"
#: the most elements a constant input of an opaque op has for its values to be part of the op's spec
#: (``node_spec``): axes, pads, starts, ends and scales are a few; a larger constant is timed with zeros for
#: integers (indices valid in any table) and random floats (``onnx_ops.spec_weight``)
SPEC_VALUES = 16
#: the ``op_costs`` property of such a device
ESTIMATED_OP_COSTS = "timed up to the campaign's --max-measure distinct ops, the rest estimated by the op-cost model"


def estimating_device(device: Device, campaign: str) -> Device:
    """The device a graph campaign whose costs may rest on estimated ops stores its trials on: ``device`` (the
    graph cost runner's) renamed and marked, one per campaign (a fresh id), so that its costs are never looked
    up by another campaign, nor listed as measurements of ``device``, nor take the place of a measured cost
    of the same graph there (a graph has one trial per task and device)."""
    import uuid

    return Device(device.name + ESTIMATED_SUFFIX, device.kind,
                  {**device.properties, "op_costs": ESTIMATED_OP_COSTS, "campaign": campaign, "id": uuid.uuid4().hex[:12]})


def is_estimating(device: Device) -> bool:
    """Whether ``device`` is one of :func:`estimating_device`'s."""
    return device.properties.get("op_costs") == ESTIMATED_OP_COSTS


def node_spec(g: Graph, n: Node) -> dict:
    """The op spec (``onnx_ops.op_spec``) of one node: what an op runner times. An op the graph IR does not
    model (an opaque node) is timed at the graph's opset, in its domain, with the values of its small constant
    inputs (axes, pads, starts and ends, scales: what it computes depends on them); the IR's own ops need
    neither (Reshape's target is its output shape, Split's sizes an attribute)."""
    ins = [(g.shape[t], g.dtype[t], g.is_weight[t]) if t else None for t in n.inputs]
    outs, dtypes = [g.shape[t] for t in n.outputs], [g.dtype[t] for t in n.outputs]
    if ops.is_known(n.op) and not n.domain:
        return op_spec(n.op, n.a, ins, outs, output_dtypes=dtypes)
    return op_spec(n.op, n.a, ins, outs, g.opset, n.domain, [_spec_values(g.weights.get(t)) for t in n.inputs],
                   dtypes)


def _spec_values(w) -> list | None:
    """A constant's values for an op spec: a small one's, finite (a spec is canonical JSON), else None."""
    if w is None or w.size > SPEC_VALUES or (w.dtype.kind in "fc" and not np.isfinite(w).all()):
        return None
    return w.tolist()


def failure_text(status: str, error: str) -> str:
    """Why an op's timing failed, as kept and reported: its status and error."""
    return f"{status}: {error}".strip(": ")


class OpCostCache:
    """Op timings in memory: the costs (op key -> seconds) and the failures (op key -> why the timing failed, never
    a cost); anything with the same ``get``/``failure``/``put`` works as a cache."""

    def __init__(self, costs: dict[str, float] | None = None, failures: dict[str, str] | None = None):
        self.costs, self.failures = dict(costs or {}), dict(failures or {})

    def get(self, key: str) -> float | None:
        return self.costs.get(key)

    def failure(self, key: str) -> str | None:
        return self.failures.get(key)

    def put(self, key: str, measurement: Measurement) -> None:
        """Keep an op's timing: its cost, or why it failed."""
        if measurement.ok:
            self.costs[key] = measurement.cost
        else:
            self.failures[key] = failure_text(measurement.status.value, measurement.error)


class OpCosts:
    """Cost of a graph = sum of its counted run-time ops' costs (see the module docstring).

    ``label`` tags op keys with where they were timed (op costs of different backends never
    mix); ``max_measure`` caps the distinct ops timed (None: no cap); ``model`` is the op-cost
    model for unmeasured ops (None: a fresh one, False: none),
    retrained after ``retrain_every`` new ops; ``on_retrain(metrics, model_bytes)`` is called
    after each training, with the model's prequential quality on the ops that arrived since
    the previous one.
    """

    def __init__(self, runner: Runner | None = None, cache=None, *, max_measure: int | None = 400, label: str = "cpu",
                 fusion: bool = True, model: GraphOpCostModel | None | bool = None, retrain_every: int = 8):
        self.runner, self.cache = runner, cache if cache is not None else OpCostCache()
        self.max_measure, self.label, self.fusion = max_measure, label, fusion
        self.model = GraphOpCostModel() if model is None else (model or None)
        self.retrain_every = retrain_every
        self.on_retrain: Callable[[dict, bytes], None] | None = None
        self.X: list[list[float]] = []
        self.y: list[float] = []
        self.trained_on = 0
        self.predicted_keys: set = set()
        self.measured = 0  # ops timed (counted against max_measure)
        self.estimated = 0  # op costs estimated rather than measured
        self.failed: dict[tuple, str] = {}  # ops met whose timing failed, here or before (the cache's): why
        self.memo: dict[tuple, float] = {}
        self.calib: list[tuple[float, float, float]] = []  # (flops, bytes, seconds) of ops with a known cost
        self.rates: tuple[float, float] | None = None

    @property
    def device(self) -> Device:
        return self.runner.device if self.runner is not None else ANALYTIC_DEVICE

    # -- one op ----------------------------------------------------------------------
    def op_cost(self, g: Graph, n: Node) -> float:
        k = g.op_key(n)
        if k in self.memo:
            return self.memo[k]
        spec = node_spec(g, n)
        key = stable_key({"device": self.label, **spec})
        cost = self.cache.get(key)
        if cost is None and self.runner is not None and self.cache.failure(key) is None and \
                (self.max_measure is None or self.measured < self.max_measure):
            self.measured += 1
            m = self.runner.measure(Task("op", n.op, {"device": self.label}), [Candidate(spec, key)])[0]
            self.cache.put(key, m)  # a failure too: no search on this device times the op again
            cost = m.cost if m.ok else None
        if cost is None and self.cache.failure(key) is not None:
            self.failed[k] = self.cache.failure(key)
        if cost is None:
            self.predicted_keys.add(k)
            self.estimated += 1
            return self.estimate(g, n)  # not memoised: more measured ops may change it
        self.calib.append((*flops_and_bytes(g, n), cost))
        self.rates = None
        if self.model is not None and cost > 0:
            self.X.append(op_features(g, n))
            self.y.append(float(cost))
        self.memo[k] = cost
        return cost

    def estimate(self, g: Graph, n: Node) -> float:
        """An op not measured (yet): the op-cost model's time once it has enough measured ops, else
        FLOPs and bytes at rates fitted on the measured ops (plus an overhead)."""
        if self.model is not None and len(self.y) >= int(self.model.options["min_samples"]):
            if not self.model.trained or len(self.y) - self.trained_on >= self.retrain_every:
                self.train()
            if self.model.trained:
                return float(self.model.predict_seconds(np.asarray([op_features(g, n)]))[0])
        if self.rates is None:
            if len(self.calib) >= 3:
                arr = np.array(self.calib)
                flop_rate = float(np.median(arr[:, 0] / arr[:, 2]))
                byte_rate = float(np.median(arr[:, 1] / arr[:, 2]))
                self.rates = (max(flop_rate, 1e8), max(byte_rate, 1e8))
            else:
                self.rates = (NOMINAL_FLOP_RATE, NOMINAL_BYTE_RATE)
        return roofline_cost(g, n, self.rates)

    def train(self) -> dict | None:
        """Fit the op-cost model on every op with a known cost so far (when any arrived since the last
        fit); returns the metrics passed to ``on_retrain``, None when nothing was trained."""
        n = len(self.y)
        if self.model is None or n == self.trained_on or n < int(self.model.options["min_samples"]):
            return None
        X, y = np.asarray(self.X), np.asarray(self.y)
        metrics: dict = {"n_train": n, "target": "op seconds"}
        fresh = n - self.trained_on
        if self.model.trained and fresh >= 3:  # prequential: ops the previous fit never saw
            metrics.update(self.model.quality(X[self.trained_on:], y[self.trained_on:], k=max(1, fresh // 4)),
                           holdout="new ops")
        else:  # a first fit: quality of a fit on a random 80% of the ops, on the other 20%
            perm = np.random.default_rng(n).permutation(n)
            hold, rest = perm[: n // 5], perm[n // 5:]
            probe = type(self.model)(**self.model.options).fit(X[rest], y[rest])
            if probe.trained and len(hold) >= 3:
                metrics.update(probe.quality(X[hold], y[hold], k=max(1, len(hold) // 4)), holdout=f"random {len(hold)}")
        self.model.fit(X, y)
        self.trained_on = n
        if self.on_retrain is not None and self.model.trained:
            self.on_retrain(metrics, self.model.save())
        return metrics

    # -- graphs ----------------------------------------------------------------------
    def graph_cost(self, g: Graph, timed: bool = False) -> float:
        """Sum of the counted ops' costs, plus a 1 ns tie-breaker per op (equal cost: fewer ops). ``timed``:
        every op not known yet is timed, whatever ``max_measure`` (only an op whose timing fails is estimated)."""
        if not timed:
            return graph_cost(g, self.op_cost, self.fusion)
        cap, self.max_measure = self.max_measure, None
        try:
            return graph_cost(g, self.op_cost, self.fusion)
        finally:
            self.max_measure = cap

    def confirm(self, g: Graph) -> int:
        """Time the ops of ``g`` whose cost was only estimated (the ones a search result relies on), beyond
        ``max_measure``; returns how many distinct ops were timed (an op that occurs at several nodes is
        timed once). ``graph_cost(g)`` then rests on timed ops only (but those whose timing failed)."""
        todo = list({g.op_key(n): n for n in g.runtime_nodes()
                     if g.op_key(n) in self.predicted_keys and g.op_key(n) not in self.memo
                     and g.op_key(n) not in self.failed}.values())
        if self.runner is None or not todo:
            return 0
        before = self.measured
        cap, self.max_measure = self.max_measure, None
        try:
            for n in todo:
                self.op_cost(g, n)
        finally:
            self.max_measure = cap
        return self.measured - before


class GraphCostRunner(Runner):
    """Measures graph candidates of a ``GraphSpace`` by their cost from :class:`OpCosts` (seconds, summed
    from op costs: cheap, which is what lets a search evaluate thousands of graphs). The device is the op
    runner's, with the cost definition among its properties.

    ``timed``: every op of a graph is timed (``OpCosts.graph_cost(timed=True)``), so the cost stored is a
    sum of measurements; a graph one of whose ops cannot be timed is a RUNTIME_ERROR naming the op, not a
    cost partly guessed. Otherwise ops beyond the cap are estimated (``meta["ops_estimated"]`` counts them)
    and the caller stores the trials on :func:`estimating_device` (``device`` may be set to it)."""

    def __init__(self, space, op_costs: OpCosts, timed: bool = False):
        self.space, self.op_costs, self.timed = space, op_costs, timed
        d = op_costs.device
        cost = "sum of op costs" + (", ops fused into their producer by onnxruntime free" if op_costs.fusion else "")
        self.device = Device(d.name, d.kind, {**d.properties, "graph_cost": cost})

    def measure(self, task, candidates: list[Candidate]) -> list[Measurement]:
        out = []
        for c in candidates:
            t0 = time.perf_counter()
            if not self.space.contains(c):
                out.append(Measurement(c, Status.INVALID, error="not a rewrite sequence of this graph "
                                                                "(a rule does not apply, or the key differs)"))
                continue
            g = self.space.graph(c)
            estimated = self.op_costs.estimated
            cost = self.op_costs.graph_cost(g, timed=self.timed)
            meta = {"ops_estimated": self.op_costs.estimated - estimated, "ops_measured": self.op_costs.measured}
            if self.timed and meta["ops_estimated"]:  # its cost would rest on a guess: not a measurement
                failed = self.op_costs.failed
                n = next((n for n in counted_nodes(g, self.op_costs.fusion) if g.op_key(n) in failed), None)
                why = (f"op {n.op} (node {n.outputs[0]!r}) could not be timed alone ({failed[g.op_key(n)][:300]})"
                       if n is not None else f"{meta['ops_estimated']} of its ops could not be timed")
                out.append(Measurement(c, Status.RUNTIME_ERROR, error=f"{why}; the graph's cost would rest on a guess",
                                       run_s=time.perf_counter() - t0, meta=meta))
                continue
            out.append(Measurement(c, Status.OK, [cost], cost, run_s=time.perf_counter() - t0, meta=meta))
        return out


# ---- backends ----------------------------------------------------------------------

@dataclass
class GraphBackend:
    """What a device needs: an op runner, the label its op keys carry, whether the runtime's fusions
    count as free, and whole-model latency (``compare_latency(models, rounds=)``, list of dicts with
    ``times``, ``median_s``, ``iqr_s``) and numeric check (``max_errors(ref, new)``)."""

    name: str
    op_runner: Runner
    label: str
    fusion: bool
    compare_latency: Callable
    max_errors: Callable

    def check_runs(self, model) -> None:
        """One clear error when this backend cannot run ``model`` at all (an op it lacks, a graph it refuses)."""
        try:
            self.max_errors(model, model, trials=1)
        except AutotuneError:  # says what it is already (torch: the op it has no mapping for, and its node)
            raise
        except Exception as exc:  # noqa: BLE001 - the backend's own errors (onnxruntime's, torch's)
            raise UsageError(f"{self.name} cannot run the model: {first_line(exc)}") from None


def first_line(exc: Exception) -> str:
    """The first line of an error's message (at most 500 characters; its type when it has none), without the
    C++ source location onnxruntime puts before the reason (:func:`runtime_message`)."""
    return runtime_message(exc)


def _onnxruntime(threads: int = 1) -> GraphBackend:
    from autotune.runners import onnx_ops

    return GraphBackend("onnxruntime", onnx_ops.OnnxOpRunner(threads=threads), "cpu", True,
                        partial(onnx_ops.compare_latency, threads=threads), onnx_ops.max_errors)


def _torch(device: str, threads: int = 1) -> GraphBackend:
    from autotune.runners import torch_ops

    runner = torch_ops.TorchOpRunner(device)
    return GraphBackend("torch", runner, runner.device.name, False, partial(torch_ops.compare_latency, device=device),
                        partial(torch_ops.max_errors, device=device))


#: device name -> backend factory (threads -> GraphBackend); "torch-cpu" runs the torch path on the CPU
BACKENDS: dict[str, Callable[[int], GraphBackend]] = {
    "cpu": _onnxruntime, "cuda": partial(_torch, "cuda"), "torch-cpu": partial(_torch, "cpu"),
}
TORCH_DEVICES = {"cuda": "cuda", "torch-cpu": "cpu"}
UNLISTED = {"torch-cpu"}


def check_device(device: str) -> None:
    """Raise one clear error when ``device`` is unknown or cannot run here (no torch, no GPU)."""
    if device not in BACKENDS:
        valid = ", ".join(d for d in BACKENDS if d not in UNLISTED)
        raise UsageError(f"unknown device {device!r}; valid: {valid}")
    if device in TORCH_DEVICES:
        from autotune.runners.torch_ops import resolve_device

        resolve_device(TORCH_DEVICES[device])


def make_backend(device: str = "cpu", threads: int = 1) -> GraphBackend:
    check_device(device)
    return BACKENDS[device](threads)
