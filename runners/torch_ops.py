"""Op runner, end-to-end latency and numeric check through PyTorch (eager), on a GPU or the CPU.

* :func:`run_op` maps one ONNX op of the graph IR to torch; an op without a mapping
  raises :class:`UnsupportedOp` naming it (see ``TORCH_OPS``).
* :class:`TorchOpRunner` times single-op specs (the payloads of
  :func:`autotune.runners.onnx_ops.op_spec`), like ``OnnxOpRunner``.
* :class:`TorchGraph` interprets a whole model (ONNX or graph IR) node by node;
  :func:`compare_latency` and :func:`max_errors` mirror those of ``onnx_ops``.

On CUDA a run is timed with CUDA events after warm-up, on the CPU with the wall
clock. TF32 is switched off while running, so results keep float32 (ONNX)
precision. Outputs of Transpose and Split are made contiguous (materialised, as
in ONNX runtimes) so that each op's cost is its own.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np

from autotune.errors import MissingDependencyError, UsageError, argument
from autotune.runners.base import Runner
from autotune.runners.onnx_ops import output_errors
from autotune.runners.timing import Protocol, interleaved, repeat
from autotune.types import Candidate, Device, Measurement, Status, median


class UnsupportedOp(UsageError):
    """The torch backend has no mapping for an op."""


CUDA, CPU = argument("device='cuda'", "--device cuda"), argument("device='cpu'", "--device cpu")


def _torch():
    try:
        import torch
    except ImportError as exc:
        raise MissingDependencyError("the torch backend needs 'torch'; install it with pip install "
                                     f"'autotune[torch]' (a CUDA build of torch for {CUDA})") from exc
    return torch


def resolve_device(device: str):
    """``torch.device`` for "cuda" or "cpu", with one clear error when it cannot run here."""
    torch = _torch()
    if device not in ("cuda", "cpu"):
        raise UsageError(f"unknown torch device {device!r}; valid: cuda, cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"{CUDA} needs a CUDA GPU, but torch {torch.__version__} sees none "
                         "(torch.cuda.is_available() is false); install a CUDA build of torch on a machine "
                         f"with an NVIDIA GPU, or use {CPU}")
    return torch.device(device)


def device_info(dev) -> Device:
    """The database device: the GPU's name on CUDA, so that CPU and GPU op costs never mix."""
    torch = _torch()
    if dev.type == "cuda":
        cap = torch.cuda.get_device_capability(dev)
        return Device(torch.cuda.get_device_name(dev), "cuda", {"backend": "torch", "torch": torch.__version__,
                                                               "cuda": torch.version.cuda,
                                                               "capability": f"{cap[0]}.{cap[1]}"})
    return Device("cpu-torch", "cpu", {"backend": "torch", "torch": torch.__version__,
                                       "threads": torch.get_num_threads()})


@contextlib.contextmanager
def _running(torch):
    """Inference mode, TF32 off (restored afterwards)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        with torch.inference_mode():
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


# ---- op mapping -------------------------------------------------------------

def _pad_arg(p, sp):
    """ONNX pads (begins then ends) as torch.nn.functional.pad's (last dim first)."""
    return [v for i in reversed(range(sp)) for v in (p[i], p[sp + i])]


def _native_pad(p, sp, k):
    """Symmetric pads torch's pooling accepts directly (at most half the kernel), else None."""
    if all(p[i] == p[sp + i] and 2 * p[i] <= k[i] for i in range(sp)):
        return [p[i] for i in range(sp)]
    return None


def _conv(F, ins, a, outs):
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    sp = x.dim() - 2
    p = a.get("pads") or (0,) * (2 * sp)
    if any(p[i] != p[sp + i] for i in range(sp)):
        x, pad = F.pad(x, _pad_arg(p, sp)), [0] * sp
    else:
        pad = list(p[:sp])
    fn = (F.conv1d, F.conv2d, F.conv3d)[sp - 1]
    return [fn(x, w, b, list(a.get("strides") or [1] * sp), pad, list(a.get("dilations") or [1] * sp),
               a.get("group", 1))]


def _pool(F, ins, a, outs, kind):
    torch = _torch()
    x = ins[0]
    sp = x.dim() - 2
    k = list(a["kernel_shape"])
    s, p = list(a.get("strides") or [1] * sp), a.get("pads") or (0,) * (2 * sp)
    ceil = bool(a.get("ceil_mode", 0))
    native = _native_pad(p, sp, k)
    if kind == "MaxPool":
        fn = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[sp - 1]
        if native is not None:
            return [fn(x, k, s, native, ceil_mode=ceil)]
        return [fn(F.pad(x, _pad_arg(p, sp), value=-float("inf")), k, s, 0, ceil_mode=ceil)]
    fn = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[sp - 1]
    include = bool(a.get("count_include_pad", 0))
    if native is not None:
        return [fn(x, k, s, native, ceil_mode=ceil, count_include_pad=include)]
    y = fn(F.pad(x, _pad_arg(p, sp)), k, s, 0, ceil_mode=ceil)
    if not include:  # divide by the number of real (unpadded) elements of each window
        ones = torch.ones((1, 1) + tuple(x.shape[2:]), dtype=x.dtype, device=x.device)
        y = y / fn(F.pad(ones, _pad_arg(p, sp)), k, s, 0, ceil_mode=ceil)
    return [y]


def _gemm(F, ins, a, outs):
    x = ins[0].t() if a.get("transA") else ins[0]
    w = ins[1].t() if a.get("transB") else ins[1]
    y = x @ w
    if a.get("alpha", 1.0) != 1.0:
        y = y * a["alpha"]
    if len(ins) > 2 and ins[2] is not None:
        y = y + (ins[2] if a.get("beta", 1.0) == 1.0 else a["beta"] * ins[2])
    return [y]


def _layer_norm(F, ins, a, outs):
    x = ins[0]
    ax = a.get("axis", -1) % x.dim()
    return [F.layer_norm(x, tuple(x.shape[ax:]), ins[1], ins[2] if len(ins) > 2 else None, a.get("epsilon", 1e-5))]


def _gather(F, ins, a, outs):
    data, idx = ins[0], ins[1].long()
    ax = a.get("axis", 0) % data.dim()
    idx = idx % data.shape[ax]  # ONNX allows negative indices
    return [data.index_select(ax, idx.reshape(-1)).reshape(outs[0])]


def _gather_elements(F, ins, a, outs):
    data, idx = ins[0], ins[1].long()
    ax = a.get("axis", 0) % data.dim()
    return [data.gather(ax, idx % data.shape[ax])]


def _one(fn):
    return lambda F, ins, a, outs: [fn(*ins)]


def _attention(F, ins, a, outs):
    """MultiHeadAttention (query, key, value[, "", "", attention_bias]) as one scaled_dot_product_attention."""
    q, k, v, *rest = [t for t in ins if t is not None]
    (b, s, _), n, ln = q.shape, a["num_heads"], k.shape[1]
    heads = [t.reshape(b, m, n, -1).transpose(1, 2) for t, m in ((q, s), (k, ln), (v, ln))]
    out = F.scaled_dot_product_attention(*heads, attn_mask=rest[0] if rest else None, scale=a.get("scale"))
    return [out.transpose(1, 2).reshape(outs[0])]


TORCH_OPS = {
    "Add": _one(lambda x, y: x + y),
    "Sub": _one(lambda x, y: x - y),
    "Mul": _one(lambda x, y: x * y),
    "Div": _one(lambda x, y: x / y),
    "Sqrt": _one(lambda x: x.sqrt()),
    "Relu": _one(lambda x: x.relu()),
    "Sigmoid": _one(lambda x: x.sigmoid()),
    "Tanh": _one(lambda x: x.tanh()),
    "Erf": _one(lambda x: x.erf()),
    "FusedGelu": lambda F, ins, a, outs: [F.gelu(ins[0])],
    "FusedFastGelu": lambda F, ins, a, outs: [F.gelu(ins[0], approximate="tanh")],
    "MultiHeadAttention": _attention,
    "Pow": _one(lambda x, y: x.pow(y)),
    "IsNaN": _one(lambda x: x.isnan()),
    "Where": _one(lambda c, x, y: _torch().where(c.bool(), x, y)),
    "Gather": _gather,
    "GatherElements": _gather_elements,
    "Expand": lambda F, ins, a, outs: [ins[0].expand(outs[0])],  # static shapes: the IR knows the target
    "Identity": _one(lambda x: x),
    "MatMul": _one(lambda x, y: x @ y),
    "Gemm": _gemm,
    "Conv": _conv,
    "BatchNormalization": lambda F, ins, a, outs: [F.batch_norm(ins[0], ins[3], ins[4], ins[1], ins[2], False, 0.0,
                                                                a.get("epsilon", 1e-5))],
    "LayerNormalization": _layer_norm,
    "MaxPool": lambda F, ins, a, outs: _pool(F, ins, a, outs, "MaxPool"),
    "AveragePool": lambda F, ins, a, outs: _pool(F, ins, a, outs, "AveragePool"),
    "GlobalAveragePool": lambda F, ins, a, outs: [ins[0].mean(dim=tuple(range(2, ins[0].dim())), keepdim=True)],
    "Softmax": lambda F, ins, a, outs: [ins[0].softmax(a.get("axis", -1))],
    "Concat": lambda F, ins, a, outs: [_torch().cat(ins, a["axis"])],
    "Split": lambda F, ins, a, outs: [t.contiguous() for t in ins[0].split(list(a["split"]), a.get("axis", 0))],
    "Transpose": lambda F, ins, a, outs: [ins[0].permute(a.get("perm") or
                                                        tuple(reversed(range(ins[0].dim())))).contiguous()],
    "Reshape": lambda F, ins, a, outs: [ins[0].reshape(outs[0])],  # static shapes: the IR knows the target
    "Flatten": lambda F, ins, a, outs: [ins[0].reshape(outs[0])],
}


def check_op(op: str, where: str = "") -> None:
    if op not in TORCH_OPS:
        raise UnsupportedOp(f"the torch backend has no mapping for op {op}{where}; "
                            f"supported: {', '.join(sorted(TORCH_OPS))}")


def run_op(op: str, inputs: list, attrs: dict, out_shapes: list) -> list:
    """Run one op on torch tensors (``None`` for an absent optional input); a list of outputs."""
    check_op(op)
    import torch.nn.functional as F
    ins = list(inputs)
    while ins and ins[-1] is None:
        ins.pop()
    return TORCH_OPS[op](F, ins, attrs, [tuple(s) for s in out_shapes])


def spec_inputs(spec: dict, dev, seed: int = 0) -> list:
    """Random tensors for an op spec (variances and square-root inputs positive); None where absent."""
    torch = _torch()
    rng = np.random.default_rng(seed)
    out = []
    for i, inp in enumerate(spec["inputs"]):
        if inp is None or (spec["op"] == "Reshape" and i == 1):
            out.append(None)
            continue
        v = rng.standard_normal(inp[0]).astype(inp[1])
        if spec["op"] == "Sqrt" or (spec["op"] == "BatchNormalization" and i == 4):
            v = np.abs(v)
        out.append(torch.from_numpy(np.ascontiguousarray(v)).to(dev))
    return out


def _timer(torch, fn, dev):
    """A callable that runs ``fn`` once and returns its seconds (CUDA events on a GPU)."""
    if dev.type != "cuda":
        def timed():
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
        return timed
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timed_cuda():
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    return timed_cuda


class TorchOpRunner(Runner):
    """Times one op spec per candidate with eager PyTorch on ``device`` ("cuda" or "cpu")."""

    def __init__(self, device: str = "cuda", min_time: float = 0.01):
        self.torch = _torch()
        self.dev = resolve_device(device)
        self.protocol = Protocol(warmup=3, min_repeats=5, max_repeats=50, min_time_s=min_time, budget_s=2.0)
        self.device = device_info(self.dev)

    def measure(self, task, candidates: list[Candidate]) -> list[Measurement]:
        with _running(self.torch):
            return [self._one(c) for c in candidates]

    def _one(self, c: Candidate) -> Measurement:
        spec, cuda = c.payload, self.dev.type == "cuda"
        t0 = time.perf_counter()
        try:
            check_op(spec["op"])
            ins = spec_inputs(spec, self.dev)
            build = time.perf_counter() - t0
            times = repeat(_timer(self.torch, lambda: run_op(spec["op"], ins, spec["attrs"], spec["outputs"]),
                                  self.dev), self.protocol)
        except Exception as exc:  # noqa: BLE001 - errors are data (an unsupported op names itself)
            return Measurement(c, Status.RUNTIME_ERROR, error=f"{type(exc).__name__}: {exc}"[:500])
        # CPU: the fastest repeat (the least disturbed on a shared machine); GPU: the median
        return Measurement(c, Status.OK, times, cost=median(times) if cuda else min(times), build_s=build,
                           run_s=sum(times), meta={"protocol": f"torch eager on {self.dev.type}, " + (
                               "CUDA events, cost = median" if cuda else "wall clock, cost = min"),
                               **self.protocol.to_json()})


# ---- whole graphs -------------------------------------------------------------

def _graph(model):
    from autotune.search_spaces.graphs import onnx_io
    from autotune.search_spaces.graphs.ir import Graph
    return (model if isinstance(model, Graph) else onnx_io.from_onnx(model)).folded()


class TorchGraph:
    """A model (ONNX ModelProto or graph IR) run node by node with torch on ``dev``."""

    def __init__(self, model, dev):
        torch = _torch()
        self.g = g = _graph(model)
        for n in g.nodes:
            check_op(n.op, f" (node {n.outputs[0]!r})")
        self.dev = dev
        self.weights = {k: torch.from_numpy(np.array(v)).to(dev) for k, v in g.weights.items()}

    def feeds(self, seed: int = 0) -> dict:
        """Random inputs, the same as ``onnx_ops.random_feeds`` for the same seed."""
        from autotune.search_spaces.graphs.inputs import random_inputs, table_bounds

        torch, g = _torch(), self.g
        bounds = table_bounds((n.inputs[1], g.weights[n.inputs[0]].shape[n.a.get("axis", 0)]) for n in g.nodes
                              if n.op == "Gather" and n.inputs[0] in g.weights)
        arrays = random_inputs([(k, s, d) for k, (s, d) in g.inputs.items()], seed, bounds)
        return {k: torch.from_numpy(v).to(self.dev) for k, v in arrays.items()}

    def __call__(self, feeds: dict) -> list:
        vals = {**self.weights, **feeds}
        g = self.g
        for n in g.nodes:
            res = run_op(n.op, [vals[t] if t else None for t in n.inputs], n.a, [g.shape[t] for t in n.outputs])
            if len(res) != len(n.outputs):
                raise UnsupportedOp(f"the torch backend computes {len(res)} output(s) of op {n.op} "
                                    f"(node {n.outputs[0]!r}), the model asks for {len(n.outputs)}")
            vals.update(zip(n.outputs, res))
        return [vals[t] for t in g.outputs]


def compare_latency(models: list, rounds: int = 15, device: str = "cuda") -> list[dict]:
    """Interleaved end-to-end timing on torch: each round runs every model once. Median and spread per model."""
    torch = _torch()
    dev = resolve_device(device)
    graphs = [TorchGraph(m, dev) for m in models]
    feeds = graphs[0].feeds()
    with _running(torch):
        return interleaved([_timer(torch, lambda g=g: g(feeds), dev) for g in graphs], rounds)


def max_errors(ref_model, new_model, trials: int = 3, device: str = "cuda") -> dict:
    """Largest absolute and relative output difference of two models on torch over ``trials`` random inputs."""
    torch = _torch()
    dev = resolve_device(device)
    a, b = TorchGraph(ref_model, dev), TorchGraph(new_model, dev)
    with _running(torch):
        pairs = [(x.double().cpu().numpy(), y.double().cpu().numpy())
                 for seed in range(trials) for feeds in [a.feeds(seed)] for x, y in zip(a(feeds), b(feeds))]
    return {**output_errors(pairs), "trials": trials}
