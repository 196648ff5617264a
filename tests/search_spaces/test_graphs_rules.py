"""Built-in rules preserve the computation at every match; JSON round trip; specific rewrites."""

import json

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from autotune.runners.onnx_ops import max_errors
from autotune.search_spaces.graphs import model_zoo, onnx_io
from autotune.search_spaces.graphs.builtin_rules import BUILTIN, builtin_rules
from autotune.search_spaces.graphs.ir import Graph, Node
from autotune.search_spaces.graphs.rules import Rule


@pytest.mark.parametrize("name", sorted(model_zoo.MODELS))
def test_every_rule_application_preserves_outputs(name):
    model = model_zoo.build(name, small=True)
    g = onnx_io.from_onnx(model)
    applied = 0
    for rule in builtin_rules(include_neutral=True):
        for match in list(rule.matches(g))[:2]:
            g2 = rule.apply(g, match)
            assert g2 is not None, (rule.name, match)
            err = max_errors(model, onnx_io.to_onnx(g2), trials=1)
            assert err["max_rel_error"] < 1e-4, (rule.name, err)
            applied += 1
    assert applied > 0


def test_rules_chain_on_random_walks():
    from autotune.search_spaces.graphs.space import GraphSpace
    for name in ("squeezenet11", "bert_base", "inception_v3"):
        model = model_zoo.build(name, small=True)
        space = GraphSpace(onnx_io.from_onnx(model))
        rng = np.random.default_rng(0)
        c = space.initial()
        for _ in range(12):
            c = space.neighbor(c, rng)
        assert max_errors(model, onnx_io.to_onnx(space.graph(c)), trials=1)["max_rel_error"] < 1e-4


def test_rule_json_round_trip():
    for d in BUILTIN:
        r = Rule.from_json(json.loads(json.dumps(d)))
        assert Rule.from_json(r.to_json()).key == r.key


def test_conv_bn_folding_removes_the_bn():
    g = onnx_io.from_onnx(model_zoo.build("resnet50", small=True))
    rule = Rule.from_json(next(d for d in BUILTIN if d["name"] == "fold_conv_bn"))
    matches = list(rule.matches(g))
    assert len(matches) == sum(n.op == "BatchNormalization" for n in g.nodes)
    g2 = rule.apply(g, matches[0])
    assert len(g2.runtime_nodes()) == len(g.runtime_nodes()) - 1


def test_transpose_cancellation_and_condition():
    x = {"x": ((2, 3, 4), "float32")}
    g = Graph([Node.make("Transpose", ["x"], ["t"], {"perm": (1, 0, 2)}),
               Node.make("Transpose", ["t"], ["u"], {"perm": (1, 0, 2)}), Node.make("Relu", ["u"], ["y"])],
              x, ["y"], {})
    rules = {r.name: r for r in builtin_rules()}
    m = list(rules["transpose_cancel"].matches(g))
    assert len(m) == 1
    g2 = rules["transpose_cancel"].apply(g, m[0])
    assert [n.op for n in g2.nodes] == ["Relu"] and g2.nodes[0].inputs == ("x",)
    g3 = Graph([Node.make("Transpose", ["x"], ["t"], {"perm": (1, 0, 2)}),
                Node.make("Transpose", ["t"], ["y"], {"perm": (0, 2, 1)})], x, ["y"], {})
    assert not list(rules["transpose_cancel"].matches(g3))
    assert list(rules["transpose_compose"].matches(g3))


def test_source_output_used_outside_blocks_the_rule():
    w = {"w": np.ones((4, 4, 1, 1), np.float32), "b": np.zeros(4, np.float32), "k": np.full((4, 1, 1), 2, np.float32)}
    nodes = [Node.make("Conv", ["x", "w", "b"], ["c"], {"kernel_shape": (1, 1), "strides": (1, 1), "pads": (0,) * 4,
                                                          "dilations": (1, 1), "group": 1}),
             Node.make("Mul", ["c", "k"], ["y"]), Node.make("Relu", ["c"], ["z"])]
    g = Graph(nodes, {"x": ((1, 4, 3, 3), "float32")}, ["y", "z"], w)
    rules = {r.name: r for r in builtin_rules()}
    assert not list(rules["fold_conv_mul"].matches(g))  # c is also read by Relu
    g2 = Graph(nodes[:2], {"x": ((1, 4, 3, 3), "float32")}, ["y"], w)
    assert list(rules["fold_conv_mul"].matches(g2))


def test_nary_merge_then_activation_move_preserves_outputs():
    model = model_zoo.build("inception_v3", small=True)
    g = onnx_io.from_onnx(model)
    rules = {r.name: r for r in builtin_rules()}
    for name in ("fold_conv_bn", "merge_all_convs", "split_activation_merge"):
        before = len(g.runtime_nodes())
        for _ in range(100):
            m = next(iter(rules[name].matches(g)), None)
            if m is None:
                break
            g = rules[name].apply(g, m)
        assert len(g.runtime_nodes()) < before, name
    assert max_errors(model, onnx_io.to_onnx(g), trials=1)["max_rel_error"] < 1e-4


def _gelu_model(form: str, shape):
    """x -> Linear-free GELU as an exporter writes it (TorchScript: x * (1 + erf) * 0.5; dynamo: x * (0.5 * (1 + erf)))
    -> Relu, one input of ``shape``."""
    from onnx import TensorProto, helper, numpy_helper

    consts = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("c1", 2 ** 0.5), ("c2", 1.0), ("c3", 0.5))]
    nodes = [helper.make_node("Div", ["x", "c1"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "c2"], ["a"])]
    if form == "torchscript":
        nodes += [helper.make_node("Mul", ["x", "a"], ["m"]), helper.make_node("Mul", ["m", "c3"], ["g"])]
    else:
        nodes += [helper.make_node("Mul", ["c3", "a"], ["h"]), helper.make_node("Mul", ["x", "h"], ["g"])]
    nodes.append(helper.make_node("Relu", ["g"], ["y"]))
    graph = helper.make_graph(nodes, "gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))], consts)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("form", ["torchscript", "dynamo"])
@pytest.mark.parametrize("shape", [(2, 8), (1, 4, 16), (3, 5, 7)])
def test_gelu_forms_fuse_into_onnxruntimes_kernel_and_compute_the_same(form, shape):
    """Both exporters' GELU become one com.microsoft Gelu (the rule's numeric verification: onnxruntime runs
    both graphs on random inputs over several shapes; the kernel is float32 on the CPU)."""
    model = _gelu_model(form, shape)
    g = onnx_io.from_onnx(model)
    rule = next(r for r in builtin_rules() if r.name == f"fuse_gelu_{form}")
    assert rule.status == "tested"
    other = next(r for r in builtin_rules() if r.name.startswith("fuse_gelu_") and r.name != rule.name)
    assert not list(other.matches(g))  # each form matches its own rule only
    (match,) = list(rule.matches(g))
    out = onnx_io.to_onnx(rule.apply(g, match))
    assert [(n.op_type, n.domain) for n in out.graph.node] == [("Gelu", "com.microsoft"), ("Relu", "")]
    assert {(o.domain, o.version) for o in out.opset_import} == {("", 17), ("com.microsoft", 1)}
    assert max_errors(model, out, trials=3)["max_rel_error"] < 1e-5
    back = onnx_io.from_onnx(out)  # read back (as the torch backend and a second run do): the registered op
    assert [n.op for n in back.runtime_nodes()] == ["FusedGelu", "Relu"]


def _gelu_tanh_model(shape, k=0.044715):
    """x -> GPT-2's tanh GELU as both PyTorch exporters write it -> Relu."""
    from onnx import TensorProto, helper, numpy_helper

    consts = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
              (("c3", 3.0), ("k", k), ("r", (2 / np.pi) ** 0.5), ("one", 1.0), ("half", 0.5))]
    nodes = [helper.make_node("Pow", ["x", "c3"], ["p"]), helper.make_node("Mul", ["p", "k"], ["pk"]),
             helper.make_node("Add", ["x", "pk"], ["s"]), helper.make_node("Mul", ["s", "r"], ["sr"]),
             helper.make_node("Tanh", ["sr"], ["t"]), helper.make_node("Add", ["t", "one"], ["t1"]),
             helper.make_node("Mul", ["x", "half"], ["h"]), helper.make_node("Mul", ["h", "t1"], ["g"]),
             helper.make_node("Relu", ["g"], ["y"])]
    graph = helper.make_graph(nodes, "gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))], consts)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("shape", [(2, 8), (1, 4, 16), (3, 5, 7)])
def test_tanh_gelu_fuses_into_onnxruntimes_fastgelu_and_computes_the_same(shape):
    model = _gelu_tanh_model(shape)
    g = onnx_io.from_onnx(model)
    rule = next(r for r in builtin_rules() if r.name == "fuse_gelu_tanh")
    (match,) = list(rule.matches(g))
    out = onnx_io.to_onnx(rule.apply(g, match))
    assert [(n.op_type, n.domain) for n in out.graph.node] == [("FastGelu", "com.microsoft"), ("Relu", "")]
    assert max_errors(model, out, trials=3)["max_rel_error"] < 1e-5
    assert [n.op for n in onnx_io.from_onnx(out).runtime_nodes()] == ["FusedFastGelu", "Relu"]
    assert not list(rule.matches(onnx_io.from_onnx(_gelu_tanh_model(shape, k=0.05))))  # another constant


def test_gelu_rule_needs_the_exact_constants():
    from onnx import numpy_helper

    model = _gelu_model("dynamo", (2, 8))
    model.graph.initializer[2].CopyFrom(numpy_helper.from_array(np.array(0.45, np.float32), "c3"))  # not 0.5
    g = onnx_io.from_onnx(model)
    assert not [m for r in builtin_rules() if r.name.startswith("fuse_gelu_") for m in r.matches(g)]


_RELU_TWICE = {"name": "relu_twice", "source": [{"op": "Relu", "in": ["x"], "out": ["a"]},
                                               {"op": "Relu", "in": ["a"], "out": ["y"]}],
               "target": [{"op": "Relu", "in": ["x"], "out": ["y2"]}], "outputs": {"y": "y2"}}


def _with(**changes):
    return {**_RELU_TWICE, **changes}


@pytest.mark.parametrize("rules, fault", [
    ([{k: v for k, v in _RELU_TWICE.items() if k != "outputs"}], "rule 1 ('relu_twice'): missing key 'outputs'"),
    ([_with(condition=[["rank", "x", 2]])], "unknown key 'condition' (did you mean 'conditions'?)"),
    ([_with(target=[{"op": "Reluu", "in": ["x"], "out": ["y2"]}])], "target op 1: unknown op 'Reluu' (did you mean 'Relu'?)"),
    ([_with(source=[{"op": "Rleu", "in": ["x"], "out": ["y"]}])], "source op 1: unknown op 'Rleu'"),
    ([_with(target=[{"op": "Erf", "in": ["x"], "out": ["y2"]}])], "target op 1: 'Erf' is not an op of the graph IR"),
    ([_with(target=[{"op": "Relu", "in": ["z"], "out": ["y2"]}])], "target op 1 (Relu) reads 'z', which neither"),
    ([_with(target=[{"op": "Relu", "in": ["x"]}])], "target op 1 has no 'out'"),
    ([_with(outputs={"q": "y2"})], "outputs: 'q' is not an output of a source op"),
    ([_with(conditions=[["rnak", "x", 2]])], "unknown condition 'rnak'"),
    ([_with(target=[{"op": "Relu", "in": ["x"], "out": ["y2"], "attrs": {"k": {"fn": "nope", "args": []}}}])],
     "calls unknown function 'nope'"),
    ([_RELU_TWICE, _RELU_TWICE], "rule 2 ('relu_twice'): its name is given twice"),
    ([3], "rule 1: a rule must be a JSON object"),
    ({"rulez": []}, 'expected a list of rules or {"rules": [...]}'),
])
def test_a_bad_rules_file_is_refused_naming_the_file_the_rule_and_the_fault(tmp_path, rules, fault):
    from autotune.errors import UsageError
    from autotune.search_spaces.graphs.rule_files import load_rules

    path = tmp_path / "rules.json"
    path.write_text(json.dumps(rules))
    with pytest.raises(UsageError) as info:
        load_rules(str(path))
    assert str(info.value).startswith(f"rules file {str(path)!r}") and fault in str(info.value)


def test_rules_read_from_a_file_have_the_file_as_provenance_and_are_unverified(tmp_path):
    from autotune.search_spaces.graphs.rule_files import load_rules

    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"rules": [_with(provenance="builtin", status="proved")]}))
    (rule,) = load_rules(str(path))
    assert (rule.provenance, rule.status) == (f"file:{path}", "unverified")
    assert rule.key == Rule.from_json(_RELU_TWICE).key  # the content, and so the search's task, is unchanged
