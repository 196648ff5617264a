"""Substitution rules: a source pattern and a target pattern over shared variables.

A rule is JSON::

    {"name": "fold_conv_mul",
     "source": [{"op": "Conv", "in": ["x", "w", "b"], "out": ["c"], "attrs": "A"},
                {"op": "Mul", "in": ["c", "k"], "out": ["y"]}],
     "target": [{"op": "_ScaleRows", "in": ["w", "k"], "out": ["w2"]}, ...,
                {"op": "Conv", "in": ["x", "w2", "b2"], "out": ["y"], "attrs": "A"}],
     "outputs": {"y": "y"},            # source tensor var -> target var (multi-output allowed)
     "conditions": [["weight", "w", "b", "k"], ["per_channel", "k", "c"]],
     "provenance": "builtin", "status": "hand-written"}

Source ``attrs`` is a variable bound to the node's attribute dict (equal
variables must bind equal dicts). Target ``attrs`` is a variable, or a dict whose
values are literals, ``"A.name"`` (an attribute of a bound dict) or
``{"fn": NAME, "args": [...]}``. Conditions and functions are named helpers in
:data:`PREDICATES` and :data:`FUNCTIONS`: rules never run code from JSON. A
source output not listed in ``outputs`` must have no consumer outside the match.
A target var that is a source variable (``{"y": "x"}``) redirects readers of y to x.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from autotune.errors import UsageError, did_you_mean
from autotune.search_spaces.graphs.ir import Graph, Node


def _shape(g, t):
    return g.shape[t]


def _per_channel(g, k, c):  # k broadcasts along axis 1 of a rank-4 c, or is a scalar
    s, cs = g.shape[k], g.shape[c]
    n = int(np.prod(s)) if s else 1
    return n == 1 or (n == cs[1] and (s in ((cs[1], 1, 1), (1, cs[1], 1, 1))))


def _last_axis_vec(g, k, c):
    s, cs = g.shape[k], g.shape[c]
    n = int(np.prod(s)) if s else 1
    return n == 1 or (n == cs[-1] and all(v == 1 for v in s[:-1]))


def _kernel_1x1_vs_kxk(g, a1, a2):
    k2 = a2["kernel_shape"]
    return (tuple(a1["kernel_shape"]) == (1, 1) and a1["group"] == a2["group"] == 1 and tuple(a1["pads"]) == (0,) * 4
            and a1["strides"] == a2["strides"] and a2["dilations"] == (1, 1) and all(k % 2 for k in k2)
            and tuple(a2["pads"]) == (k2[0] // 2, k2[1] // 2) * 2 and tuple(k2) != (1, 1))


def _split_bias(g, s, a, c1, c2):
    ax = s["axis"] % len(g.shape[a])
    if ax == len(g.shape[a]) - 1:
        return len(g.shape[c1]) == 1 and len(g.shape[c2]) == 1 and g.shape[c1][0] == g.shape[a][-1] \
            and g.shape[c2][0] == s["split"][1]
    return ax == 1 and len(g.shape[a]) == 4 and _per_channel(g, c1, a) and g.shape[c1][0] == g.shape[a][1] \
        and len(g.shape[c2]) == 3 and g.shape[c2][0] == s["split"][1]


def _perm_identity(g, p1, p2):
    return [p1["perm"][i] for i in p2["perm"]] == list(range(len(p1["perm"])))


def _scalar(g, t, value):  # a one-element weight equal to value (to float32 rounding)
    w = g.weights.get(t)
    return w is not None and w.size == 1 and abs(float(w.reshape(-1)[0]) - value) <= 1e-6 * max(1.0, abs(value))


PREDICATES = {
    "scalar": _scalar,
    "weight": lambda g, *ts: all(g.is_weight[t] for t in ts),
    "activation": lambda g, *ts: not any(g.is_weight[t] for t in ts),
    "same": lambda g, a, b: a == b,
    "ordered": lambda g, a, b: g.order[a] < g.order[b],
    "group1": lambda g, a: a.get("group", 1) == 1,
    "rank": lambda g, t, r: len(g.shape[t]) == r,
    "same_shape": lambda g, a, b: g.shape[a] == g.shape[b],
    "per_channel": _per_channel,
    "last_axis_vec": _last_axis_vec,
    "kernel_1x1_vs_kxk": _kernel_1x1_vs_kxk,
    "split_bias": _split_bias,
    "two_way": lambda g, s: len(s["split"]) == 2,
    "split_concat_axis": lambda g, s, c, a: s["axis"] % len(g.shape[a]) == c["axis"] % len(g.shape[a]),
    "perm_identity": _perm_identity,
    "no_zero": lambda g, s: s in g.weights and 0 not in [int(v) for v in g.weights[s]],
    "same_prefix": lambda g, a, b: g.shape[a][:-1] == g.shape[b][:-1],
    "gemm_plain_transB": lambda g, a: a.get("transA", 0) == 0 and a.get("transB", 0) == 1
    and a.get("alpha", 1.0) == 1.0 and a.get("beta", 1.0) == 1.0,
    "no_transB": lambda g, a: not a.get("transA") and not a.get("transB"),
}

FUNCTIONS = {
    "rows": lambda g, *ws: [g.shape[w][0] for w in ws],
    "cols": lambda g, *ws: [g.shape[w][-1] for w in ws],
    "last_axis": lambda g, t: len(g.shape[t]) - 1,
    "kernel": lambda g, a: list(a["kernel_shape"]),
    "dims": lambda g, v1, i1, v2, i2: [g.shape[v1][i1], g.shape[v2][i2]],
    "compose_perm": lambda g, p1, p2: [p1["perm"][i] for i in p2["perm"]],
}


@dataclass
class Rule:
    name: str
    source: list[dict]
    target: list[dict]
    outputs: dict[str, str]
    conditions: list[list] = field(default_factory=list)
    provenance: str = "builtin"
    status: str = "hand-written"
    neutral: bool = False  # never changes the cost by itself (commutativity...)

    @classmethod
    def from_json(cls, d: dict) -> Rule:
        """The rule ``d`` describes; UsageError naming the rule and its first fault (:func:`rule_fault`)."""
        fault = rule_fault(d)
        if fault:
            raise UsageError(f"rule {d.get('name') if isinstance(d, dict) else None!r}: {fault}")
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @property
    def key(self) -> str:
        return hashlib.sha1(json.dumps([self.source, self.target, self.outputs, self.conditions],
                                       sort_keys=True).encode()).hexdigest()[:12]

    # -- matching ---------------------------------------------------------------
    def matches(self, g: Graph) -> Iterator[tuple[str, ...]]:
        """Each match as the tuple of matched nodes' first output names (stable across graphs)."""
        for bind, nodes in self._match(g, 0, {}, []):
            yield tuple(n.outputs[0] for n in nodes)

    def _match(self, g, i, bind, nodes, fixed=None):
        if i == len(self.source):
            if self._ok(g, bind, nodes):
                yield dict(bind), list(nodes)
            return
        pn = self.source[i]
        bound = [bind[v] for v in pn["in"] if v in bind and not g.is_weight.get(bind[v], True)]
        produced = [bind[v] for v in pn["out"] if v in bind]
        if fixed is not None:
            cands = [fixed[i]]
        elif produced:
            cands = [g.producer[produced[0]][0]] if produced[0] in g.producer else []
        elif bound:
            cands = g.consumers.get(bound[0], [])
        else:
            cands = g.by_op.get(pn["op"], [])
        for n in cands:
            if n.op != pn["op"] or len(n.outputs) != len(pn["out"]) or any(n is m for m in nodes):
                continue
            ins = pattern_inputs(pn, n.op, n.inputs, lambda t: _zero_weight(g, t))
            if ins is None:
                continue
            new = bind_node(pn, bind, ins, n.outputs, n.a)
            if new is not None:
                yield from self._match(g, i + 1, new, nodes + [n], fixed)

    def _ok(self, g, bind, nodes):
        inside = {id(n) for n in nodes}
        for pn in self.source:
            for v in pn["out"]:
                if v not in self.outputs and (bind[v] in g.outputs or
                                              any(id(c) not in inside for c in g.consumers.get(bind[v], []))):
                    return False
        return self.conditions_hold(g, bind)

    def conditions_hold(self, g, bind: dict) -> bool:
        """Whether every condition holds for the variables of ``bind`` in ``g`` (a failing lookup: it does not)."""
        try:
            return all(PREDICATES[c[0]](g, *[bind.get(a, a) if isinstance(a, str) else a for a in c[1:]])
                       for c in self.conditions)
        except (KeyError, IndexError, TypeError):
            return False

    # -- application ------------------------------------------------------------
    def apply(self, g: Graph, match: tuple[str, ...]) -> Graph | None:
        """The rewritten graph, or None when ``match`` no longer matches in ``g``."""
        roots = [g.producer.get(t, (None,))[0] for t in match]
        if any(r is None for r in roots):
            return None
        for bind, nodes in self._match(g, 0, {}, [], roots):
            return self._build(g, bind, nodes, match)
        return None

    def _build(self, g, bind, nodes, match):
        env = dict(bind)
        rename = {}
        tag = hashlib.sha1(repr((self.name, match)).encode()).hexdigest()[:6]
        produced = {v for tn in self.target for v in tn["out"]}
        back = {}
        for s, t in self.outputs.items():
            if t in produced and t not in back:
                back[t] = bind[s]
            elif t in produced:
                rename[bind[s]] = ("var", t)
            else:
                rename[bind[s]] = ("var", t)
        for v in produced:
            env[v] = back.get(v) or g.fresh(f"{match[0]}_{tag}_{v}")
        add = []
        for tn in self.target:
            attrs = self._attrs(g, env, tn.get("attrs"))
            add.append(Node.make(tn["op"], [env[v] for v in tn["in"]], [env[v] for v in tn["out"]], attrs))
        rename = {k: env[v] for k, (_, v) in rename.items()}
        try:
            return g.replace(nodes, add, rename)
        except UsageError:
            return None  # the rewrite would create a cycle

    def _attrs(self, g, env, spec):
        if spec is None:
            return {}
        if isinstance(spec, str):
            return dict(env[spec])
        out = {}
        for k, v in spec.items():
            if isinstance(v, str) and "." in v:
                var, _, name = v.partition(".")
                out[k] = env[var][name]
            elif isinstance(v, dict):
                out[k] = FUNCTIONS[v["fn"]](g, *[env.get(a, a) if isinstance(a, str) else a for a in v["args"]])
            else:
                out[k] = v
        return out


class CodeRule:
    """A rule written in code, for rewrites a fixed pattern cannot express (n-ary merges, attention in any
    layout): ``matches(graph)`` yields match keys, ``apply(graph, match)`` gives the rewritten graph or None,
    and an optional ``apply_egraph(egraph)`` applies it at every match in an e-graph."""

    provenance, status, neutral = "builtin", "hand-written", False

    def to_json(self) -> dict:
        return {"name": self.name, "code": True, "provenance": self.provenance, "status": self.status}


def pattern_inputs(pn: dict, op: str, ins, zero_bias) -> list | None:
    """A node's inputs as pattern node ``pn`` reads them (None when their number differs): a bias-free
    pattern (as generated) matches a Conv whose bias ``zero_bias(input)`` says is all zero."""
    ins = list(ins)
    if len(ins) == len(pn["in"]) + 1 and op == "Conv" and zero_bias(ins[-1]):
        ins = ins[:-1]
    return ins if len(ins) == len(pn["in"]) else None


def bind_node(pn: dict, bind: dict, ins, outs, attrs: dict) -> dict | None:
    """``bind`` extended with pattern node ``pn``'s variables bound to a node's inputs, outputs and attributes;
    None when a variable is already bound to something else or a literal attribute differs."""
    new = dict(bind)
    for v, t in list(zip(pn["in"], ins)) + list(zip(pn["out"], outs)):
        if new.setdefault(v, t) != t:
            return None
    av = pn.get("attrs")
    if isinstance(av, str) and new.setdefault(av, attrs) != attrs:
        return None
    if isinstance(av, dict) and any(attrs.get(k) != _frz(v) for k, v in av.items()):
        return None
    return new


def _zero_weight(g, t) -> bool:
    w = g.weights.get(t)
    return w is not None and not np.any(w)


def _frz(v):
    return tuple(v) if isinstance(v, list) else v


#: the keys of a rule's JSON, of one op of its patterns, and those every rule must have
RULE_KEYS = ("name", "source", "target", "outputs", "conditions", "provenance", "status", "neutral")
NODE_KEYS = ("op", "in", "out", "attrs")
REQUIRED_KEYS = ("name", "source", "target", "outputs")


def _onnx_op(op: str) -> bool:
    """Whether ``op`` is a standard ONNX operator (a source pattern may match ops the IR keeps opaque)."""
    try:
        from onnx import defs
    except ImportError:  # pragma: no cover - the graphs extra brings onnx
        return True
    return defs.has(op)


def _known_ops() -> list[str]:
    from autotune.search_spaces.graphs import ops

    return sorted(ops.OPS)


def _node_fault(part: str, j: int, pn) -> str | None:
    """What is wrong with op pattern ``pn``, the ``j``-th of the rule's ``part`` (source or target), if anything."""
    where = f"{part} op {j}"
    if not isinstance(pn, dict):
        return f"{where} is not a JSON object"
    for k in pn:
        if k not in NODE_KEYS:
            return f"{where} has an unknown key {k!r}{did_you_mean(k, NODE_KEYS, n=1)}; valid: {', '.join(NODE_KEYS)}"
    for k in ("op", "in", "out"):
        if k not in pn:
            return f"{where} has no {k!r}"
    op = pn["op"]
    if not isinstance(op, str) or not op:
        return f"{where}: 'op' must be an operator name"
    if not isinstance(pn["in"], list) or not all(isinstance(v, str) and v for v in pn["in"]):
        return f"{where} ({op}): 'in' must be a list of variable names"
    if not isinstance(pn["out"], list) or not pn["out"] or not all(isinstance(v, str) and v for v in pn["out"]):
        return f"{where} ({op}): 'out' must be a non-empty list of variable names"
    if not isinstance(pn.get("attrs", {}), (str, dict)):
        return f"{where} ({op}): 'attrs' must be a variable name or an object"
    known = _known_ops()
    # a target op is built, so its shapes must be inferable; a source op may also be any ONNX op (kept opaque)
    if op not in known and not _onnx_op(op):
        return f"{where}: unknown op {op!r}{did_you_mean(op, known, n=1)}"
    if op not in known and part == "target":
        return f"{where}: {op!r} is not an op of the graph IR, which a target op must be (valid: {', '.join(known)})"
    return None


def rule_fault(d) -> str | None:
    """The first thing wrong with rule JSON ``d`` (a missing or unknown key, an unknown op, condition or
    function, a variable the target reads that nothing binds, an output that is no source output), or None."""
    if not isinstance(d, dict):
        return "a rule must be a JSON object"
    for k in d:
        if k not in RULE_KEYS:
            return f"unknown key {k!r}{did_you_mean(k, RULE_KEYS, n=1)}; valid: {', '.join(RULE_KEYS)}"
    for k in REQUIRED_KEYS:
        if k not in d:
            return f"missing key {k!r} (a rule has {', '.join(REQUIRED_KEYS)})"
    if not isinstance(d["name"], str) or not d["name"]:
        return "'name' must be a non-empty string"
    for part in ("source", "target"):
        if not isinstance(d[part], list) or (part == "source" and not d[part]):
            return f"'{part}' must be a {'non-empty ' if part == 'source' else ''}list of op patterns"
        for j, pn in enumerate(d[part], 1):
            fault = _node_fault(part, j, pn)
            if fault:
                return fault
    bound = {v for pn in d["source"] for v in pn["in"] + pn["out"]}
    attr_vars = {pn["attrs"] for pn in d["source"] if isinstance(pn.get("attrs"), str)}
    source_outs = {v for pn in d["source"] for v in pn["out"]}
    made = set()
    for j, pn in enumerate(d["target"], 1):
        for v in pn["in"]:
            if v not in bound and v not in made:
                return f"target op {j} ({pn['op']}) reads {v!r}, which neither the source nor an earlier target op binds"
        attrs = pn.get("attrs")
        if isinstance(attrs, str) and attrs not in attr_vars:
            return f"target op {j} ({pn['op']}): attrs {attrs!r} is no source op's attrs variable"
        for k, v in (attrs.items() if isinstance(attrs, dict) else ()):
            if isinstance(v, str) and "." in v and v.partition(".")[0] not in attr_vars:
                return f"target op {j} ({pn['op']}): attribute {k!r} reads {v!r}, but no source op binds attrs {v.partition('.')[0]!r}"
            if isinstance(v, dict) and v.get("fn") not in FUNCTIONS:
                return (f"target op {j} ({pn['op']}): attribute {k!r} calls unknown function {v.get('fn')!r}; "
                        f"valid: {', '.join(FUNCTIONS)}")
            if isinstance(v, dict) and not isinstance(v.get("args", []), list):
                return f"target op {j} ({pn['op']}): attribute {k!r}: 'args' must be a list"
        made.update(pn["out"])
    outputs = d["outputs"]
    if not isinstance(outputs, dict) or not outputs:
        return "'outputs' must map source outputs to target variables (an object, not empty)"
    for src, tgt in outputs.items():
        if src not in source_outs:
            return f"outputs: {src!r} is not an output of a source op"
        if not isinstance(tgt, str) or (tgt not in made and tgt not in bound):
            return f"outputs: {src!r} maps to {tgt!r}, which neither the target nor the source binds"
    conditions = d.get("conditions", [])
    if not isinstance(conditions, list):
        return "'conditions' must be a list"
    for c in conditions:
        if not isinstance(c, list) or not c or not isinstance(c[0], str):
            return f"condition {c!r} must be a list: a predicate's name, then its arguments"
        if c[0] not in PREDICATES:
            return f"unknown condition {c[0]!r}; valid: {', '.join(PREDICATES)}"
    return None
