"""Op runner and end-to-end latency through onnxruntime on the CPU.

* :class:`OnnxOpRunner` times single-op models (task kind "op"): each candidate's
  payload is an op spec (op, attributes, input shapes/dtypes and which inputs are
  weights). Weights become initializers, activations random inputs.
* :func:`compare_latency` times whole models interleaved (all onnxruntime
  optimisations on) and reports median and spread per model.
  :func:`blocked_latency` repeats that over blocks of fresh sessions.
* :func:`max_errors` runs two models on the same random inputs.

The GPU path (eager PyTorch, ``--device cuda``) is :mod:`autotune.runners.torch_ops`.
"""

from __future__ import annotations

import time

import numpy as np

from autotune.errors import MissingDependencyError
from autotune.runners.base import Runner
from autotune.runners.timing import interleaved, summary
from autotune.search_spaces.graphs import ops
from autotune.search_spaces.graphs.inputs import ORT_TYPES, index_bounds, random_inputs
from autotune.search_spaces.graphs.onnx_prepare import runtime_message
from autotune.types import Candidate, Device, Measurement, Status


def _ort():
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise MissingDependencyError("the onnxruntime runner needs 'onnxruntime'; "
                                     "install it with pip install 'autotune[graphs]'") from exc
    return ort


def session(model, threads: int = 1, level: str = "all"):
    ort = _ort()
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    if threads > 1:  # idle workers must not spin: interleaved timing keeps several sessions alive at once
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # fatal only: a failing run raises its error, which the caller reports; logged too, it would be a second,
    # raw copy on standard error (an op that cannot be timed alone, a model onnxruntime cannot run)
    so.log_severity_level = 4
    so.graph_optimization_level = {"all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
                                   "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
                                   "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC}[level]
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def random_feeds(sess, seed: int = 0, model=None) -> dict:
    """:func:`~autotune.search_spaces.graphs.inputs.random_inputs` for a session's inputs (integer bounds from
    ``model``'s tables)."""
    return random_inputs([(i.name, i.shape, ORT_TYPES.get(i.type, np.float32)) for i in sess.get_inputs()], seed,
                         index_bounds(model))


#: the operator set single-op models are written at, unless their spec names another (``op_spec``'s ``opset``)
OP_OPSET = 17


def op_spec(op: str, attrs: dict, inputs: list, outputs: list, opset: int | None = None, domain: str = "",
            values: list | None = None, output_dtypes: list | None = None) -> dict:
    """JSON op spec: inputs as [shape, dtype, is_weight] (None for an absent optional input). ``opset``: the
    model's operator set (an op's inputs and attributes differ between opsets: ReduceMean's axes are an input
    from 18 on); ``domain``: another operator set the op is in; ``values``: per input, the values of a constant
    whose values decide what the op computes (Squeeze's axes, Slice's starts), else None; ``output_dtypes``:
    the outputs' dtypes (an op's need not be its input's: Cast, Equal, Shape). Each is in the spec only when it
    says something (an opset other than ``OP_OPSET``, a domain, a value, an output that is not float32), so that
    the spec, and the key of its stored timing, of an op that needs none is the same whatever model it is in."""
    spec = {"op": op, "attrs": {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()},
            "inputs": [None if i is None else [list(i[0]), i[1], bool(i[2])] for i in inputs],
            "outputs": [list(s) for s in outputs]}
    if opset is not None and opset != OP_OPSET:
        spec["opset"] = int(opset)
    if domain:
        spec["domain"] = domain
    if values and any(v is not None for v in values):
        spec["values"] = list(values)
    if output_dtypes and any(d != "float32" for d in output_dtypes):
        spec["output_dtypes"] = [str(d) for d in output_dtypes]
    return spec


def spec_weight(spec: dict, i: int, rng) -> np.ndarray:
    """Input ``i`` of an op spec, a weight: its values when the spec carries them, else zeros for integers (an
    index valid in any table) and random values otherwise."""
    shape, dtype, _ = spec["inputs"][i]
    given = (spec.get("values") or [None] * (i + 1))[i]
    if given is not None:
        return np.asarray(given, dtype=dtype).reshape(shape)
    if np.issubdtype(np.dtype(dtype), np.integer):
        return np.zeros(shape, dtype=dtype)
    return rng.standard_normal(shape).astype(dtype)


def single_op_model(spec: dict, seed: int = 0):
    """The spec's op alone as a model at its opset: weights as initializers, activations as inputs."""
    from onnx import helper, numpy_helper

    from autotune.search_spaces.graphs.onnx_io import ir_version_for

    rng = np.random.default_rng(seed)
    opset = spec.get("opset", OP_OPSET)
    ins, inits, vis = [], [], []
    attrs = dict(spec["attrs"])
    for i, inp in enumerate(spec["inputs"]):
        if inp is None:
            ins.append("")
            continue
        shape, dtype, weight = inp
        name = f"in{i}"
        ins.append(name)
        if spec["op"] == "Reshape" and i == 1:
            continue  # the target shape comes from 'outputs'
        if weight:
            inits.append(numpy_helper.from_array(spec_weight(spec, i, rng), name))
        else:
            vis.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape))
    if spec["op"] == "Reshape":
        ins[1] = "shape"
        inits = [t for t in inits if t.name != "in1"]
        inits.append(numpy_helper.from_array(np.asarray(spec["outputs"][0], dtype=np.int64), "shape"))
    if spec["op"] == "Split":  # the graph IR's own ops are timed at OP_OPSET, where the sizes are an input
        inits.append(numpy_helper.from_array(np.asarray(attrs.pop("split"), dtype=np.int64), "split"))
        ins.append("split")
    outs = [f"out{i}" for i in range(len(spec["outputs"]))]
    op_type, domain = ops.onnx_type(spec["op"], spec.get("domain", ""))
    node = helper.make_node(op_type, ins, outs, domain=domain or None, **attrs)
    dtypes = spec.get("output_dtypes") or ["float32"] * len(outs)
    ovis = [helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(np.dtype(d)), s)
            for o, d, s in zip(outs, dtypes, spec["outputs"])]
    g = helper.make_graph([node], "op", vis, ovis, inits)
    ids = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, ops.DOMAIN_VERSIONS.get(domain, 1))]
                                              if domain else [])
    m = helper.make_model(g, opset_imports=ids)
    m.ir_version = ir_version_for(ids)
    return m


def time_session(sess, feeds, min_time: float = 0.01, max_repeats: int = 50, warmup: int = 2,
                 min_repeats: int = 5) -> list[float]:
    for _ in range(warmup):
        sess.run(None, feeds)
    times, total = [], 0.0
    while (total < min_time or len(times) < min_repeats) and len(times) < max_repeats:
        t0 = time.perf_counter()
        sess.run(None, feeds)
        dt = time.perf_counter() - t0
        times.append(dt)
        total += dt
    return times


class OnnxOpRunner(Runner):
    """Times one op per candidate with onnxruntime on the CPU (one thread by default)."""

    def __init__(self, threads: int = 1, min_time: float = 0.01):
        ort = _ort()
        self.threads, self.min_time = threads, min_time
        self._overhead: float | None = None
        self.device = Device("cpu-onnxruntime", "cpu", {"onnxruntime": ort.__version__, "threads": threads})

    @property
    def overhead(self) -> float:
        """Fixed cost of one InferenceSession.run call (a one-element Identity), subtracted from op times:
        inside a whole model an op does not pay it."""
        if self._overhead is None:
            spec = op_spec("Identity", {}, [((1,), "float32", False)], [(1,)])
            sess = session(single_op_model(spec), self.threads)
            self._overhead = min(time_session(sess, random_feeds(sess), 0.02, max_repeats=200))
        return self._overhead

    def measure(self, task, candidates: list[Candidate]) -> list[Measurement]:
        out = []
        overhead = self.overhead if candidates else 0.0
        for c in candidates:
            t0 = time.perf_counter()
            try:
                sess = session(single_op_model(c.payload), self.threads)
                build = time.perf_counter() - t0
                raw = time_session(sess, random_feeds(sess), self.min_time)
                times = [max(t - overhead, 1e-8) for t in raw]
                # cost = the fastest repeat: on a shared machine it is the least disturbed one
                out.append(Measurement(c, Status.OK, times, cost=min(times), build_s=build, run_s=sum(raw),
                                       meta={"protocol": "ort single-op, warmup 2, repeats >= 5 and >= min_time, "
                                                         "times net of the per-run overhead, cost = min",
                                             "run_overhead_s": overhead}))
            except Exception as exc:  # noqa: BLE001 - errors are data
                out.append(Measurement(c, Status.RUNTIME_ERROR, error=f"{type(exc).__name__}: {runtime_message(exc)}"))
        return out


def compare_latency(models: list, rounds: int = 15, threads: int = 1, min_time: float = 0.0) -> list[dict]:
    """Interleaved end-to-end timing: each round runs every model once. Median and spread (IQR) per model."""
    sessions = [session(m, threads) for m in models]
    feeds = random_feeds(sessions[0], model=models[0])

    def timer(s):
        def run() -> float:
            t0 = time.perf_counter()
            s.run(None, feeds)
            return time.perf_counter() - t0
        return run

    return interleaved([timer(s) for s in sessions], rounds)


def blocked_latency(models: list, rounds: int = 40, threads: int = 1, blocks: int = 5, seed: int = 0) -> list[dict]:
    """:func:`compare_latency` in ``blocks`` blocks of ``rounds // blocks`` rounds, each with fresh sessions
    created in a shuffled order. Two sessions of one model differ by a fixed offset of about 1% (memory
    placement), which interleaved rounds in one session cannot average out; across blocks it varies, so a
    difference that holds over the blocks is the models'. Per model: median and spread of every round,
    ``times``, and ``block_medians``."""
    rng = np.random.default_rng(seed)
    per = max(1, rounds // blocks)
    times: list[list[float]] = [[] for _ in models]
    block_medians: list[list[float]] = [[] for _ in models]
    for _ in range(blocks):
        order = rng.permutation(len(models))
        for i, r in zip(order, compare_latency([models[i] for i in order], rounds=per, threads=threads)):
            times[i] += r["times"]
            block_medians[i].append(r["median_s"])
    return [{**summary(ts), "times": ts, "block_medians": bm} for ts, bm in zip(times, block_medians)]


def max_errors(ref_model, new_model, trials: int = 3) -> dict:
    """Largest absolute and relative output difference over ``trials`` random inputs."""
    a, b = session(ref_model, level="none"), session(new_model, level="none")
    pairs = (pair for seed in range(trials) for feeds in [random_feeds(a, seed, ref_model)]
             for pair in zip(a.run(None, feeds), b.run(None, feeds)))
    return {**output_errors(pairs), "trials": trials}


def output_errors(pairs) -> dict:
    """Largest absolute and relative difference over (reference, new) output arrays."""
    abs_err = rel_err = 0.0
    for x, y in pairs:
        if x.size == 0:  # an empty output (a zero-size axis) differs nowhere
            continue
        d = float(np.abs(x - y).max())
        abs_err = max(abs_err, d)
        rel_err = max(rel_err, d / (float(np.abs(x).max()) + 1e-12))
    return {"max_abs_error": abs_err, "max_rel_error": rel_err}
