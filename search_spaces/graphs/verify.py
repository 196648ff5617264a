"""Verification of generated rule candidates.

1. Random floating-point tests at every other size assignment of the domain: a pair
   that fails to type-check or to agree at some sizes held only by coincidence of the
   fingerprint sizes and is rejected.
2. For rules over linear ops, a z3 proof: tensors are an uninterpreted sort, ops are
   uninterpreted functions, and a small set of operator axioms (TASO's operator
   properties) is asserted; ``src != tgt`` unsatisfiable within the timeout = proved.

Status per rule: "proved", "tested" (float tests only), or "rejected".
"""

from __future__ import annotations

import numpy as np

from autotune.errors import MissingDependencyError
from autotune.search_spaces.graphs.generator import CONV_ATTRS, concrete, run, shape_of
from autotune.search_spaces.graphs.rules import Rule

PROVABLE = {"MatMul", "Add", "Mul", "Relu", "Transpose", "Concat0", "Concat1", "Split0", "Split1", "Conv"}


def float_tests(domain, g1, g2, mapping, trials: int = 2) -> bool:
    rng = np.random.default_rng(1)
    for sizes in domain.sizes[1:]:
        shapes = concrete(domain, sizes)
        for g in (g1, g2):
            sh = dict(shapes)
            for op, args, extra, outs in g:
                out = shape_of(op, args, extra, sh)
                if out is None:
                    return False
                sh.update(zip(outs, out))
        for _ in range(trials):
            vals = {k: rng.standard_normal(s) for k, s in shapes.items() if k != "#dims"}
            vals["#dims"] = shapes["#dims"]
            v1, v2 = run(g1, vals), run(g2, vals)
            for o1, o2 in mapping.items():
                if v1[o1].shape != v2[o2].shape or not np.allclose(v1[o1], v2[o2], rtol=1e-9, atol=1e-9):
                    return False
    return True


def z3_prove(domain, g1, g2, mapping, timeout_ms: int = 2000) -> bool | None:
    """True when proved from the axioms, None when unknown/timeout or an op has no axioms.

    Split sizes are terms ``d_axis(tensor)`` of uninterpreted size functions, so the
    axioms can say when a split undoes a concat (``split(concat(x, y), d(x)) = x``).
    """
    if any(op not in PROVABLE for g in (g1, g2) for op, *_ in g):
        return None
    try:
        import z3
    except ImportError:
        raise MissingDependencyError("proving rules needs the package 'z3-solver'; pip install 'autotune[graphs]'") from None
    T = z3.DeclareSort("T")
    f2 = lambda n: z3.Function(n, T, T, T)
    mm, add, mul, conv = f2("matmul"), f2("add"), f2("mul"), f2("conv")
    cat = {0: f2("concat0"), 1: f2("concat1")}
    relu, tr = z3.Function("relu", T, T), z3.Function("transpose", T, T)
    d = {a: z3.Function(f"d{a}", T, z3.IntSort()) for a in (0, 1)}
    sp = {(a, j): z3.Function(f"split{a}_{j}", T, z3.IntSort(), T) for a in (0, 1) for j in (0, 1)}
    x, y, z, w = z3.Consts("x y z w", T)
    n = z3.Int("n")
    A = z3.ForAll
    ax = [
        A([x, y], add(x, y) == add(y, x)), A([x, y], mul(x, y) == mul(y, x)),
        A([x, y, z], add(add(x, y), z) == add(x, add(y, z))), A([x, y, z], mul(mul(x, y), z) == mul(x, mul(y, z))),
        A([x, y, z], mul(x, add(y, z)) == add(mul(x, y), mul(x, z))),
        A([x, y, z], mm(mm(x, y), z) == mm(x, mm(y, z))),
        A([x, y, z], mm(x, add(y, z)) == add(mm(x, y), mm(x, z))),
        A([x, y, z], mm(add(x, y), z) == add(mm(x, z), mm(y, z))),
        A([x], tr(tr(x)) == x), A([x, y], tr(mm(x, y)) == mm(tr(y), tr(x))),
        A([x, y], tr(add(x, y)) == add(tr(x), tr(y))), A([x, y], tr(mul(x, y)) == mul(tr(x), tr(y))),
        A([x], tr(relu(x)) == relu(tr(x))),
        A([x, y], tr(cat[0](x, y)) == cat[1](tr(x), tr(y))), A([x, y], tr(cat[1](x, y)) == cat[0](tr(x), tr(y))),
        A([x, y, z], mm(x, cat[1](y, z)) == cat[1](mm(x, y), mm(x, z))),
        A([x, y, z], mm(cat[0](x, y), z) == cat[0](mm(x, z), mm(y, z))),
        A([x, y, z, w], mm(cat[1](x, y), cat[0](z, w)) == add(mm(x, z), mm(y, w))),
        A([x, y, z], conv(x, cat[0](y, z)) == cat[1](conv(x, y), conv(x, z))),
        A([x, y, z], conv(x, add(y, z)) == add(conv(x, y), conv(x, z))),
        A([x, y, z], conv(add(x, y), z) == add(conv(x, z), conv(y, z))),
        A([x, y], d[0](mm(x, y)) == d[0](x)), A([x, y], d[1](mm(x, y)) == d[1](y)),
        A([x, y], d[1](conv(x, y)) == d[0](y)), A([x], d[0](tr(x)) == d[1](x)), A([x], d[1](tr(x)) == d[0](x)),
    ]
    for a_ in (0, 1):
        ax += [A([x, y], relu(cat[a_](x, y)) == cat[a_](relu(x), relu(y))),
               A([x, y, z, w], add(cat[a_](x, y), cat[a_](z, w)) == cat[a_](add(x, z), add(y, w))),
               A([x, y, z, w], mul(cat[a_](x, y), cat[a_](z, w)) == cat[a_](mul(x, z), mul(y, w))),
               A([x, y], sp[(a_, 0)](cat[a_](x, y), d[a_](x)) == x),
               A([x, y], sp[(a_, 1)](cat[a_](x, y), d[a_](x)) == y),
               A([x, n], cat[a_](sp[(a_, 0)](x, n), sp[(a_, 1)](x, n)) == x)]
        for f in (relu,):
            ax.append(A([x], d[a_](f(x)) == d[a_](x)))
        for f in (add, mul):
            ax.append(A([x, y], d[a_](f(x, y)) == d[a_](x)))
    env = {k: z3.Const(k, T) for k in domain.inputs}
    syms = {}
    for k, dims in domain.inputs.items():  # the size symbols of the inputs
        for i, sym in enumerate(dims[:2]):
            if isinstance(sym, str):
                syms.setdefault(sym, z3.Int(sym))
                ax.append(d[i](env[k]) == syms[sym])

    def build(g):
        e = dict(env)
        for op, args, extra, outs in g:
            a = [e[t] for t in args]
            if op.startswith("Split"):
                for j, o in enumerate(outs):
                    e[o] = sp[(int(op[-1]), j)](a[0], syms[extra[0]])
                continue
            fn = {"MatMul": mm, "Add": add, "Mul": mul, "Relu": relu, "Transpose": tr, "Concat0": cat[0],
                  "Concat1": cat[1], "Conv": conv}[op]
            e[outs[0]] = fn(*a)
        return e
    e1, e2 = build(g1), build(g2)
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    s.add(*ax)
    s.add(z3.Or([e1[a] != e2[b] for a, b in mapping.items()]))
    return True if s.check() == z3.unsat else None


def verify_pair(domain, g1, g2, mapping, timeout_ms: int = 2000) -> str:
    if not float_tests(domain, g1, g2, mapping):
        return "rejected"
    return "proved" if z3_prove(domain, g1, g2, mapping, timeout_ms) else "tested"


def _pattern(domain, g, prefix, used):
    nodes = []
    ren = lambda t: t if t in domain.inputs else prefix + t
    for op, args, extra, outs in g:
        base = op[:-1] if op[-1] in "01" else op
        node = {"op": base, "in": [ren(a) for a in args], "out": [ren(o) for o in outs]}
        if base == "Concat":
            node["attrs"] = {"axis": int(op[-1])}
        elif base == "Split":
            args_ = []
            for sym in extra:  # a pattern variable that has this size symbol
                var, i = next(((v, i) for v in used for i, dsym in enumerate(domain.inputs[v]) if dsym == sym),
                              (None, None))
                if var is None:
                    return None
                args_ += [var, i]
            node["attrs"] = {"axis": int(op[-1]), "split": {"fn": "dims", "args": args_}}
        elif base == "Transpose":
            node["attrs"] = {"perm": [1, 0]}
        elif base == "Conv":
            node["attrs"] = {k: list(v) if isinstance(v, tuple) else v for k, v in CONV_ATTRS.items()}
        nodes.append(node)
    return nodes


def to_rule(domain, g1, g2, mapping, name: str, status: str) -> Rule | None:
    used = sorted({a for g in (g1, g2) for _, args, extra, _ in g for a in args if a in domain.inputs})
    conds = [["rank", v, len(domain.inputs[v])] for v in used]
    src, tgt = _pattern(domain, g1, "s", used), _pattern(domain, g2, "r", used)
    if src is None or tgt is None:
        return None  # a split size that no variable of the rule carries
    return Rule(name, src, tgt,
                {"s" + a: "r" + b for a, b in mapping.items()}, conds, provenance=f"generated:{domain.name}",
                status=status)
