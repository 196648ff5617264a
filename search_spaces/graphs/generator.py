"""Rule generator (TASO): enumerate small graphs, group by exact fingerprints, prune, verify.

Graphs of up to N ops are enumerated over a *domain*: a pool of input tensors with
symbolic sizes and an op set. Each graph is evaluated on random int64 inputs
(wrap-around arithmetic, so equal fingerprints mean equal integer functions);
graphs with equal output fingerprints form candidate pairs. Pruning drops pairs
that are equal up to renaming the inputs and pairs that share a common subgraph
at the inputs (those follow from a smaller rule). synthesis.py verifies the survivors with
verify.py (float tests over other sizes, z3 proof for the linear ops).
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass

import numpy as np

from autotune.search_spaces.graphs import ops

CONV_ATTRS = {"kernel_shape": (3, 3), "strides": (1, 1), "pads": (1, 1, 1, 1), "dilations": (1, 1), "group": 1}


@dataclass(frozen=True)
class Domain:
    name: str
    inputs: dict  # name -> tuple of size symbols
    sizes: tuple  # size assignments: the first for fingerprints, the others for float tests
    ops: tuple
    weights: tuple = ()  # inputs that are weights (conv kernels): convolved with, never convolved
    max_outputs: int = 2  # multi-output graphs (sibling merges) are only needed where ops can merge


DOMAINS = [
    Domain("elementwise", {"a": ("n", "k"), "b": ("n", "k"), "c": ("n", "k")},
           ({"n": 2, "k": 3}, {"n": 3, "k": 4}, {"n": 5, "k": 1}), ("Add", "Mul", "Relu"),
           max_outputs=1),
    Domain("matrix", {"a": ("n", "k"), "w": ("k", "m"), "v": ("k", "m"), "u": ("m", "p")},
           ({"n": 2, "k": 3, "m": 5, "p": 4}, {"n": 3, "k": 4, "m": 2, "p": 5}, {"n": 5, "k": 2, "m": 3, "p": 2},
            {"n": 4, "k": 6, "m": 4, "p": 3}),
           ("MatMul", "Add", "Transpose", "Concat0", "Concat1", "Split1")),
    Domain("conv", {"x": (1, "c", "h", "h"), "w1": ("o", "c", 3, 3), "w2": ("o", "c", 3, 3)},
           ({"c": 2, "h": 5, "o": 3}, {"c": 3, "h": 4, "o": 2}, {"c": 1, "h": 6, "o": 4}),
           ("Conv", "Add", "Relu", "Concat0", "Concat1", "Split1"), ("w1", "w2")),
]

# an op of an enumerated graph: (name, args, extra) - extra = split: (p, q, axis of p/q giving the sizes)


def shape_of(op, args, extra, shapes):
    """Output shapes of one op, or None when the arguments do not fit."""
    s = [shapes[a] for a in args]
    if op == "MatMul":
        return [(s[0][0], s[1][1])] if len(s[0]) == 2 == len(s[1]) and s[0][1] == s[1][0] else None
    if op in ("Add", "Mul"):
        return [s[0]] if s[0] == s[1] else None
    if op == "Relu":
        return [s[0]]
    if op == "Transpose":
        return [(s[0][1], s[0][0])] if len(s[0]) == 2 else None
    if op.startswith("Concat"):
        ax = int(op[-1])
        if len(s[0]) != len(s[1]) or any(x != y for i, (x, y) in enumerate(zip(s[0], s[1])) if i != ax):
            return None
        return [tuple(x + y if i == ax else x for i, (x, y) in enumerate(zip(s[0], s[1])))]
    if op.startswith("Split"):
        ax = int(op[-1])
        sizes = tuple(shapes["#dims"][sym] for sym in extra)
        if len(s[0]) <= ax or s[0][ax] != sum(sizes):
            return None
        return [tuple(n if i == ax else x for i, x in enumerate(s[0])) for n in sizes]
    if op == "Conv":
        x, w = s
        return [(x[0], w[0], x[2], x[3])] if len(x) == 4 == len(w) and x[1] == w[1] and w[2:] == (3, 3) else None
    raise KeyError(op)


def evaluate(op, args, extra, vals):
    v = [vals[a] for a in args]
    if op == "MatMul":
        return [v[0] @ v[1]]
    if op == "Add":
        return [v[0] + v[1]]
    if op == "Mul":
        return [v[0] * v[1]]
    if op == "Relu":
        return [np.maximum(v[0], 0)]
    if op == "Transpose":
        return [v[0].T]
    if op.startswith("Concat"):
        return [np.concatenate(v, axis=int(op[-1]))]
    if op.startswith("Split"):
        return np.split(v[0], [vals["#dims"][extra[0]]], axis=int(op[-1]))
    if op == "Conv":
        return [ops.conv_ref(v[0], v[1], **{k: val for k, val in CONV_ATTRS.items() if k != "kernel_shape"})]
    raise KeyError(op)


def concrete(domain: Domain, sizes: dict) -> dict:
    """Input shapes at one size assignment (plus the assignment itself under "#dims", for splits)."""
    out = {k: tuple(sizes[d] if isinstance(d, str) else d for d in dims) for k, dims in domain.inputs.items()}
    out["#dims"] = dict(sizes)
    return out


def _candidates(domain, shapes, wset):
    """Every (op, args, extra) applicable to the current tensors (no op applied to one tensor twice:
    such a rule is an instance of a more general one with two variables)."""
    names = [n for n in shapes if n != "#dims"]
    syms = sorted(shapes["#dims"])
    for op in domain.ops:
        if op in ("Relu", "Transpose"):
            arg_sets = [(a,) for a in names]
        elif op.startswith("Split"):
            arg_sets = [(a,) for a in names if a not in domain.inputs]
        else:
            arg_sets = [(a, b) for a in names for b in names if a != b]
        if domain.weights:  # kernels are convolved with; activations are concatenated along channels
            if op == "Conv":
                arg_sets = [(a, b) for a, b in arg_sets if a not in wset and b in wset]
            elif op == "Concat0":
                arg_sets = [(a, b) for a, b in arg_sets if a in wset and b in wset]
            elif op in ("Concat1", "Split1", "Relu"):
                arg_sets = [s for s in arg_sets if not any(a in wset for a in s)]
            elif op == "Add":
                arg_sets = [(a, b) for a, b in arg_sets if (a in wset) == (b in wset)]
        for args in arg_sets:
            extras = [None]
            if op.startswith("Split"):
                extras = [(p, q) for p in syms for q in syms]  # piece sizes: symbolic dims
            for extra in extras:
                out = shape_of(op, args, extra, shapes)
                if out is not None:
                    yield op, args, extra, out


def enumerate_graphs(domain: Domain, max_ops: int):
    """Yield graphs (tuple of ops, each (op, args, extra, out names)) with up to ``max_ops`` ops, deduplicated."""
    shapes0 = concrete(domain, domain.sizes[0])
    seen = set()

    def rec(graph, shapes, wset):
        if graph and len(outputs(graph)) <= domain.max_outputs:
            yield graph
        if len(graph) == max_ops:
            return
        for op, args, extra, outs in _candidates(domain, shapes, wset):
            if any(g[0] == op and g[1] == args and g[2] == extra for g in graph):
                continue  # a duplicate op: common subexpression
            i = len(graph)
            names = tuple(f"t{i}_{j}" for j in range(len(outs)))
            g2 = graph + ((op, args, extra, names),)
            key = canonical(g2)
            if key in seen:
                continue
            seen.add(key)
            w2 = wset | set(names) if all(a in wset for a in args) else wset
            yield from rec(g2, {**shapes, **dict(zip(names, outs))}, w2)

    yield from rec((), shapes0, frozenset(domain.weights))


def canonical(graph) -> str:
    """Order-independent structure of a graph (ops are hashed through their arguments)."""
    h = {}
    for op, args, extra, outs in graph:
        d = hashlib.sha1(repr((op, tuple(h.get(a, a) for a in args), extra)).encode()).hexdigest()[:16]
        for j, o in enumerate(outs):
            h[o] = f"{d}:{j}"
    return "|".join(sorted(h[o] for o in outputs(graph)))


def outputs(graph) -> list[str]:
    used = {a for _, args, _, _ in graph for a in args}
    return [o for _, _, _, outs in graph for o in outs if o not in used]


def used_inputs(graph, domain) -> frozenset:
    return frozenset(a for _, args, extra, _ in graph for a in args if a in domain.inputs)


def run(graph, vals):
    vals = dict(vals)
    for op, args, extra, outs in graph:
        for o, v in zip(outs, evaluate(op, args, extra, vals)):
            vals[o] = v
    return vals


def fingerprints(graph, ivals) -> tuple:
    vals = run(graph, ivals)
    return tuple(hashlib.sha1(repr(vals[o].shape).encode() + np.ascontiguousarray(vals[o]).tobytes()).hexdigest()[:16]
                 for o in outputs(graph))


def _common_input_op(g1, g2, domain) -> bool:
    """Both graphs apply the same op to the same *inputs*: the pair follows from a smaller one."""
    def leaf_ops(g):
        return {(op, args, extra) for op, args, extra, _ in g if all(a in domain.inputs for a in args)}
    return bool(leaf_ops(g1) & leaf_ops(g2))


def _subgraph_hashes(graph) -> dict:
    h = {}
    for op, args, extra, outs in graph:
        d = hashlib.sha1(repr((op, tuple(h.get(a, a) for a in args), extra)).encode()).hexdigest()[:16]
        for j, o in enumerate(outs):
            h[o] = f"{d}:{j}"
    return h


def _common_output(g1, g2) -> bool:
    """Both graphs compute one output by the same subgraph: the rest is a smaller rule."""
    h1, h2 = _subgraph_hashes(g1), _subgraph_hashes(g2)
    return bool({h1[o] for o in outputs(g1)} & {h2[o] for o in outputs(g2)})


def _rename_key(g1, g2, domain) -> str:
    """Canonical text of the pair under the cheapest renaming of same-shape inputs."""
    classes: dict = {}
    for k, dims in domain.inputs.items():
        classes.setdefault(dims, []).append(k)
    best = None
    for perms in itertools.product(*[itertools.permutations(v) for v in classes.values()]):
        mapping = {a: b for cls, p in zip(classes.values(), perms) for a, b in zip(cls, p)}
        def ren(g, mapping=mapping):
            return tuple((op, tuple(mapping.get(a, a) for a in args), extra, outs) for op, args, extra, outs in g)
        key = canonical(ren(g1)) + " => " + canonical(ren(g2))
        best = key if best is None or key < best else best
    return best


def candidate_pairs(domain: Domain, max_ops: int, seed: int = 0, on_graph=None):
    """(pairs, stats): equal-fingerprint pairs that survive TASO's pruning. ``on_graph``: called (with no
    argument) after each graph enumerated and fingerprinted, to report progress."""
    rng = np.random.default_rng(seed)
    shapes = concrete(domain, domain.sizes[0])
    ivals = {k: rng.integers(-2**62, 2**62, size=s, dtype=np.int64) for k, s in shapes.items() if k != "#dims"}
    ivals["#dims"] = shapes["#dims"]
    groups: dict = {}
    n = 0
    with np.errstate(over="ignore"):
        for g in enumerate_graphs(domain, max_ops):
            n += 1
            fp = fingerprints(g, ivals)
            groups.setdefault((tuple(sorted(fp)), used_inputs(g, domain)), []).append((g, fp))
            if on_graph is not None:
                on_graph()
    stats = {"graphs": n, "pairs": 0, "pruned_common": 0, "pruned_renaming": 0}
    pairs, seen = [], set()
    for members in groups.values():
        # an equivalence class needs only a star of rules around its simplest member
        members = sorted(members, key=lambda m: (len(m[0]), canonical(m[0])))
        (g2, f2) = members[0]
        if len(f2) != len(set(f2)):
            continue  # two equal outputs: ambiguous mapping
        for g1, f1 in members[1:]:
            stats["pairs"] += 1
            if _common_input_op(g1, g2, domain) or _common_output(g1, g2):
                stats["pruned_common"] += 1
                continue
            key = _rename_key(g1, g2, domain)
            if key in seen:
                stats["pruned_renaming"] += 1
                continue
            seen.add(key)
            mapping = {o1: outputs(g2)[f2.index(f)] for o1, f in zip(outputs(g1), f1)}
            pairs.append((g1, g2, mapping))
    return pairs, stats


def classic_found(rules) -> dict:
    """Which classic substitutions are among the kept rules (either direction)."""
    found = {"merge_matmuls": [], "merge_convs": [], "distributivity": [], "associativity": []}
    for r in rules:
        for a, b in ((r.source, r.target), (r.target, r.source)):
            oa, ob = sorted(n["op"] for n in a), sorted(n["op"] for n in b)
            for op, key in (("MatMul", "merge_matmuls"), ("Conv", "merge_convs")):
                if oa == [op, op] and ob == sorted(["Concat", op, "Split"]) and a[0]["in"][0] == a[1]["in"][0]:
                    found[key].append(r.name)
            if len(oa) == 3 and oa.count("Add") == 1 and len(set(oa)) == 2 and sorted(ob) == sorted(set(oa)):
                found["distributivity"].append(r.name)
            if len(a) == len(b) == 2 and len(set(oa)) == 1 and oa == ob and oa[0] in ("Add", "Mul", "MatMul"):
                inner = lambda g: [i for i, v in enumerate(g[1]["in"]) if v not in [x for n in g[:1] for x in n["in"]] and v[1:3] == "t0"]
                leaves = {v for n in a + b for v in n["in"] if not v[1:].startswith("t")}
                if len(leaves) == 3 and inner(a) == [0] and inner(b) == [1]:
                    found["associativity"].append(r.name)
    return {k: sorted(set(v)) for k, v in found.items()}
