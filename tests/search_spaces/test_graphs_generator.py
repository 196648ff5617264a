"""Rule generator and verifier: exact fingerprints, pruning, float tests over sizes, z3 proofs."""

import pytest

pytest.importorskip("z3")

from autotune.search_spaces.graphs import generator as G
from autotune.search_spaces.graphs import synthesis
from autotune.search_spaces.graphs.verify import float_tests, verify_pair, z3_prove

MATRIX = next(d for d in G.DOMAINS if d.name == "matrix")
CONV = next(d for d in G.DOMAINS if d.name == "conv")


def op(name, args, out, extra=None):
    return (name, tuple(args), extra, tuple(out))


def test_matmul_associativity_is_proved():
    g1 = (op("MatMul", "aw", ["t0_0"]), op("MatMul", ["t0_0", "u"], ["t1_0"]))
    g2 = (op("MatMul", "wu", ["t0_0"]), op("MatMul", ["a", "t0_0"], ["t1_0"]))
    assert z3_prove(MATRIX, g1, g2, {"t1_0": "t1_0"}) is True
    assert verify_pair(MATRIX, g1, g2, {"t1_0": "t1_0"}) == "proved"


def test_a_false_rule_is_rejected():
    g1 = (op("MatMul", "aw", ["t0_0"]), op("Relu", ["t0_0"], ["t1_0"]))
    g2 = (op("Relu", "w", ["t0_0"]), op("MatMul", ["a", "t0_0"], ["t1_0"]))
    assert not float_tests(MATRIX, g1, g2, {"t1_0": "t1_0"})
    assert z3_prove(MATRIX, g1, g2, {"t1_0": "t1_0"}, timeout_ms=500) is None  # the generator's timeout below


def test_shape_specific_pair_is_rejected_by_other_sizes():
    # at the fingerprint sizes n=2,k=3,m=5: splitting concat(w, v) (k x 2m = 3 x 10) at n+... is size-specific
    g = (op("Concat1", "wv", ["t0_0"]), op("Split1", ["t0_0"], ["t1_0", "t1_1"], ("m", "m")))
    bad = (op("Concat1", "wv", ["t0_0"]), op("Split1", ["t0_0"], ["t1_0", "t1_1"], ("k", "p")))  # 3+4 != 10
    shapes = G.concrete(MATRIX, MATRIX.sizes[0])
    assert G.shape_of("Split1", ("t0_0",), ("m", "m"), {**shapes, "t0_0": (3, 10)}) == [(3, 5), (3, 5)]
    assert G.shape_of("Split1", ("t0_0",), ("k", "p"), {**shapes, "t0_0": (3, 10)}) is None
    assert float_tests(MATRIX, g, g, {"t1_0": "t1_0", "t1_1": "t1_1"})
    del bad


def test_generator_two_ops_finds_associativity_and_reports_counts():
    rep = synthesis.generate(2, z3_timeout_ms=500, domains=[MATRIX])
    assert rep["graphs"] > 100 and rep["generated"] >= rep["kept"] > 0
    assert rep["pruned_common_subgraph"] > 0 and rep["pruned_renaming"] > 0
    assert rep["proved"] > 0 and rep["classic_found"]["associativity"]
    assert rep["time_s"] > 0


def test_generator_three_ops_finds_conv_merge_and_distributivity():
    # the rules kept do not depend on z3's timeout: a pair it does not prove in time is kept, as "tested"
    rep = synthesis.generate(3, z3_timeout_ms=100, domains=[CONV])
    found = rep["classic_found"]
    assert found["merge_convs"] and found["distributivity"]
    merge = next(r for r in rep["rules"] if r.name in found["merge_convs"])
    assert merge.status in ("proved", "tested")
    # the merge direction is written too, and it applies to a real graph and preserves its outputs
    import numpy as np
    pytest.importorskip("onnxruntime")
    from autotune.runners.onnx_ops import max_errors
    from autotune.search_spaces.graphs.ir import Graph, Node
    from autotune.search_spaces.graphs.onnx_io import to_onnx
    rule = next(r for r in rep["rules"] if r.name.endswith("_rev") and sorted(n["op"] for n in r.source) == ["Conv", "Conv"])
    rng = np.random.default_rng(0)
    w = {k: rng.standard_normal((4, 3, 3, 3)).astype(np.float32) for k in ("k1", "k2")}
    g = Graph([Node.make("Conv", ["x", "k1"], ["y1"], G.CONV_ATTRS), Node.make("Conv", ["x", "k2"], ["y2"], G.CONV_ATTRS)],
              {"x": ((1, 3, 6, 6), "float32")}, ["y1", "y2"], w)
    match = next(iter(rule.matches(g)))
    g2 = rule.apply(g, match)
    assert sorted(n.op for n in g2.runtime_nodes()) == ["Conv", "Split"]
    assert max_errors(to_onnx(g), to_onnx(g2), trials=1)["max_rel_error"] < 1e-5
    # on an imported model, whose bias-free Convs get an explicit zero bias, the generated merge applies too
    from autotune.search_spaces.graphs.onnx_io import from_onnx
    imported = from_onnx(to_onnx(g))
    assert all(len(n.inputs) == 3 for n in imported.runtime_nodes())
    g3 = rule.apply(imported, next(iter(rule.matches(imported))))
    assert sorted(n.op for n in g3.runtime_nodes()) == ["Conv", "Split"]
    assert max_errors(to_onnx(g), to_onnx(g3), trials=1)["max_rel_error"] < 1e-5


@pytest.mark.slow
def test_generator_three_ops_all_domains_finds_the_classics():
    rep = synthesis.generate(3, z3_timeout_ms=500)
    assert all(rep["classic_found"].values()), rep["classic_found"]
