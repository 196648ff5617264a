"""The torch backend of optimize-graph: op mapping against the registry's numpy references, the op
runner, the whole-graph interpreter against onnxruntime, optimize_graph on torch (CPU here, GPU when
there is one), and the error of --device cuda without a GPU."""

import importlib.util
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.errors import MissingDependencyError, UsageError

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install -e '.[torch]')")
needs_onnx = pytest.mark.skipif(importlib.util.find_spec("onnx") is None or
                                importlib.util.find_spec("onnxruntime") is None,
                                reason="needs onnx and onnxruntime (pip install -e '.[graphs]')")


def _has_cuda() -> bool:
    if not HAS_TORCH:
        return False
    import torch
    return torch.cuda.is_available()


needs_cuda = pytest.mark.skipif(not _has_cuda(), reason="needs torch with CUDA and an NVIDIA GPU")


# ---- without torch or without a GPU -------------------------------------------

@pytest.mark.skipif(_has_cuda(), reason="a CUDA GPU is available")
def test_device_cuda_without_gpu_exits_2_with_one_sentence(tmp_path):
    r = CliRunner().invoke(app, ["optimize-graph", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "o.onnx"),
                                 "--device", "cuda"])
    assert r.exit_code == 2
    msg = r.output.strip()
    assert len(msg.splitlines()) == 1 and msg.startswith("error:") and "cuda" in msg.lower()
    assert ("CUDA GPU" in msg) if HAS_TORCH else ("autotune[torch]" in msg)


def test_missing_torch_names_the_extra(monkeypatch):
    from autotune.runners.graph import check_device
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    with pytest.raises(MissingDependencyError, match=r"autotune\[torch\]"):
        check_device("cuda")
    with pytest.raises(UsageError, match="valid: cpu, cuda"):
        check_device("tpu")


# ---- op mapping ------------------------------------------------------------

def _w(shape):
    return (shape, True)


def _x(shape):
    return (shape, False)


CASES = [  # (op, attrs, inputs as (shape, is_weight) or a constant array)
    ("Add", {}, [_x((2, 3, 4)), _w((4,))]),
    ("Sub", {}, [_x((2, 3)), _x((2, 3))]),
    ("Mul", {}, [_x((2, 3)), _w(())]),  # scalar multiply
    ("Div", {}, [_x((2, 3)), _x((1, 3))]),
    ("Sqrt", {}, [_x((5, 4))]),
    ("Relu", {}, [_x((2, 8))]),
    ("Sigmoid", {}, [_x((2, 8))]),
    ("Tanh", {}, [_x((2, 8))]),
    ("Identity", {}, [_x((3,))]),
    ("MatMul", {}, [_x((2, 3, 4)), _w((4, 5))]),
    ("Gemm", {"alpha": 0.5, "beta": 2.0, "transA": 0, "transB": 1}, [_x((3, 4)), _w((6, 4)), _w((6,))]),
    ("Gemm", {"alpha": 1.0, "beta": 1.0, "transA": 1, "transB": 0}, [_x((4, 3)), _w((4, 6))]),
    ("Conv", {"kernel_shape": (3, 3), "strides": (1, 1), "pads": (1, 1, 1, 1), "dilations": (1, 1), "group": 1},
     [_x((1, 4, 8, 8)), _w((6, 4, 3, 3)), _w((6,))]),
    ("Conv", {"kernel_shape": (3, 3), "strides": (2, 1), "pads": (0, 1, 2, 1), "dilations": (2, 1), "group": 2},
     [_x((2, 4, 9, 7)), _w((6, 2, 3, 3))]),
    ("Conv", {"kernel_shape": (3,), "strides": (1,), "pads": (1, 1), "dilations": (1,), "group": 1},
     [_x((1, 3, 10)), _w((5, 3, 3)), _w((5,))]),
    ("BatchNormalization", {"epsilon": 1e-5}, [_x((2, 3, 4, 4)), _w((3,)), _w((3,)), _w((3,)),
                                               np.array([0.5, 1.0, 2.0], np.float32)]),
    ("MaxPool", {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)}, [_x((1, 2, 9, 9))]),
    ("MaxPool", {"kernel_shape": (2, 2), "strides": (2, 2), "pads": (0, 0, 1, 1)}, [_x((1, 2, 7, 7))]),
    ("AveragePool", {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (0, 0, 0, 0)}, [_x((1, 2, 9, 9))]),
    ("AveragePool", {"kernel_shape": (3, 3), "strides": (1, 1), "pads": (1, 0, 1, 2), "count_include_pad": 1},
     [_x((1, 2, 6, 6))]),
    ("GlobalAveragePool", {}, [_x((2, 3, 5, 5))]),
    ("Softmax", {"axis": 1}, [_x((2, 5, 3))]),
    ("Concat", {"axis": 1}, [_x((2, 3, 4)), _x((2, 2, 4))]),
    ("Split", {"axis": 2, "split": (1, 3)}, [_x((2, 3, 4))]),
    ("Transpose", {"perm": (0, 2, 1)}, [_x((2, 3, 4))]),
    ("Reshape", {}, [_x((2, 3, 4)), np.array([0, -1], np.int64)]),
    ("Flatten", {"axis": 2}, [_x((2, 3, 4, 5))]),
    ("FusedGelu", {}, [_x((2, 3, 8))]),
    ("FusedFastGelu", {}, [_x((2, 3, 8))]),
    ("MultiHeadAttention", {"num_heads": 2, "scale": 0.3}, [_x((2, 5, 8)), _x((2, 7, 8)), _x((2, 7, 6))]),
    ("MultiHeadAttention", {"num_heads": 4}, [_x((1, 6, 16)), _x((1, 6, 16)), _x((1, 6, 16)), _x((1, 1, 6, 6))]),
]


def test_cases_cover_every_mapped_op_with_a_numpy_reference():
    pytest.importorskip("torch", reason="torch is not installed")
    from autotune.runners.torch_ops import TORCH_OPS
    from autotune.search_spaces.graphs import ops
    with_ref = {op for op in TORCH_OPS if ops.is_known(op) and ops.OPS[op].ref is not None}
    assert with_ref == {c[0] for c in CASES}


@needs_torch
@pytest.mark.parametrize("op,attrs,inputs", CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_torch_op_equals_numpy_reference(op, attrs, inputs):
    import torch

    from autotune.runners.torch_ops import run_op
    from autotune.search_spaces.graphs import ops
    rng = np.random.default_rng(1)
    arrays = [i if isinstance(i, np.ndarray) else rng.standard_normal(i[0]).astype(np.float32) for i in inputs]
    if op == "Sqrt":
        arrays = [np.abs(a) for a in arrays]
    out_shapes = ops.infer(op, [a.shape for a in arrays], attrs, arrays)
    want = ops.evaluate(op, arrays, attrs)
    with torch.inference_mode():
        got = run_op(op, [torch.from_numpy(a) for a in arrays], attrs, out_shapes)
    assert len(got) == len(want)
    for g, w, s in zip(got, want, out_shapes):
        assert tuple(g.shape) == tuple(w.shape) == tuple(s)
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-4, atol=1e-5)


#: ops without a numpy reference in the registry (kept as opaque nodes): checked against onnxruntime instead;
#: (op, attrs, inputs as arrays, output shape)
OPAQUE_CASES = [
    ("Gather", {"axis": 0}, [np.arange(12, dtype=np.float32).reshape(4, 3), np.array([[0, -1], [2, 1]], np.int64)],
     (2, 2, 3)),
    ("Gather", {"axis": 1}, [np.arange(12, dtype=np.float32).reshape(4, 3), np.array([2, 0], np.int64)], (4, 2)),
    ("GatherElements", {"axis": 1}, [np.arange(6, dtype=np.float32).reshape(2, 3),
                                     np.array([[2, 0], [-1, 1]], np.int64)], (2, 2)),
    ("Expand", {}, [np.arange(4, dtype=np.float32).reshape(1, 4), np.array([3, 1, 4], np.int64)], (3, 1, 4)),
    ("Pow", {}, [np.linspace(0.5, 2, 6, dtype=np.float32).reshape(2, 3), np.array(3.0, np.float32)], (2, 3)),
    ("IsNaN", {}, [np.array([1.0, np.nan, 0.0], np.float32)], (3,)),
    ("Where", {}, [np.array([[True, False, True]]), np.ones((2, 3), np.float32), np.zeros((1, 3), np.float32)],
     (2, 3)),
]


@needs_torch
@needs_onnx
@pytest.mark.parametrize("op,attrs,inputs,shape", OPAQUE_CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(OPAQUE_CASES)])
def test_torch_op_equals_onnxruntime_for_ops_without_a_reference(op, attrs, inputs, shape):
    import onnxruntime as ort
    import torch
    from onnx import helper, numpy_helper

    from autotune.runners.torch_ops import run_op
    names = [f"i{k}" for k in range(len(inputs))]
    node = helper.make_node(op, names, ["y"], **attrs)
    out_type = helper.np_dtype_to_tensor_dtype(np.dtype(bool if op == "IsNaN" else np.float32))
    graph = helper.make_graph([node], "t", [], [helper.make_tensor_value_info("y", out_type, None)],
                              [numpy_helper.from_array(a, n) for a, n in zip(inputs, names)])
    # IR version 8, as the project's own models: an onnx newer than the onnxruntime beside it
    # writes an IR version that onnxruntime refuses
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {})[0]
    with torch.inference_mode():
        (got,) = run_op(op, [torch.from_numpy(a) for a in inputs], attrs, [shape])
    assert tuple(got.shape) == want.shape == shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


@needs_torch
def test_unsupported_op_is_named():
    from autotune.runners.onnx_ops import op_spec
    from autotune.runners.torch_ops import TorchOpRunner, UnsupportedOp, run_op
    from autotune.types import Candidate, Status, Task
    with pytest.raises(UnsupportedOp, match="no mapping for op Elu"):
        run_op("Elu", [], {}, [])
    spec = op_spec("Elu", {}, [((2, 3), "float32", False)], [(2, 3)])
    m = TorchOpRunner("cpu").measure(Task("op", "Elu"), [Candidate(spec)])[0]
    assert m.status == Status.RUNTIME_ERROR and "Elu" in m.error and m.cost is None


# ---- op runner ---------------------------------------------------------------

@needs_torch
def test_torch_op_runner_times_an_op_on_the_cpu():
    from autotune.runners.onnx_ops import op_spec
    from autotune.runners.torch_ops import TorchOpRunner
    from autotune.types import Candidate, Task
    runner = TorchOpRunner("cpu", min_time=0.001)
    conv = op_spec("Conv", {"kernel_shape": (3, 3), "strides": (1, 1), "pads": (1, 1, 1, 1), "dilations": (1, 1),
                            "group": 1}, [((1, 8, 16, 16), "float32", False), ((8, 8, 3, 3), "float32", True),
                                          ((8,), "float32", True)], [(1, 8, 16, 16)])
    reshape = op_spec("Reshape", {}, [((2, 3, 4), "float32", False), ((2,), "int64", True)], [(6, 4)])
    ms = runner.measure(Task("op", "Conv"), [Candidate(conv), Candidate(reshape)])
    assert [m.ok for m in ms] == [True, True], [m.error for m in ms]
    assert all(m.cost > 0 and len(m.times) >= 5 and m.cost == min(m.times) for m in ms)
    assert runner.device.name == "cpu-torch" and runner.device.kind == "cpu"


# ---- whole graphs ------------------------------------------------------------

@needs_torch
@needs_onnx
@pytest.mark.parametrize("name", ["resnet50", "inception_v3", "bert_base", "nasrnn"])
def test_interpreter_matches_onnxruntime(name):
    """Whole models through the torch interpreter (incl. opaque Erf and LayerNormalization, and AveragePool
    padding excluded from the mean) agree with onnxruntime on the same inputs."""
    import torch

    from autotune.runners.onnx_ops import random_feeds, session
    from autotune.runners.torch_ops import TorchGraph
    from autotune.search_spaces.graphs import model_zoo
    model = model_zoo.build(name, small=True)
    sess = session(model)
    feeds = random_feeds(sess)
    tg = TorchGraph(model, torch.device("cpu"))
    assert set(tg.feeds()) == set(feeds) and all(np.array_equal(tg.feeds()[k].numpy(), v) for k, v in feeds.items())
    with torch.inference_mode():
        got = tg({k: torch.from_numpy(v) for k, v in feeds.items()})
    for w, g in zip(sess.run(None, feeds), got):
        assert np.abs(w - g.numpy()).max() <= 1e-5 * (np.abs(w).max() + 1e-12)


@needs_torch
@needs_onnx
def test_compare_latency_and_max_errors_on_torch_cpu():
    from autotune.runners import torch_ops
    from autotune.search_spaces.graphs import model_zoo, onnx_io
    model = model_zoo.build("squeezenet11", small=True)
    graph = onnx_io.from_onnx(model)
    lat = torch_ops.compare_latency([model, graph], rounds=3, device="cpu")
    assert len(lat) == 2 and all(len(x["times"]) == 3 and x["median_s"] > 0 for x in lat)
    err = torch_ops.max_errors(model, onnx_io.to_onnx(graph), trials=2, device="cpu")
    assert err["max_rel_error"] == 0.0 and err["trials"] == 2


def _optimize(tmp_path, device, name="squeezenet11"):
    import onnx

    from autotune.drivers.graph import optimize_graph
    from autotune.search_spaces.graphs import model_zoo

    src = tmp_path / f"{name}.onnx"
    if not src.exists():
        onnx.save(model_zoo.build(name, small=True), src)
    return optimize_graph(str(src), str(tmp_path / "out.onnx"), device=device, trials=40, rounds=5,
                          db=f"sqlite:///{tmp_path / 'g.db'}")


def _op_trials(db, device):
    """The op timings stored under ``device`` (graph trials of campaigns share the device's name)."""
    from autotune.db import queries
    df = queries.trials(db, device=device)
    return df[df["campaign"].isna()]


@needs_torch
@needs_onnx
def test_optimize_graph_on_torch_cpu_stores_op_trials_under_the_torch_device(tmp_path):
    from autotune.db import open_database, queries
    r = _optimize(tmp_path, "torch-cpu")
    assert r["backend"] == "torch" and r["op_device"] == "cpu-torch"
    assert r["check"]["passed"] and r["check"]["max_rel_error"] < 1e-3 and r["latency_before"]["median_s"] > 0
    db = open_database(f"sqlite:///{tmp_path / 'g.db'}")
    ops = _op_trials(db, "cpu-torch")
    assert len(ops) == r["ops_measured"] > 0 and ops["candidate_key"].is_unique and (ops["status"] == "OK").all()
    assert queries.trials(db, device="cpu-onnxruntime").empty
    assert len(queries.trials(db, campaign=r["campaign"])) == r["evaluated"]  # every evaluated graph is a trial
    assert _optimize(tmp_path, "torch-cpu")["ops_measured"] == 0  # measured once per device, ever
    # onnxruntime costs are their own: the CPU run measures its ops again, under its own device
    r_cpu = _optimize(tmp_path, "cpu")
    assert r_cpu["ops_measured"] > 0 and len(_op_trials(db, "cpu-onnxruntime")) == r_cpu["ops_measured"]
    assert len(_op_trials(db, "cpu-torch")) == len(ops)


@needs_torch
@needs_onnx
def test_optimize_graph_on_torch_rejects_an_unmapped_op_before_searching(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    from autotune.drivers.graph import optimize_graph
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    g = helper.make_graph([helper.make_node("Elu", ["x"], ["y"], name="act")], "t", [x], [y])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    with pytest.raises(UsageError, match="op Elu .*'y'"):
        optimize_graph(str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx"), device="torch-cpu", db=None)


# ---- GPU ---------------------------------------------------------------------

@needs_cuda
@needs_onnx
def test_optimize_graph_on_cuda(tmp_path):
    import torch

    from autotune.db import open_database, queries
    from autotune.runners.onnx_ops import op_spec
    from autotune.runners.torch_ops import TorchOpRunner
    from autotune.types import Candidate, Task
    runner = TorchOpRunner("cuda", min_time=0.001)
    assert runner.device.kind == "cuda" and runner.device.name == torch.cuda.get_device_name()
    spec = op_spec("MatMul", {}, [((64, 256), "float32", False), ((256, 128), "float32", True)], [(64, 128)])
    m = runner.measure(Task("op", "MatMul"), [Candidate(spec)])[0]
    assert m.ok and m.cost > 0, m.error
    r = _optimize(tmp_path, "cuda", "resnet50")
    assert r["op_device"] == torch.cuda.get_device_name() and r["check"]["passed"]
    db = open_database(f"sqlite:///{tmp_path / 'g.db'}")
    assert len(_op_trials(db, r["op_device"])) == r["ops_measured"] > 0
    assert queries.trials(db, device="cpu-onnxruntime").empty
