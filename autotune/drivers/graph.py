"""optimize(): search a GraphSpace by predicted cost, then check and measure the winner end to end.

The final graph is returned only when it passes the numeric check and is faster
than the original beyond measurement noise; otherwise the original graph is returned.
The device picks the backend that times ops and whole models: "cpu" is onnxruntime
(all of its own optimisations on), "cuda" is eager PyTorch on the GPU, and
"torch-cpu" the same torch path on the CPU (for tests).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from autotune.algorithms.taso_queue import Backtracking
from autotune.search_spaces.graphs.cost import DatabaseOpCostCache, OpCostCache, OpCostModel
from autotune.search_spaces.graphs.ir import Graph
from autotune.search_spaces.graphs.space import GraphCostRunner, GraphSpace

from autotune.algorithms import registry
from autotune.errors import UsageError
from autotune.types import Candidate

ALGORITHMS = ("backtracking", "engine-backtracking", "mcmc", "evolutionary", "random")
TORCH_DEVICES = {"cuda": "cuda", "torch-cpu": "cpu"}  # optimizer device -> torch device


def check_device(device: str) -> None:
    """Raise one clear error when ``device`` is unknown or cannot run here (no torch, no GPU)."""
    if device == "cpu":
        return
    if device not in TORCH_DEVICES:
        raise UsageError(f"unknown device {device!r}; valid: cpu, cuda")
    from autotune.runners.torch_ops import resolve_device
    resolve_device(TORCH_DEVICES[device])


def latency_backend(device: str = "cpu", threads: int = 1):
    """(compare_latency, max_errors) of a device, both called as fn(models, rounds=...) and fn(ref, new)."""
    from functools import partial
    if device == "cpu":
        from autotune.runners import onnx_ops
        return partial(onnx_ops.compare_latency, threads=threads), onnx_ops.max_errors
    check_device(device)
    from autotune.runners import torch_ops
    dev = TORCH_DEVICES[device]
    return partial(torch_ops.compare_latency, device=dev), partial(torch_ops.max_errors, device=dev)


@dataclass
class SearchResult:
    space: GraphSpace
    best: Candidate
    graph: Graph
    cost_before: float
    cost_after: float
    evaluated: int
    search_s: float
    algorithm: str
    trace: list = field(default_factory=list)

    @property
    def applied(self) -> list[str]:
        return [step[0] for step in self.best.payload]


def make_search(name: str, alpha: float):
    if name not in ALGORITHMS:
        raise UsageError(f"unknown algorithm {name!r}; valid: {', '.join(ALGORITHMS)}")
    if name == "backtracking":
        # TASO's queue over complete graphs (no rollouts): on graph spaces it evaluates 2-5x more
        # graphs per second than the engine's tree backtracking, which "engine-backtracking" selects
        return Backtracking(alpha=alpha)
    if name == "engine-backtracking":
        return registry.make_algorithm("backtracking", alpha=alpha)
    return registry.make_algorithm(name)


def search(graph: Graph, algorithm: str = "backtracking", alpha: float = 1.05, budget: int = 2000,
           time_limit: float = 50.0, rules=None, cost_model: OpCostModel | None = None, seed: int = 0,
           batch: int = 16) -> SearchResult:
    """Search rewrites of ``graph`` minimising the sum of per-op costs."""
    t0 = time.perf_counter()
    cost_model = cost_model or OpCostModel()
    space = GraphSpace(graph, rules, cost_model)
    algo = make_search(algorithm, alpha).bind(space, np.random.default_rng(seed))
    runner = GraphCostRunner(space)
    root = space.initial()
    before = space.cost(root)
    best, best_cost, evaluated, trace = root, before, 0, []
    while evaluated < budget and time.perf_counter() - t0 < time_limit:
        cands = algo.ask(min(batch, budget - evaluated))
        if not cands:
            break
        results = runner.measure(space.task, cands)
        evaluated += len(results)
        algo.tell(results)
        for m in results:
            if m.ok and m.cost < best_cost:
                best, best_cost = m.candidate, m.cost
                trace.append((round(time.perf_counter() - t0, 3), evaluated, best_cost))
    return SearchResult(space, best, space.graph(best), before, best_cost, evaluated,
                        time.perf_counter() - t0, algorithm, trace)


def finalize(original_model, result: SearchResult, rounds: int = 25, threads: int = 1, tolerance: float = 1e-3,
             device: str = "cpu"):
    """Numeric check and interleaved end-to-end timing on ``device``; keeps the original unless the new graph
    is faster."""
    from autotune.search_spaces.graphs.onnx_io import to_onnx
    latency, max_errors = latency_backend(device, threads)
    new_model = to_onnx(result.graph)
    check = max_errors(original_model, new_model)
    check["passed"] = check["max_rel_error"] <= tolerance
    if result.best.payload:
        lat = latency([original_model, new_model], rounds=rounds)
    else:
        lat = latency([original_model], rounds=rounds) * 2
    before, after = lat[0], lat[1]
    faster, p_value = faster_beyond_noise(before["times"], after["times"])
    if faster and result.best.payload and check["passed"]:
        # confirm on fresh rounds: load drift on a shared machine can fake one significant run
        again = latency([original_model, new_model], rounds=rounds)
        faster, p2 = faster_beyond_noise(again[0]["times"], again[1]["times"])
        p_value = max(p_value, p2)
        if faster:
            before, after = ({"times": a["times"] + b["times"], **_stats(a["times"] + b["times"])}
                             for a, b in ((lat[0], again[0]), (lat[1], again[1])))
    kept = bool(result.best.payload) and check["passed"] and faster
    reason = ("faster beyond noise" if kept else "no rewrite found" if not result.best.payload else
              "numeric check failed" if not check["passed"] else "not faster beyond noise")
    return (new_model if kept else original_model), {
        "check": check, "kept": kept, "reason": reason,
        "latency_before": {k: v for k, v in before.items() if k != "times"},
        "latency_after": {k: v for k, v in after.items() if k != "times"},
        "measured_speedup": before["median_s"] / after["median_s"] if kept else 1.0, "sign_test_p": p_value,
        "candidate_speedup": before["median_s"] / after["median_s"],
    }


def _stats(ts):
    q1, q3 = np.percentile(ts, [25, 75])
    return {"median_s": float(np.median(ts)), "iqr_s": float(q3 - q1), "min_s": min(ts)}


def faster_beyond_noise(before: list[float], after: list[float], min_gain: float = 0.01, alpha: float = 0.05):
    """Paired one-sided sign test over interleaved rounds, plus a minimum median gain.

    Interleaving makes round i of both models see the same machine load, so the sign
    of each paired difference is robust to load drift on a shared machine."""
    n = len(before)
    wins = sum(a < b for a, b in zip(after, before))
    p = sum(math.comb(n, k) for k in range(wins, n + 1)) / 2 ** n
    gain = float(np.median(before)) / float(np.median(after)) - 1.0
    return bool(p < alpha and gain >= min_gain), p


def default_cost_model(cache_path: str | None = None, measure: bool = True, max_measure: int = 400,
                       threads: int = 1, db=None, device: str = "cpu") -> OpCostModel:
    """Per-op costs measured on ``device`` (onnxruntime on "cpu", torch otherwise), cached in the experiment
    database ``db`` when given (as trials of task kind "op" under the runner's device), else in memory or the
    JSON file ``cache_path``. Eager torch fuses nothing, so its graph cost is the plain sum of op costs."""
    runner, label = None, "cpu"
    if device == "cpu":
        from autotune.runners.onnx_ops import OnnxOpRunner
        if measure or db is not None:
            runner = OnnxOpRunner(threads=threads)
    else:
        check_device(device)
        from autotune.runners.torch_ops import TorchOpRunner
        runner = TorchOpRunner(TORCH_DEVICES[device])
        label = runner.device.name
    cache = DatabaseOpCostCache(db, runner.device, label) if db is not None else OpCostCache(cache_path)
    return OpCostModel(runner if measure else None, cache, max_measure=max_measure, device=label,
                       fusion=device == "cpu")
