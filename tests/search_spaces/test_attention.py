"""Attention as the PyTorch exporters write it, fused into onnxruntime's MultiHeadAttention kernel.

Small hand-made models reproduce each exporter's layout of scaled dot-product attention; the rewritten
model must load in onnxruntime and compute what the original computes (the rule's numeric verification),
and layouts that are *not* attention must not match."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper

from autotune.runners.onnx_ops import max_errors
from autotune.search_spaces.graphs import onnx_io, ops
from autotune.search_spaces.graphs.attention import FuseAttention
from autotune.search_spaces.graphs.egraph import EGraph

B, S, H, D = 2, 6, 3, 4
HD = H * D


def _attention_model(form: str, seed: int = 0, key_perm=(0, 2, 3, 1), head_shape=(B, S, H, D), head_perm=(0, 2, 1, 3),
                     q_scale_shape=(), mask=None):
    """x [B, S, HD] -> three projections -> attention -> output projection, in the layout of ``form``:
    "torchscript" (query and key each scaled by D**-0.25, key transposed by one Transpose), "dynamo" (key
    transposed through a rank-3 reshape, a zero mask added, the softmax guarded by Where(IsNaN)), "gpt2"
    (one packed projection split in three, one-input Concats, a causal -inf mask, the result flattened to
    rank 2 for a Gemm)."""
    rng = np.random.default_rng(seed)
    inits = {"s4": np.array(head_shape, np.int64), "s3": np.array([B, S, HD], np.int64),
             "cq": np.full(q_scale_shape, D ** -0.25, np.float32),
             "ck": np.array(D ** -0.25, np.float32), "wo": rng.standard_normal((HD, HD), np.float32),
             "zero": np.array(0.0, np.float32)}
    nodes = []
    if form == "gpt2":
        inits["wqkv"] = rng.standard_normal((HD, 3 * HD), np.float32)
        nodes += [helper.make_node("MatMul", ["x", "wqkv"], ["qkv"]),
                  helper.make_node("Split", ["qkv", "sp"], ["q", "k", "v"], axis=2)]
        inits["sp"] = np.array([HD] * 3, np.int64)
    else:
        for n in "qkv":
            inits[f"w{n}"] = rng.standard_normal((HD, HD), np.float32)
            inits[f"b{n}"] = rng.standard_normal(HD).astype(np.float32)
            nodes += [helper.make_node("MatMul", ["x", f"w{n}"], [f"{n}m"]),
                      helper.make_node("Add", [f"{n}m", f"b{n}"], [n])]
    for n in "qv":
        nodes += [helper.make_node("Reshape", [n, "s4"], [f"{n}4"]),
                  helper.make_node("Transpose", [f"{n}4"], [f"{n}t"], perm=list(head_perm))]
    if form == "dynamo":  # k -> [B,S,H,D] -> [B,H,S,D] -> [B*H,S,D] -> [B*H,D,S] -> [B,H,D,S]
        inits.update({"s3h": np.array([B * H, S, D], np.int64), "s4k": np.array([B, H, D, S], np.int64)})
        nodes += [helper.make_node("Reshape", ["k", "s4"], ["k4"]),
                  helper.make_node("Transpose", ["k4"], ["k0"], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", ["k0", "s3h"], ["k3"]),
                  helper.make_node("Transpose", ["k3"], ["k3t"], perm=[0, 2, 1]),
                  helper.make_node("Reshape", ["k3t", "s4k"], ["kt"])]
    else:
        nodes += [helper.make_node("Reshape", ["k", "s4"], ["k4"]),
                  helper.make_node("Transpose", ["k4"], ["kt"], perm=list(key_perm))]
    if form == "gpt2":
        nodes += [helper.make_node("Concat", ["kt"], ["ktc"], axis=-1), helper.make_node("Concat", ["vt"], ["vtc"],
                                                                                      axis=-2)]
        kt, vt = "ktc", "vtc"
    else:
        kt, vt = "kt", "vt"
    nodes += [helper.make_node("Mul", ["qt", "cq"], ["qs"]), helper.make_node("Mul", [kt, "ck"], ["ks"]),
              helper.make_node("MatMul", ["qs", "ks"], ["sc"])]
    scores = "sc"
    if mask is not None or form in ("dynamo", "gpt2"):
        if mask is None:
            mask = np.zeros((1, 1, S, S), np.float32) if form == "dynamo" else \
                np.triu(np.full((S, S), -np.inf, np.float32), 1)
        inits["mask"] = mask
        nodes.append(helper.make_node("Add", ["sc", "mask"], ["scm"]))
        scores = "scm"
    nodes.append(helper.make_node("Softmax", [scores], ["p"], axis=-1))
    p = "p"
    if form in ("dynamo", "gpt2"):
        nodes += [helper.make_node("IsNaN", ["p"], ["nan"]), helper.make_node("Where", ["nan", "zero", "p"], ["pg"])]
        p = "pg"
    nodes += [helper.make_node("MatMul", [p, vt], ["o"]),
              helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3])]
    if form == "gpt2":
        inits["s2"] = np.array([B * S, HD], np.int64)
        nodes += [helper.make_node("Reshape", ["ot", "s2"], ["o2"]), helper.make_node("Gemm", ["o2", "wo"], ["y"])]
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [B * S, HD])
    else:
        nodes += [helper.make_node("Reshape", ["ot", "s3"], ["o3"]), helper.make_node("MatMul", ["o3", "wo"], ["y"])]
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, S, HD])
    g = helper.make_graph(nodes, form, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, HD])], [out],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("form", ["torchscript", "dynamo", "gpt2"])
def test_each_exporters_attention_becomes_one_kernel_that_computes_the_same(form):
    model = _attention_model(form)
    g = onnx_io.from_onnx(model)
    rule = FuseAttention()
    (match,) = list(rule.matches(g))
    out = rule.apply(g, match)
    runtime = [n.op for n in out.runtime_nodes()]
    assert runtime.count("MultiHeadAttention") == 1
    assert not {"Softmax", "Transpose", "IsNaN", "Where"} & set(runtime)
    (mha,) = out.by_op["MultiHeadAttention"]
    assert mha.a["num_heads"] == H and mha.a["scale"] == pytest.approx(D ** -0.5, rel=1e-6)
    assert (len(mha.inputs) == 6) == (form == "gpt2")  # the causal mask is kept, a zero mask is dropped
    exported = onnx_io.to_onnx(out)
    assert ("MultiHeadAttention", "com.microsoft") in {(n.op_type, n.domain) for n in exported.graph.node}
    assert max_errors(model, exported, trials=3)["max_rel_error"] < 1e-5
    back = onnx_io.from_onnx(exported)  # read back as the registered op (a second search, the torch backend)
    assert back.by_op["MultiHeadAttention"][0].a == {"num_heads": H, "scale": pytest.approx(D ** -0.5, rel=1e-6)}


def test_every_rule_matches_on_a_graph_holding_the_kernel_with_a_mask():
    """The kernel's absent optional inputs ("" between value and attention_bias) are no tensors: the other
    rules (the n-ary merges read every tensor's consumers) match on the rewritten graph as on any other."""
    from autotune.search_spaces.graphs.builtin_rules import builtin_rules

    g = onnx_io.from_onnx(_attention_model("gpt2"))
    rule = FuseAttention()
    out = rule.apply(g, next(iter(rule.matches(g))))
    assert "" not in out.consumers and len(out.by_op["MultiHeadAttention"][0].inputs) == 6
    for r in builtin_rules(include_neutral=True):
        list(r.matches(out))


@pytest.mark.parametrize("change", [
    {"key_perm": (0, 2, 1, 3), "head_shape": (B, S, HD // S, S)},  # q k, not q k^T (heads of size S: shapes fit)
    {"head_shape": (B, S, D, H), "head_perm": (0, 3, 1, 2), "key_perm": (0, 3, 2, 1)},  # interleaved heads
    {"q_scale_shape": (D,)},  # a per-feature factor on the query, not a scale
    {"mask": np.where(np.eye(S, dtype=bool), np.float32(-np.inf), np.float32(0))[None, None]},  # finite, but...
])
def test_layouts_that_are_not_attention_do_not_match(change):
    form = "dynamo" if "mask" in change else "torchscript"
    g = onnx_io.from_onnx(_attention_model(form, **change))
    if "mask" in change:  # the mask leaves each row a finite entry: the guard may go
        assert list(FuseAttention().matches(g))
        return
    assert not list(FuseAttention().matches(g))


def test_the_nan_guard_stays_where_a_softmax_row_can_be_all_masked():
    """Where(IsNaN(p), 0, p) differs from the kernel only on a row whose scores are all -inf: dropping it
    is allowed only when the mask leaves every row a finite entry."""
    mask = np.zeros((1, 1, S, S), np.float32)
    mask[..., 2, :] = -np.inf  # row 2 fully masked: softmax is NaN there, the guard makes it 0
    g = onnx_io.from_onnx(_attention_model("dynamo", mask=mask))
    assert not list(FuseAttention().matches(g))


@pytest.mark.parametrize("form", ["torchscript", "dynamo", "gpt2"])
def test_the_egraph_holds_the_kernel_and_extracts_it_when_cheaper(form):
    model = _attention_model(form)
    eg = EGraph(onnx_io.from_onnx(model))
    eg.saturate([FuseAttention()])
    assert any(n.op == "MultiHeadAttention" for n in eg.nodes)
    cheap = {"MultiHeadAttention": 1.0, "Flatten": 0.0}
    g, _ = eg.extract(lambda view, n: cheap.get(n.op, 1.0), fusion=False)
    assert [n.op for n in g.runtime_nodes()].count("MultiHeadAttention") == 1
    assert max_errors(model, onnx_io.to_onnx(g), trials=2)["max_rel_error"] < 1e-5


@pytest.mark.parametrize("q,kv,dv,heads,bias", [((2, 5, 8), 7, 8, 2, None), ((1, 6, 16), 6, 16, 4, (1, 1, 6, 6)),
                                                ((3, 4, 12), 9, 6, 3, (3, 3, 4, 9))])
def test_kernel_reference_equals_onnxruntime(q, kv, dv, heads, bias):
    """The registry's numpy reference (which the verification and the torch backend are checked against) is
    what onnxruntime's kernel computes, with and without attention_bias, for cross attention too."""
    import onnxruntime as ort

    rng = np.random.default_rng(3)
    b, _, hd = q
    arrays = [rng.standard_normal(q, np.float32), rng.standard_normal((b, kv, hd), np.float32),
              rng.standard_normal((b, kv, dv), np.float32)]
    names = ["q", "k", "v"]
    if bias is not None:
        arrays.append(rng.standard_normal(bias, np.float32))
        names += ["", "", "bias"]
    attrs = {"num_heads": heads, "scale": 0.37}
    node = helper.make_node("MultiHeadAttention", names, ["y"], domain="com.microsoft", **attrs)
    feeds = [n for n in names if n]
    graph = helper.make_graph([node], "mha", [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
                                              for n, a in zip(feeds, arrays)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                    helper.make_opsetid("com.microsoft", 1)])
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, dict(zip(feeds, arrays)))[0]
    want = ops.evaluate("MultiHeadAttention", arrays, attrs)[0]
    assert want.shape == tuple(ops.infer("MultiHeadAttention", [a.shape for a in arrays], attrs, arrays)[0])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_packed_multiheadattention_from_another_tool_stays_opaque():
    """onnxruntime's optimizer may write MultiHeadAttention with a packed bias (input 3), which the registered
    op does not model: it is imported as an opaque node, not misread as query, key, value and a mask."""
    names = ["q", "k", "v", "bias"]
    node = helper.make_node("MultiHeadAttention", names, ["y"], domain="com.microsoft", num_heads=2)
    graph = helper.make_graph([node], "mha", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4, 8])
                                              for n in names[:3]], [helper.make_tensor_value_info(
                                                  "y", TensorProto.FLOAT, [1, 4, 8])],
                              [numpy_helper.from_array(np.zeros(24, np.float32), "bias")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                    helper.make_opsetid("com.microsoft", 1)])
    g = onnx_io.from_onnx(model)
    (n,) = g.runtime_nodes()
    assert n.op == "MultiHeadAttention" and n.domain == "com.microsoft" and n.fixed  # opaque: shapes from import
