"""ONNX models as parallelization inputs (through the graph space's importer)."""

import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install 'autotune[graphs]')")

from autotune.search_spaces.graphs import model_zoo
from autotune.search_spaces.parallel.models import get_model


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "resnet50.onnx"
    onnx.save(model_zoo.build("resnet50", small=True), str(path))
    return str(path)


def test_onnx_resnet_becomes_a_soap_graph(resnet):
    g = get_model(resnet, 16)
    assert g.batch == 16
    convs = [op for op in g.ops if op.type == "conv2d"]
    assert convs and all(op.roles["b"] == "sample" and op.roles["o"] == "parameter" for op in convs)
    assert all(op.dims["b"] == 16 for op in convs)
    g2 = get_model(resnet, 32)
    assert g2.flops == pytest.approx(2 * g.flops)  # the batch axis is rescaled
    # weights: the importer's parameters (conv kernels, batch norm, classifier)
    assert g.parameters > 0 and g.parameters == g2.parameters


def test_onnx_bert_matmuls(tmp_path):
    path = tmp_path / "bert.onnx"
    onnx.save(model_zoo.build("bert_base", small=True), str(path))
    g = get_model(str(path), 8)
    kinds = {op.type for op in g.ops}
    assert {"linear", "matmul"} <= kinds


def _stack(path, prefixes):
    """A chain of MatMul + Add blocks named as an exporter names them ("/h.0/fc/MatMul_output_0"), then a head."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, x = [], [], "x"
    for p in prefixes:
        inits.append(numpy_helper.from_array(np.ones((8, 8), np.float32), f"{p}/fc.weight"))
        nodes.append(helper.make_node("MatMul", [x, f"{p}/fc.weight"], [f"{p}/fc/MatMul_output_0"]))
        nodes.append(helper.make_node("Relu", [f"{p}/fc/MatMul_output_0"], [f"{p}/act/Relu_output_0"]))
        x = f"{p}/act/Relu_output_0"
    inits.append(numpy_helper.from_array(np.ones((8, 16), np.float32), "head.weight"))
    nodes.append(helper.make_node("MatMul", [x, "head.weight"], ["logits"]))
    graph = helper.make_graph(nodes, "stack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6, 8])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [4, 6, 16])], inits)
    onnx.save(helper.make_model(graph), str(path))
    return str(path)


def test_onnx_blocks_become_layers_that_pipelines_cut_between(tmp_path):
    from autotune.search_spaces.parallel.clusters import get_cluster
    from autotune.search_spaces.parallel.strategy import megatron

    g = get_model(_stack(tmp_path / "gpt.onnx", [f"/transformer/h.{i}" for i in range(4)]), 8)
    layer = {op.name: op.layer for op in g.ops}
    assert [layer[f"/transformer/h.{i}/fc/MatMul_output_0"] for i in range(4)] == [0, 1, 2, 3]
    assert layer["/transformer/h.2/act/Relu_output_0"] == 2 and layer["logits"] is None
    cluster = get_cluster("dgx-a100-x2")
    stage = {op.name: cfg.start // 8 for op, cfg in zip(g.ops, megatron(g, cluster, tensor=8, pipeline=2))}
    assert [stage[f"/transformer/h.{i}/act/Relu_output_0"] for i in range(4)] == [0, 0, 1, 1]
    assert stage["logits"] == 1
    # an encoder's and a decoder's block 0 are two layers
    t5 = get_model(_stack(tmp_path / "t5.onnx", ["/encoder/block.0", "/encoder/block.1", "/decoder/block.0"]), 8)
    assert sorted({op.layer for op in t5.ops if op.layer is not None}) == [0, 1, 2]


def _scalar_then_matrix(path, inputs):
    """A MatMul of ``x`` by a weight, scaled by every scalar input; ``inputs``: (name, shape) in the model's order."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((16, 8), np.float32), "w")
    nodes, y = [helper.make_node("MatMul", ["x", "w"], ["h0"])], "h0"
    for i, (name, shape) in enumerate(inputs):
        if name != "x":
            nodes.append(helper.make_node("Mul", [y, name], [f"h{i + 1}"]))
            y = f"h{i + 1}"
    nodes.append(helper.make_node("Relu", [y], ["y"]))
    graph = helper.make_graph(nodes, "scaled", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_the_batch_is_the_first_dimension_of_the_first_input_that_is_not_a_scalar(tmp_path):
    """A scalar input first (a temperature) has no batch: the batch is x's first dimension, 4; --batch rescales it."""
    path = _scalar_then_matrix(tmp_path / "m.onnx", [("scale", []), ("x", [4, 16])])
    g = get_model(path)
    assert g.batch == 4 and next(op for op in g.ops if op.type == "linear").dims["a0"] == 4
    g8 = get_model(path, 8)
    assert g8.batch == 8 and next(op for op in g8.ops if op.type == "linear").dims["a0"] == 8


def test_a_model_whose_batch_cannot_be_found_is_refused_naming_why(tmp_path):
    from onnx import TensorProto, helper

    from autotune.errors import UsageError

    a, b = (helper.make_tensor_value_info(n, TensorProto.FLOAT, []) for n in "ab")
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "scalars", [a, b],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "s.onnx"))
    with pytest.raises(UsageError, match="cannot find the batch of ONNX model .*s.onnx.*no input that is not a scalar"):
        get_model(str(tmp_path / "s.onnx"))
    # a symbolic batch: named with the input shapes that fix it (as tune graph takes them), and fixed by them
    path = _scalar_then_matrix(tmp_path / "n.onnx", [("x", ["N", 16])])
    with pytest.raises(UsageError, match=r"^input 'x' has a symbolic dimension 'N'; give it with input_shapes="):
        get_model(path)
    g = get_model(path, input_shapes={"x": (6, 16)})
    assert g.batch == 6 and g.meta["input_shapes"] == {"x": [6, 16]}
    with pytest.raises(UsageError, match="input_shapes applies to ONNX models, not 'nmt'"):
        get_model("nmt", input_shapes={"x": (6, 16)})


def _seq_first(path, weights_seed=0):
    """A model exported at batch 1 whose tensors do not all lead with the batch: x [1, 8, 16] is projected, turned
    sequence-first ([8, 1, 32]: its first dimension is the sequence), averaged over the batch ([8, 32]) and
    projected again ([8, 10])."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(weights_seed)
    w1 = numpy_helper.from_array(rng.random((16, 32), np.float32), "w1")
    w2 = numpy_helper.from_array(rng.random((32, 10), np.float32), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Transpose", ["h"], ["t"], perm=[1, 0, 2]),
             helper.make_node("Relu", ["t"], ["r"]),
             helper.make_node("ReduceMean", ["r"], ["s"], axes=[1], keepdims=0),
             helper.make_node("MatMul", ["s", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "main_graph", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 10])], [w1, w2])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_batch_rescales_only_the_axis_that_carries_the_batch(tmp_path):
    """At batch 4 the sequence-first tensor is [8, 4, 32], not [32, 1, 32], and what was averaged over the batch
    keeps its shape (every first dimension is a multiple of a batch of 1, so the old rule rescaled them all: the
    last projection cost 4x its FLOPs)."""
    path = _seq_first(tmp_path / "m.onnx")
    one, four = get_model(path), get_model(path, 4)
    dims = {op.name: op.dims for op in four.ops}
    assert dims["x"] == {"a0": 4, "a1": 8, "a2": 16} and dims["h"]["a0"] == 4
    assert dims["t"] == {"a0": 8, "a1": 4, "a2": 32} and dims["r"] == {"a0": 8, "a1": 4, "a2": 32}
    assert dims["s"] == {"a0": 8, "a1": 32} and dims["y"]["a0"] == 8
    flops = {op.name: op.flops for op in one.ops}
    assert {op.name: op.flops for op in four.ops} == {**flops, "h": 4 * flops["h"], "t": 4 * flops["t"],
                                                      "r": 4 * flops["r"]}


def test_a_batch_moved_by_reshapes_and_gathers_is_followed():
    """The batch axis through the ops that move it: a transpose's permutation, a reshape that merges it with its
    neighbours (as a flatten to [B*S, H] does) or splits others off, a gather of token ids, a reduction."""
    from autotune.search_spaces.parallel.onnx_import import _reshaped_axis

    assert _reshaped_axis((2, 8, 16), 0, (16, 16), 2) == 0  # [B, S, H] -> [B*S, H]
    assert _reshaped_axis((8, 2, 16), 1, (16, 16), 2) == 0  # [S, B, H] -> [S*B, H]
    assert _reshaped_axis((8, 2, 16), 1, (8, 32), 2) == 1  # [S, B, H] -> [S, B*H]
    assert _reshaped_axis((2, 64), 0, (2, 4, 16), 2) == 0  # heads split off the hidden axis
    assert _reshaped_axis((1, 64), 0, (1, 4, 16), 1) == 0
    assert _reshaped_axis((6, 4), 0, (2, 3, 4), 6) is None  # the batch itself split: lost


def test_a_model_file_is_its_own_task_whatever_the_name_inside_it(tmp_path):
    """Two ONNX files whose graphs are both named "main_graph" (as PyTorch's exporter names every graph) are two
    tasks and two default campaigns (the second resumed the first's); the same model exported again, with other
    weight values, is the same task; a JSON graph too."""
    from autotune.drivers.parallel import parallelize
    from autotune.search_spaces.parallel.clusters import get_cluster
    from autotune.search_spaces.parallel.space import StrategySpace

    a, b = _seq_first(tmp_path / "a.onnx"), _stack(tmp_path / "b.onnx", ["/h.0"])
    renamed = onnx.load(b)
    renamed.graph.name = "main_graph"
    onnx.save(renamed, b)
    again = _seq_first(tmp_path / "again.onnx", weights_seed=1)
    cluster = get_cluster("p100-4x4")
    tasks = {p: StrategySpace(get_model(p, 4), cluster).task for p in (a, b, again)}
    assert tasks[a].name == tasks[b].name == "main_graph@p100-4x4"
    assert tasks[a].key != tasks[b].key and tasks[a].key == tasks[again].key
    url = f"sqlite:///{tmp_path / 'p.db'}"
    first, second = (parallelize(p, "p100-4x4", 4, trials=2, db=url) for p in (a, b))
    assert first.campaign != second.campaign and second.simulations > 0
    assert first.model.name == second.model.name == "main_graph"
    g = get_model(a, 4)
    g.save(str(tmp_path / "m.json"))
    from_json = get_model(str(tmp_path / "m.json"))
    assert from_json.meta["digest"] == g.meta["digest"] and StrategySpace(from_json, cluster).task.key == tasks[a].key


def test_a_json_graph_refuses_another_batch_naming_its_own(tmp_path):
    """A JSON graph's ops are saved at its batch, which nothing rescales: --batch at another one is refused (it was
    ignored: the search ran at the saved batch), at its own accepted."""
    from autotune.errors import UsageError
    from autotune.search_spaces.parallel.models import mlp

    path = str(tmp_path / "mlp.json")
    mlp(64, layers=2, width=256).save(path)
    assert get_model(path).batch == get_model(path, 64).batch == 64
    with pytest.raises(UsageError) as err:
        get_model(path, 4096)
    assert err.value.command_line_message() == (
        f"the JSON graph {path!r} was saved at batch 64, and a JSON graph is not rescaled (built-in and ONNX models "
        "are): leave --batch out or give 64 (per micro-batch), or save the graph at batch 4096")


def _encoder(path, seq_first: bool):
    """Token ids [4, 8] embedded, then (``seq_first``) transposed to [8, 4, 16] as a sequence-first encoder (fairseq's,
    PyTorch's nn.Transformer without batch_first) runs, through an MLP with a residual add, and transposed back;
    without ``seq_first`` the transposes are identities: the same model, batch-first throughout."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.random(s, np.float32), n)
             for n, s in (("emb", (100, 16)), ("w1", (16, 32)), ("w2", (32, 16)))]
    move, perm = ("Transpose", {"perm": [1, 0, 2]}) if seq_first else ("Identity", {})
    nodes = [helper.make_node("Gather", ["emb", "tokens"], ["e"]), helper.make_node(move, ["e"], ["t"], **perm),
             helper.make_node("MatMul", ["t", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["o"]), helper.make_node("Add", ["o", "t"], ["res"]),
             helper.make_node(move, ["res"], ["y"], **perm)]
    graph = helper.make_graph(nodes, "encoder", [helper.make_tensor_value_info("tokens", TensorProto.INT64, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_data_parallelism_splits_the_batch_axis_of_a_sequence_first_layout(tmp_path):
    """Each op's sample dim is the axis that carries the batch: axis 1 of the sequence-first tensors [8, 4, ...]. So
    data parallelism on 16 devices splits their batch 4 ways (not their sequence 8 ways), hands each op's slice of
    the batch to the next without moving activations, and takes as long as on the batch-first twin."""
    from autotune.runners.simulator.engine import Simulator
    from autotune.search_spaces.parallel import strategy as st
    from autotune.search_spaces.parallel.clusters import get_cluster

    cluster = get_cluster("p100-4x4")
    times = {}
    for seq_first in (True, False):
        g = get_model(_encoder(tmp_path / f"{seq_first}.onnx", seq_first))
        dp = st.data_parallel(g, cluster)
        split = {op.name: {op.out.index(d): k for d, k in zip(op.parallel_dims, cfg.degrees) if k > 1}
                 for op, cfg in zip(g.ops, dp)}
        inner = 1 if seq_first else 0
        assert split == {"tokens": {0: 4}, "e": {0: 4}, "t": {inner: 4}, "h": {inner: 4}, "r": {inner: 4},
                         "o": {inner: 4}, "res": {inner: 4}, "y": {0: 4}}
        times[seq_first] = Simulator(g, cluster).simulate(dp).iteration_s
    assert times[True] == pytest.approx(times[False], rel=1e-9)


def test_data_parallelism_splits_an_axis_that_merges_the_batch_no_finer_than_the_batch(tmp_path):
    """x [4, 8, 16] flattened to [32, 16] (the batch merged with the sequence) before a MatMul: data parallelism on 16
    devices gives each of 4 devices whole samples of every op; splitting the [32, 16] ops 16 ways is not data
    parallelism, and the comparison with it would claim 16 devices for a batch of 4."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from autotune.search_spaces.parallel import strategy as st
    from autotune.search_spaces.parallel.clusters import get_cluster

    inits = [numpy_helper.from_array(np.ones((16, 8), np.float32), "w"),
             numpy_helper.from_array(np.array([32, 16], np.int64), "flat")]
    nodes = [helper.make_node("Reshape", ["x", "flat"], ["f"]), helper.make_node("MatMul", ["f", "w"], ["h"]),
             helper.make_node("Relu", ["h"], ["y"])]
    graph = helper.make_graph(nodes, "flat", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "f.onnx"))
    g = get_model(str(tmp_path / "f.onnx"))
    assert {op.name: op.dims["a0"] for op in g.ops} == {"x": 4, "f": 32, "h": 32, "y": 32}
    for cluster in (get_cluster("p100-4x4"), get_cluster("dgx-a100-x1")):
        for strategy in (st.data_parallel(g, cluster), st.megatron(g, cluster, tensor=1)):
            assert [cfg.parts for cfg in strategy] == [4, 4, 4, 4]
