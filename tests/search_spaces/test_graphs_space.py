"""GraphSpace conformance, the op cost model, and search through the engine's algorithms."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from autotune.runners.onnx_ops import OnnxOpRunner
from autotune.drivers import graph as optimizer
from autotune.search_spaces.graphs import model_zoo, onnx_io
from autotune.search_spaces.graphs.cost import OpCostCache, OpCostModel
from autotune.search_spaces.graphs.space import GraphSpace



def small_graph(name="inception_v3"):
    return onnx_io.from_onnx(model_zoo.build(name, small=True))


def test_space_key_is_structural_hash_and_dedups_orders():
    space = GraphSpace(small_graph("resnet50"), cost_model=OpCostModel(runner=None))
    kids = list(space.children(space.initial()))
    folds = [k for k in kids if k.payload[-1][0] == "fold_conv_bn"][:2]
    a = space.candidate(folds[0].payload + folds[1].payload)
    b = space.candidate(folds[1].payload + folds[0].payload)
    assert a.key == b.key == space.graph(a).structural_hash() and a.payload != b.payload
    assert space.features([a, b]).shape == (2, space.features([a]).shape[1])


def test_cost_model_measures_each_op_key_once_and_uses_the_cache():
    cache = OpCostCache()
    cm = OpCostModel(OnnxOpRunner(min_time=0.001), cache)
    g = small_graph("vgg19")
    c1 = cm.graph_cost(g)
    n = cm.measured
    assert 0 < n <= len(g.runtime_nodes()) and c1 > 0
    assert cm.graph_cost(g) == c1 and cm.measured == n
    cm2 = OpCostModel(OnnxOpRunner(), cache)  # a second model with the same cache measures nothing
    assert cm2.graph_cost(g) == pytest.approx(c1) and cm2.measured == 0


def test_analytic_estimate_without_runner_is_positive_and_monotone():
    cm = OpCostModel(runner=None)
    g = small_graph("resnet50")
    convs = sorted((n for n in g.runtime_nodes() if n.op == "Conv"),
                   key=lambda n: np.prod(g.shape[n.inputs[1]]) * np.prod(g.shape[n.outputs[0]]))
    assert 0 < cm.op_cost(g, convs[0]) <= cm.op_cost(g, convs[-1])


@pytest.mark.parametrize("algorithm", ["backtracking", "engine-backtracking", "mcmc", "evolutionary"])
def test_search_finds_a_cheaper_graph(algorithm):
    g = small_graph("resnet50")
    res = optimizer.search(g, algorithm, budget=150, time_limit=20, cost_model=OpCostModel(runner=None, fusion=False))
    assert res.cost_after < res.cost_before and res.best.payload
    assert res.space.contains(res.best)


def test_sign_test_keeps_only_clear_wins():
    before = [1.0 + 0.01 * i for i in range(20)]
    assert optimizer.faster_beyond_noise(before, [b * 0.9 for b in before])[0]
    assert not optimizer.faster_beyond_noise(before, [b * 0.999 for b in before])[0]  # < 1% gain
    noisy = [b * (0.95 if i % 2 else 1.05) for i, b in enumerate(before)]
    assert not optimizer.faster_beyond_noise(before, noisy)[0]


def test_fusion_aware_cost_counts_fused_ops_free():
    from autotune.search_spaces.graphs.cost import fused_into_producer
    g = small_graph("resnet50")
    bns = [n for n in g.runtime_nodes() if n.op == "BatchNormalization"]
    assert bns and all(fused_into_producer(g, n) for n in bns)
    relus_after_bn = [n for n in g.runtime_nodes() if n.op == "Relu" and g.producer[n.inputs[0]][0].op != "Add"]
    assert relus_after_bn and all(fused_into_producer(g, n) for n in relus_after_bn)
    adds = [n for n in g.runtime_nodes() if n.op == "Add"]  # residual adds of two activations are not fused
    assert adds and not any(fused_into_producer(g, n) for n in adds)
    free, full = OpCostModel(runner=None), OpCostModel(runner=None, fusion=False)
    assert free.graph_cost(g) < full.graph_cost(g)


class FakeOpRunner:
    """Unit-test fake: an op's time is a smooth function of its FLOPs and bytes (no onnxruntime)."""

    def __init__(self):
        from autotune.types import Device

        self.device = Device("fake-op-runner", "simulated", {"fake": True})
        self.calls = 0

    def measure(self, task, candidates):
        from autotune.types import Measurement

        out = []
        for c in candidates:
            self.calls += 1
            p = c.payload
            elems = sum(int(np.prod(s)) for s in p["outputs"])
            t = 1e-6 * (2 + elems / 1e3 * (4 if p["op"] in ("Conv", "MatMul", "Gemm") else 1))
            out.append(Measurement(c, "OK", times=[t]))
        return out


def test_unmeasured_ops_are_predicted_by_xgboost_and_confirmed_when_relied_on():
    g = small_graph("inception_v3")
    runner = FakeOpRunner()
    cm = OpCostModel(runner, max_measure=24)
    total = cm.graph_cost(g)
    assert cm.measured == 24 and cm.estimated > 0 and cm.predictor.model is not None
    truth = OpCostModel(FakeOpRunner(), max_measure=10_000, predictor=False)
    exact = truth.graph_cost(g)
    assert 0.5 < total / exact < 2.0  # the predicted remainder is in the right range
    measured_more = cm.confirm(g)
    assert measured_more > 0 and cm.confirm(g) == 0
    assert cm.graph_cost(g) == pytest.approx(exact, rel=1e-9)  # now every op it relies on is measured
