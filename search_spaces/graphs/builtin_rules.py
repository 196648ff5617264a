"""The built-in rule set: hand-written JSON patterns and the code rules (attention fusion in attention.py).

Pattern rules are plain JSON (see rules.py). The n-ary rules (common-subexpression
elimination and merging *all* compatible siblings of a tensor at once) cannot be
written as fixed-size patterns; they have the same interface (matches/apply).
"""

from __future__ import annotations

import hashlib
import math

from autotune.search_spaces.graphs.attention import FuseAttention
from autotune.search_spaces.graphs.ir import Graph, Node
from autotune.search_spaces.graphs.rules import CodeRule, Rule


def N(op, ins, outs, attrs=None):
    d = {"op": op, "in": ins, "out": outs}
    if attrs is not None:
        d["attrs"] = attrs
    return d


def _act_rules():
    out = []
    for act in ("Relu", "Sigmoid", "Tanh"):
        out.append({"name": f"split_{act.lower()}_merge",
                    "source": [N("Split", ["m"], ["a", "b"], "S"), N(act, ["a"], ["y1"]), N(act, ["b"], ["y2"])],
                    "target": [N(act, ["m"], ["r"]), N("Split", ["r"], ["y1", "y2"], "S")],
                    "outputs": {"y1": "y1", "y2": "y2"}, "conditions": [["two_way", "S"]]})
        out.append({"name": f"concat_{act.lower()}_merge",
                    "source": [N("Concat", ["p", "q"], ["y"], "C"), N(act, ["a"], ["p"]), N(act, ["b"], ["q"])],
                    "target": [N("Concat", ["a", "b"], ["c"], "C"), N(act, ["c"], ["y"])],
                    "outputs": {"y": "y"}})
    return out


def _gelu_rules():
    """x * 0.5 * (1 + erf(x / sqrt 2)), as the TorchScript exporter writes it and as the dynamo exporter does
    (0.5 times the sum first), to onnxruntime's Gelu kernel; onnxruntime fuses only the first form itself.
    GPT-2's tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as both exporters write it,
    to its FastGelu kernel. Verified numerically against onnxruntime over several shapes
    (tests/search_spaces/test_graphs_rules.py)."""
    head = [N("Div", ["x", "c1"], ["d"]), N("Erf", ["d"], ["e"]), N("Add", ["e", "c2"], ["a"])]
    tails = {"torchscript": [N("Mul", ["x", "a"], ["m"]), N("Mul", ["m", "c3"], ["y"])],
             "dynamo": [N("Mul", ["c3", "a"], ["h"]), N("Mul", ["x", "h"], ["y"])]}
    erf = [{"name": f"fuse_gelu_{form}", "source": head + tail, "target": [N("FusedGelu", ["x"], ["y"])],
            "outputs": {"y": "y"}, "status": "tested",
            "conditions": [["activation", "x"], ["scalar", "c1", 2 ** 0.5], ["scalar", "c2", 1.0],
                           ["scalar", "c3", 0.5]]} for form, tail in tails.items()]
    tanh = {"name": "fuse_gelu_tanh",
            "source": [N("Pow", ["x", "c3"], ["p"]), N("Mul", ["p", "k"], ["pk"]), N("Add", ["x", "pk"], ["s"]),
                       N("Mul", ["s", "r"], ["sr"]), N("Tanh", ["sr"], ["t"]), N("Add", ["t", "one"], ["t1"]),
                       N("Mul", ["x", "half"], ["h"]), N("Mul", ["h", "t1"], ["y"])],
            "target": [N("FusedFastGelu", ["x"], ["y"])], "outputs": {"y": "y"}, "status": "tested",
            "conditions": [["activation", "x"], ["scalar", "c3", 3.0], ["scalar", "k", 0.044715],
                           ["scalar", "r", (2 / math.pi) ** 0.5], ["scalar", "one", 1.0], ["scalar", "half", 0.5]]}
    return [*erf, tanh]


BUILTIN = [
    {"name": "fold_conv_bn",
     "source": [N("Conv", ["x", "w", "b"], ["c"], "A"), N("BatchNormalization", ["c", "s", "bb", "m", "v"], ["y"], "B")],
     "target": [N("_BNScale", ["s", "v"], ["k"], {"epsilon": "B.epsilon"}), N("_ScaleRows", ["w", "k"], ["w2"]),
                N("_BNBias", ["b", "k", "m", "bb"], ["b2"]), N("Conv", ["x", "w2", "b2"], ["y"], "A")],
     "outputs": {"y": "y"}, "conditions": [["weight", "w", "b", "s", "bb", "m", "v"]]},
    {"name": "fold_conv_mul",
     "source": [N("Conv", ["x", "w", "b"], ["c"], "A"), N("Mul", ["c", "k"], ["y"])],
     "target": [N("_ScaleRows", ["w", "k"], ["w2"]), N("_ScaleRows", ["b", "k"], ["b2"]),
                N("Conv", ["x", "w2", "b2"], ["y"], "A")],
     "outputs": {"y": "y"}, "conditions": [["weight", "w", "b", "k"], ["per_channel", "k", "c"]]},
    {"name": "fold_conv_add",
     "source": [N("Conv", ["x", "w", "b"], ["c"], "A"), N("Add", ["c", "k"], ["y"])],
     "target": [N("_AddVec", ["b", "k"], ["b2"]), N("Conv", ["x", "w", "b2"], ["y"], "A")],
     "outputs": {"y": "y"}, "conditions": [["weight", "w", "b", "k"], ["per_channel", "k", "c"]]},
    {"name": "fold_matmul_mul",
     "source": [N("MatMul", ["x", "w"], ["c"]), N("Mul", ["c", "k"], ["y"])],
     "target": [N("_ScaleCols", ["w", "k"], ["w2"]), N("MatMul", ["x", "w2"], ["y"])],
     "outputs": {"y": "y"}, "conditions": [["weight", "w", "k"], ["rank", "w", 2], ["last_axis_vec", "k", "c"]]},
    {"name": "fold_gemm_mul",
     "source": [N("Gemm", ["x", "w", "b"], ["c"], "A"), N("Mul", ["c", "k"], ["y"])],
     "target": [N("Transpose", ["w"], ["wt"], {"perm": [1, 0]}), N("_ScaleCols", ["wt", "k"], ["w2"]),
                N("_ScaleRows", ["b", "k"], ["b2"]), N("Gemm", ["x", "w2", "b2"], ["y"], {"transB": 0})],
     "outputs": {"y": "y"}, "conditions": [["weight", "w", "b", "k"], ["last_axis_vec", "k", "c"],
                                           ["gemm_plain_transB", "A"]]},
    {"name": "merge_convs",
     "source": [N("Conv", ["x", "w1", "b1"], ["y1"], "A"), N("Conv", ["x", "w2", "b2"], ["y2"], "A")],
     "target": [N("Concat", ["w1", "w2"], ["w"], {"axis": 0}), N("Concat", ["b1", "b2"], ["b"], {"axis": 0}),
                N("Conv", ["x", "w", "b"], ["m"], "A"),
                N("Split", ["m"], ["y1", "y2"], {"axis": 1, "split": {"fn": "rows", "args": ["w1", "w2"]}})],
     "outputs": {"y1": "y1", "y2": "y2"},
     "conditions": [["weight", "w1", "b1", "w2", "b2"], ["group1", "A"], ["ordered", "y1", "y2"]]},
    {"name": "enlarge_conv_kernel",
     "source": [N("Conv", ["x", "w1", "b1"], ["y1"], "A1"), N("Conv", ["x", "w2", "b2"], ["y2"], "A2")],
     "target": [N("_PadKernel", ["w1"], ["w3"], {"size": {"fn": "kernel", "args": ["A2"]}}),
                N("Conv", ["x", "w3", "b1"], ["y1"], "A2"), N("Conv", ["x", "w2", "b2"], ["y2"], "A2")],
     "outputs": {"y1": "y1", "y2": "y2"}, "conditions": [["weight", "w1", "w2"], ["kernel_1x1_vs_kxk", "A1", "A2"]]},
    {"name": "merge_matmuls",
     "source": [N("MatMul", ["x", "w1"], ["y1"]), N("MatMul", ["x", "w2"], ["y2"])],
     "target": [N("Concat", ["w1", "w2"], ["w"], {"axis": 1}), N("MatMul", ["x", "w"], ["m"]),
                N("Split", ["m"], ["y1", "y2"], {"axis": {"fn": "last_axis", "args": ["y1"]},
                                                 "split": {"fn": "cols", "args": ["w1", "w2"]}})],
     "outputs": {"y1": "y1", "y2": "y2"},
     "conditions": [["weight", "w1", "w2"], ["rank", "w1", 2], ["rank", "w2", 2], ["ordered", "y1", "y2"]]},
    {"name": "split_add_merge",
     "source": [N("Split", ["m"], ["a", "b"], "S"), N("Add", ["a", "c1"], ["y1"]), N("Add", ["b", "c2"], ["y2"])],
     "target": [N("Concat", ["c1", "c2"], ["c"], {"axis": 0}), N("Add", ["m", "c"], ["m2"]),
                N("Split", ["m2"], ["y1", "y2"], "S")],
     "outputs": {"y1": "y1", "y2": "y2"},
     "conditions": [["weight", "c1", "c2"], ["two_way", "S"], ["split_bias", "S", "a", "c1", "c2"]]},
    *_act_rules(),
    {"name": "split_concat_cancel",
     "source": [N("Split", ["m"], ["a", "b"], "S"), N("Concat", ["a", "b"], ["y"], "C")],
     "target": [], "outputs": {"y": "m"}, "conditions": [["two_way", "S"], ["split_concat_axis", "S", "C", "a"]]},
    {"name": "transpose_cancel",
     "source": [N("Transpose", ["x"], ["t"], "P1"), N("Transpose", ["t"], ["y"], "P2")],
     "target": [], "outputs": {"y": "x"}, "conditions": [["perm_identity", "P1", "P2"]]},
    {"name": "transpose_compose",
     "source": [N("Transpose", ["x"], ["t"], "P1"), N("Transpose", ["t"], ["y"], "P2")],
     "target": [N("Transpose", ["x"], ["y"], {"perm": {"fn": "compose_perm", "args": ["P1", "P2"]}})],
     "outputs": {"y": "y"}},
    {"name": "reshape_cancel",
     "source": [N("Reshape", ["x", "s1"], ["t"]), N("Reshape", ["t", "s2"], ["y"])],
     "target": [], "outputs": {"y": "x"}, "conditions": [["same_shape", "x", "y"]]},
    {"name": "reshape_compose",
     "source": [N("Reshape", ["x", "s1"], ["t"]), N("Reshape", ["t", "s2"], ["y"])],
     "target": [N("Reshape", ["x", "s2"], ["y"])], "outputs": {"y": "y"}, "conditions": [["no_zero", "s2"]]},
    {"name": "assoc_matmul_weights",
     "source": [N("MatMul", ["x", "a"], ["t"]), N("MatMul", ["t", "b"], ["y"])],
     "target": [N("MatMul", ["a", "b"], ["ab"]), N("MatMul", ["x", "ab"], ["y"])],
     "outputs": {"y": "y"}, "conditions": [["weight", "a", "b"], ["activation", "x"]]},
    {"name": "assoc_add_weights",
     "source": [N("Add", ["x", "a"], ["t"]), N("Add", ["t", "b"], ["y"])],
     "target": [N("Add", ["a", "b"], ["ab"]), N("Add", ["x", "ab"], ["y"])],
     "outputs": {"y": "y"}, "conditions": [["weight", "a", "b"], ["activation", "x"]]},
    {"name": "assoc_mul_weights",
     "source": [N("Mul", ["x", "a"], ["t"]), N("Mul", ["t", "b"], ["y"])],
     "target": [N("Mul", ["a", "b"], ["ab"]), N("Mul", ["x", "ab"], ["y"])],
     "outputs": {"y": "y"}, "conditions": [["weight", "a", "b"], ["activation", "x"]]},
    {"name": "distrib_matmul_add",
     "source": [N("Add", ["p", "q"], ["y"]), N("MatMul", ["x", "a"], ["p"]), N("MatMul", ["x", "b"], ["q"])],
     "target": [N("Add", ["a", "b"], ["ab"]), N("MatMul", ["x", "ab"], ["y"])],
     "outputs": {"y": "y"}, "conditions": [["weight", "a", "b"], ["same_shape", "a", "b"]]},
    {"name": "matmul_concat_add",
     "source": [N("Add", ["p", "q"], ["y"]), N("MatMul", ["x", "a"], ["p"]), N("MatMul", ["h", "b"], ["q"])],
     "target": [N("Concat", ["x", "h"], ["xh"], {"axis": -1}), N("Concat", ["a", "b"], ["ab"], {"axis": 0}),
                N("MatMul", ["xh", "ab"], ["y"])],
     "outputs": {"y": "y"}, "conditions": [["weight", "a", "b"], ["rank", "a", 2], ["rank", "b", 2],
                                           ["activation", "x", "h"], ["same_prefix", "x", "h"],
                                           ["same_shape", "p", "q"]]},
    {"name": "distrib_mul_add",
     "source": [N("Add", ["p", "q"], ["y"]), N("Mul", ["a", "k"], ["p"]), N("Mul", ["b", "k"], ["q"])],
     "target": [N("Add", ["a", "b"], ["s"]), N("Mul", ["s", "k"], ["y"])],
     "outputs": {"y": "y"}, "conditions": [["same_shape", "a", "b"]]},
    {"name": "comm_add", "source": [N("Add", ["a", "b"], ["y"])], "target": [N("Add", ["b", "a"], ["y"])],
     "outputs": {"y": "y"}, "neutral": True},
    {"name": "comm_mul", "source": [N("Mul", ["a", "b"], ["y"])], "target": [N("Mul", ["b", "a"], ["y"])],
     "outputs": {"y": "y"}, "neutral": True},
]


class CSE(CodeRule):
    """Common-subexpression elimination: identical nodes (op, attributes, inputs) computed once."""

    name = "cse"

    def _groups(self, g: Graph):
        seen: dict = {}
        for n in g.nodes:
            if not g.is_weight[n.outputs[0]]:
                seen.setdefault((n.op, n.attrs, n.inputs, len(n.outputs)), []).append(n)
        return [v for v in seen.values() if len(v) > 1]

    def matches(self, g):
        for grp in self._groups(g):
            yield tuple(n.outputs[0] for n in grp)

    def apply(self, g, match):
        grp = [g.producer[t][0] for t in match if t in g.producer]
        if len(grp) < 2 or len({(n.op, n.attrs, n.inputs) for n in grp}) != 1:
            return None
        rename = {t: u for n in grp[1:] for t, u in zip(n.outputs, grp[0].outputs)}
        return g.replace(grp[1:], [], rename)


class MergeSiblings(CodeRule):
    """Merge *all* Conv (or MatMul) consumers of one tensor with equal attributes: concat weights, run once, split."""

    def __init__(self, op: str):
        self.op, self.name = op, f"merge_all_{op.lower()}s"

    def _groups(self, g: Graph):
        out = []
        for t, users in g.consumers.items():
            if g.is_weight[t]:
                continue
            grp: dict = {}
            for n in users:
                if n.op != self.op or n.inputs[0] != t or not all(g.is_weight[w] for w in n.inputs[1:]):
                    continue
                if self.op == "Conv" and n.a["group"] != 1 or self.op == "MatMul" and len(g.shape[n.inputs[1]]) != 2:
                    continue
                grp.setdefault(n.attrs, []).append(n)
            out += [v for v in grp.values() if len(v) > 2]  # pairs are covered by the pattern rules
        return out

    def matches(self, g):
        for grp in self._groups(g):
            yield tuple(n.outputs[0] for n in grp)

    def apply(self, g, match):
        grp = [g.producer[t][0] for t in match if t in g.producer]
        if len(grp) < 2 or len({(n.op, n.attrs, n.inputs[0]) for n in grp}) != 1:
            return None
        tag = hashlib.sha1(repr((self.name, match)).encode()).hexdigest()[:6]
        x, base = grp[0].inputs[0], f"{match[0]}_{tag}"
        wax, oax = (0, 1) if self.op == "Conv" else (1, len(g.shape[grp[0].outputs[0]]) - 1)
        sizes = [g.shape[n.inputs[1]][wax] for n in grp]
        add = [Node.make("Concat", [n.inputs[1] for n in grp], [f"{base}_w"], {"axis": wax})]
        ins = [x, f"{base}_w"]
        if self.op == "Conv":
            add.append(Node.make("Concat", [n.inputs[2] for n in grp], [f"{base}_b"], {"axis": 0}))
            ins.append(f"{base}_b")
        add.append(Node(self.op, tuple(ins), (f"{base}_m",), grp[0].attrs))
        add.append(Node.make("Split", [f"{base}_m"], [n.outputs[0] for n in grp], {"axis": oax, "split": sizes}))
        return g.replace(grp, add)

    def apply_egraph(self, eg) -> None:
        """The same merge in an e-graph (``egraph.EGraph``), once per saturation round: for each tensor, the
        classes its consumers of this op produce from weights (folded weights too, not merged ones), grouped
        by attributes, each class by its latest e-node; a class another member is computed from (a Conv's
        output that a folded BatchNormalization replaced) is left out; groups of three or more merged."""
        made_by: dict[int, set] = {}
        readers: dict[int, list] = {}
        for n in eg.nodes:
            for c in n.outputs:
                made_by.setdefault(eg.find(c), set()).add(n.op)
            for c in n.inputs:
                readers.setdefault(eg.find(c), []).append(n)
        groups: dict = {}
        for n in list(eg.nodes):
            x, ws = eg.find(n.inputs[0]), [eg.find(c) for c in n.inputs[1:]]
            if n.op != self.op or eg.is_weight[x] or not ws or not all(eg.is_weight[w] for w in ws) or \
                    any("Concat" in made_by.get(w, ()) for w in ws):
                continue
            if self.op == "Conv" and (n.a.get("group", 1) != 1 or len(ws) != 2) or \
                    self.op == "MatMul" and len(eg.shape[ws[0]]) != 2:
                continue
            groups.setdefault((x, n.attrs), {})[eg.find(n.outputs[0])] = n
        for (x, attrs), by_class in groups.items():
            grp = [n for c, n in by_class.items()
                   if not any(eg.find(o) in by_class for r in readers.get(c, ()) for o in r.outputs)]
            if len(grp) <= 2:
                continue
            wax, oax = (0, 1) if self.op == "Conv" else (1, len(eg.shape[eg.find(grp[0].outputs[0])]) - 1)
            ins = [x, eg.add_op("Concat", {"axis": wax}, [n.inputs[1] for n in grp])[0]]
            if self.op == "Conv":
                ins.append(eg.add_op("Concat", {"axis": 0}, [n.inputs[2] for n in grp])[0])
            merged = eg.add_op(self.op, dict(attrs), ins)
            sizes = [eg.shape[eg.find(n.inputs[1])][wax] for n in grp]
            outs = eg.add_op("Split", {"axis": oax, "split": sizes}, [merged[0]]) if merged else None
            for n, o in zip(grp, outs or ()):
                eg.union(n.outputs[0], o)


class SplitActivation(CodeRule):
    """Split whose every output feeds only the same activation -> activation once before the split
    (n-ary form of split_relu_merge; keeps the activation fusable into the producer of the split input)."""

    name = "split_activation_merge"
    ACTS = ("Relu", "Sigmoid", "Tanh")

    def _acts(self, g: Graph, split: Node):
        acts = []
        for t in split.outputs:
            users = g.consumers.get(t, [])
            if len(users) != 1 or t in g.outputs or users[0].op not in self.ACTS:
                return None
            acts.append(users[0])
        return acts if len({a.op for a in acts}) == 1 else None

    def matches(self, g):
        for n in g.by_op.get("Split", []):
            if len(n.outputs) > 2 and self._acts(g, n):  # two-way splits: the pattern rules
                yield (n.outputs[0],)

    def apply(self, g, match):
        split = g.producer.get(match[0], (None,))[0]
        acts = self._acts(g, split) if split is not None and split.op == "Split" else None
        if not acts:
            return None
        r = f"{match[0]}_{self.name}"
        add = [Node.make(acts[0].op, [split.inputs[0]], [r]),
               Node(split.op, (r,), tuple(a.outputs[0] for a in acts), split.attrs)]
        return g.replace([split, *acts], add)


def builtin_rules(include_neutral: bool = False) -> list:
    rules = [Rule.from_json(d) for d in BUILTIN + _gelu_rules()]
    rules = [r for r in rules if include_neutral or not r.neutral]
    return rules + [CSE(), MergeSiblings("Conv"), MergeSiblings("MatMul"), SplitActivation(), FuseAttention()]
