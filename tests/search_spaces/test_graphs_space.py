"""GraphSpace (keys, task, replayable rewrite sequences) and graph costs from op costs (runners.graph.OpCosts);
the conformance suites of GraphSpace, OnnxOpRunner and GraphCostRunner run in the parametrised suites."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from autotune.errors import UsageError
from autotune.runners.graph import GraphCostRunner, OpCostCache, OpCosts
from autotune.runners.onnx_ops import OnnxOpRunner
from autotune.search_spaces.graphs import model_zoo, onnx_io
from autotune.search_spaces.graphs.cost import fused_into_producer
from autotune.search_spaces.graphs.ir import Graph
from autotune.search_spaces.graphs.space import GraphSpace
from autotune.testing.graphs import FakeOpRunner
from autotune.types import Candidate, Measurement, Status


def small_graph(name="inception_v3"):
    return onnx_io.from_onnx(model_zoo.build(name, small=True))


def test_space_key_is_structural_hash_and_dedups_orders():
    space = GraphSpace(small_graph("resnet50"))
    kids = list(space.children(space.initial()))
    folds = [k for k in kids if k.payload[-1][0] == "fold_conv_bn"][:2]
    a = space.candidate(folds[0].payload + folds[1].payload)
    b = space.candidate(folds[1].payload + folds[0].payload)
    assert a.key == b.key == space.graph(a).structural_hash() and a.payload != b.payload
    assert space.features([a, b]).shape == (2, space.features([a]).shape[1])


def test_every_rewrite_sequence_replays_to_its_key():
    """Children of children carry sequences that replay on the input graph to the graph they name, even
    where several sequences reach one structure (each candidate's own graph is expanded)."""
    space = GraphSpace(small_graph("resnet50"))
    frontier, n = [space.initial()], 0
    for _ in range(3):
        frontier = [k for c in frontier[:12] for k in space.children(c)]
        for k in frontier:
            assert space.replay(k.payload).structural_hash() == k.key
            n += 1
    assert n > 100


def test_task_identifies_the_model_and_the_rules():
    g = small_graph("resnet50")
    space = GraphSpace(g, name="my-model")
    assert space.task.kind == "graph" and space.task.name == "my-model"
    assert space.task.params["graph"] == g.content_hash() and space.task.params["n_rules"] == len(space.rules)
    assert GraphSpace(g, space.rules[:-1]).task.key != space.task.key  # another rule set, another task
    other = Graph(g.nodes, g.inputs, g.outputs, {k: w + 1 for k, w in g.weights.items()}, g.name)
    assert other.structural_hash() == g.structural_hash()  # same structure, other weights
    assert GraphSpace(other, name="my-model").task.key != space.task.key
    with pytest.raises(UsageError, match="given twice: fold_conv_bn"):
        GraphSpace(g, space.rules + [space.by_name["fold_conv_bn"]])
    # the same model at another input shape (an --input-shape, a re-export at another batch) is another task
    (name, (shape, dtype)), = g.inputs.items()
    batch8 = Graph(g.nodes, {name: ((8, *shape[1:]), dtype)}, g.outputs, g.weights, g.name)
    assert batch8.structural_hash() == g.structural_hash() and batch8.content_hash() == g.content_hash()
    assert GraphSpace(batch8, name="my-model").task.key != space.task.key
    assert GraphSpace(small_graph("resnet50"), name="my-model").task.key == space.task.key  # the same: resumed


def test_op_costs_measure_each_op_key_once_and_use_the_cache():
    cache = OpCostCache()
    cm = OpCosts(OnnxOpRunner(min_time=0.001), cache)
    g = small_graph("vgg19")
    c1 = cm.graph_cost(g)
    n = cm.measured
    assert 0 < n <= len(g.runtime_nodes()) and c1 > 0
    assert cm.graph_cost(g) == c1 and cm.measured == n
    cm2 = OpCosts(OnnxOpRunner(), cache)  # a second instance with the same cache measures nothing
    assert cm2.graph_cost(g) == pytest.approx(c1) and cm2.measured == 0


def test_analytic_estimate_without_runner_is_positive_and_monotone():
    cm = OpCosts(runner=None)
    g = small_graph("resnet50")
    convs = sorted((n for n in g.runtime_nodes() if n.op == "Conv"),
                   key=lambda n: np.prod(g.shape[n.inputs[1]]) * np.prod(g.shape[n.outputs[0]]))
    assert 0 < cm.op_cost(g, convs[0]) <= cm.op_cost(g, convs[-1])


def test_fusion_aware_cost_counts_fused_ops_free():
    g = small_graph("resnet50")
    bns = [n for n in g.runtime_nodes() if n.op == "BatchNormalization"]
    assert bns and all(fused_into_producer(g, n) for n in bns)
    relus_after_bn = [n for n in g.runtime_nodes() if n.op == "Relu" and g.producer[n.inputs[0]][0].op != "Add"]
    assert relus_after_bn and all(fused_into_producer(g, n) for n in relus_after_bn)
    adds = [n for n in g.runtime_nodes() if n.op == "Add"]  # residual adds of two activations are not fused
    assert adds and not any(fused_into_producer(g, n) for n in adds)
    free, full = OpCosts(runner=None), OpCosts(runner=None, fusion=False)
    assert free.graph_cost(g) < full.graph_cost(g)


def test_unmeasured_ops_are_predicted_by_the_op_cost_model_and_confirmed_when_relied_on():
    g = small_graph("inception_v3")
    cm = OpCosts(FakeOpRunner(), max_measure=24)
    stored = []
    cm.on_retrain = lambda metrics, data: stored.append((metrics, data))
    total = cm.graph_cost(g)
    assert cm.measured == 24 and cm.estimated > 0 and cm.model.trained
    assert stored and stored[0][0]["n_train"] >= 16 and stored[0][1]  # each training is reported with the model
    exact = OpCosts(FakeOpRunner(), max_measure=10_000, model=False).graph_cost(g)
    assert 0.5 < total / exact < 2.0  # the predicted remainder is in the right range
    measured_more = cm.confirm(g)
    assert measured_more > 0 and cm.confirm(g) == 0
    assert cm.graph_cost(g) == pytest.approx(exact, rel=1e-9)  # now every op it relies on is measured


def test_confirm_counts_the_distinct_ops_it_times_not_the_nodes():
    """NasRNN repeats a few ops at many nodes: the ops a result relies on that were only estimated are timed once
    each, and confirm says how many ops that was (the report's ops_confirmed), not how many nodes hold them."""
    from autotune.search_spaces.graphs.cost import counted_nodes

    g = small_graph("nasrnn")
    cm = OpCosts(FakeOpRunner(), max_measure=1, model=False)
    cm.graph_cost(g)
    distinct = {g.op_key(n) for n in counted_nodes(g, cm.fusion)}
    nodes = [n for n in counted_nodes(g, cm.fusion) if g.op_key(n) in cm.predicted_keys]
    assert cm.measured == 1 and len(nodes) > len(distinct) > 2
    confirmed = cm.confirm(g)
    assert confirmed == cm.measured - 1 == len(distinct) - 1 == cm.runner.calls - 1
    assert cm.confirm(g) == 0


def test_a_timed_graph_cost_times_every_op_and_an_untimeable_op_fails_the_graph_not_guesses_it():
    """GraphCostRunner(timed=True): every op of the graph is timed whatever the cap (the stored cost is a sum of
    measurements); an op the runner cannot time makes the graph a RUNTIME_ERROR naming it, not a partly
    guessed cost."""
    space = GraphSpace(small_graph("nasrnn"))
    root = space.initial()
    capped = GraphCostRunner(space, OpCosts(FakeOpRunner(), max_measure=1, model=False))
    timed = GraphCostRunner(space, OpCosts(FakeOpRunner(), max_measure=1, model=False), timed=True)
    exact = OpCosts(FakeOpRunner(), max_measure=None, model=False).graph_cost(space.graph(root))
    guess, measured = capped.measure(space.task, [root])[0], timed.measure(space.task, [root])[0]
    assert guess.ok and guess.meta["ops_estimated"] > 0 and guess.cost != pytest.approx(exact, rel=1e-9)
    assert measured.ok and measured.meta["ops_estimated"] == 0 and measured.cost == pytest.approx(exact, rel=1e-9)

    class NoSigmoid(FakeOpRunner):
        def measure(self, task, candidates):
            return [Measurement(c, Status.RUNTIME_ERROR, error="no kernel") if c.payload["op"] == "Sigmoid"
                    else m for c, m in zip(candidates, super().measure(task, candidates))]

    runner = NoSigmoid()
    broken = GraphCostRunner(space, OpCosts(runner, model=False), timed=True)
    m = broken.measure(space.task, [root])[0]
    assert m.status is Status.RUNTIME_ERROR and m.cost is None
    assert "op Sigmoid" in m.error and "could not be timed alone (RUNTIME_ERROR: no kernel)" in m.error
    calls = runner.calls
    assert broken.measure(space.task, [root])[0].status is Status.RUNTIME_ERROR and runner.calls == calls  # once


def test_graph_cost_runner_reports_invalid_candidates_and_op_counts():
    space = GraphSpace(small_graph("resnet50"))
    runner = GraphCostRunner(space, OpCosts(FakeOpRunner(), fusion=False))
    assert runner.device.name == "fake-op-runner" and "graph_cost" in runner.device.properties
    root, kid = space.initial(), next(space.children(space.initial()))
    wrong_key = Candidate(kid.payload, root.key)
    ms = runner.measure(space.task, [root, kid, wrong_key])
    assert [m.status for m in ms] == [Status.OK, Status.OK, Status.INVALID]
    assert ms[0].meta["ops_measured"] > 0 and ms[0].meta["ops_estimated"] == 0
    assert ms[1].cost < ms[0].cost  # the first rewrite (a BatchNormalization fold) removes an op
