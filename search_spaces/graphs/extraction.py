"""Extraction from an e-graph (``egraph.EGraph``): the cheapest graph it holds.

``ilp`` picks one e-node per needed class minimising the sum of the picked e-nodes' costs, each
counted once however many readers it has (so a merged MatMul feeding a Split is paid once): an
integer program as in Tensat, solved by HiGHS (scipy's ``milp``), with order variables that keep
the picked graph acyclic and, given ``fusable`` pairs, the graph cost's fusion (an op fused into its
producer is free when both are picked and nothing else reads the producer). ``greedy`` is the
fallback: each class's e-node of least tree cost. ``build`` turns a pick into a :class:`Graph`.
"""

from __future__ import annotations

import numpy as np

from autotune.errors import UsageError
from autotune.search_spaces.graphs.cost import FUSED_ACTIVATIONS, fuses_into
from autotune.search_spaces.graphs.ir import Graph, Node

NONE = -1  # an absent optional input (as in egraph)


def greedy(eg, costs) -> dict[int, int]:
    """Each class's e-node of least tree cost (its cost plus its inputs' classes' costs), to a fixed point."""
    best = {c: 0.0 for c in eg.leaf}
    pick: dict[int, int] = {}
    changed = True
    while changed:
        changed = False
        for i, n in enumerate(eg.nodes):
            ins = [eg.find(c) for c in n.inputs if c != NONE]
            if not all(c in best for c in ins):
                continue
            total = costs[i] + sum(best[c] for c in set(ins))
            for c in n.outputs:
                c = eg.find(c)
                if c not in eg.leaf and total < best.get(c, np.inf) - 1e-15:
                    best[c], pick[c] = total, i
                    changed = True
    return pick


def fusable(eg, producers, live) -> list[tuple[int, int, int, tuple]]:
    """What onnxruntime fuses, as in ``cost.fused_into_producer``: (op, producer, tensor, via) e-node entries,
    the op reading the producer's tensor. ``via`` is () for a direct fusion (Conv/Gemm + activation, Conv +
    BatchNormalization or Mul/Add by a weight, MatMul + bias Add), and for an activation after a fused op
    (Conv -> BatchNormalization -> Relu) the indices of the entries fusing that op into a Conv or Gemm,
    one of which must hold."""
    outs = {eg.find(c) for c in eg.outputs}
    pairs: list[tuple[int, int, int, tuple]] = []
    reads: dict[int, int] = {}  # op -> the tensor it would be fused through
    for c in live:
        for i in producers.get(c, []):
            n = eg.nodes[i]
            if n.op not in FUSED_ACTIVATIONS | {"BatchNormalization", "Add", "Mul"} or not n.inputs:
                continue
            ins = [eg.find(d) for d in n.inputs]
            src, rest = ins[0], ins[1:]
            if n.op in ("Add", "Mul"):
                if len(ins) != 2:
                    continue
                if eg.is_weight[ins[0]]:
                    src, rest = ins[1], ins[:1]
            if eg.is_weight[src] or src in outs or not all(eg.is_weight[d] for d in rest if d != NONE):
                continue
            reads[i] = src
            pairs.extend((i, p, src, ()) for p in producers.get(src, []) if fuses_into(n.op, eg.nodes[p].op))
    into_conv: dict[int, list[int]] = {}
    for k, (i, p, _, _) in enumerate(pairs):
        if eg.nodes[p].op in ("Conv", "Gemm"):
            into_conv.setdefault(i, []).append(k)
    for i, src in reads.items():
        if eg.nodes[i].op in FUSED_ACTIVATIONS:
            pairs.extend((i, b, src, tuple(into_conv[b])) for b in producers.get(src, []) if b in into_conv)
    return pairs


def ilp(eg, costs, producers, needed, fused, time_limit: float) -> tuple[dict[int, int] | None, str, float | None]:
    """The pick of the integer program (None when the solver fails), how it ended, and its objective: the
    picked graph's cost as the program counts it."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import lil_matrix

    nodes = sorted({i for c in needed for i in producers.get(c, [])})
    col = {i: k for k, i in enumerate(nodes)}
    classes = sorted(needed - set(eg.leaf))
    order = {c: len(nodes) + k for k, c in enumerate(classes)}  # order variables, one per class
    keep = [k for k, (i, p, _, _) in enumerate(fused) if i in col and p in col and costs[i] > 0]
    renumber = {k: n for n, k in enumerate(keep)}
    fused = [(i, p, c, tuple(renumber[v] for v in via if v in renumber)) for i, p, c, via in (fused[k] for k in keep)]
    fcol = len(nodes) + len(classes)  # fusion variables: op i fused into producer p
    nvar, big = fcol + len(fused), float(len(classes) + 1)  # order values lie in [0, big]
    rows: list[tuple[dict[int, float], float, float]] = []
    for c in (eg.find(c) for c in eg.outputs):
        if c not in eg.leaf:
            rows.append(({col[i]: 1.0 for i in producers[c]}, 1.0, np.inf))
    for i in nodes:
        n = eg.nodes[i]
        outs = {eg.find(c) for c in n.outputs} & set(order)
        for d in {eg.find(c) for c in n.inputs if c != NONE} - set(eg.leaf):
            if d in outs:  # reads its own output: never pickable
                rows.append(({col[i]: 1.0}, 0.0, 0.0))
                continue
            row = {col[m]: 1.0 for m in producers.get(d, [])}
            row[col[i]] = row.get(col[i], 0.0) - 1.0
            rows.append((row, 0.0, np.inf))  # picking n picks a producer of each input class
            for c in outs:  # order[c] >= order[d] + 1 when n is picked
                rows.append(({order[c]: 1.0, order[d]: -1.0, col[i]: -(big + 1)}, -big, np.inf))
    readers: dict[int, list[int]] = {}
    for i in nodes:
        for d in {eg.find(c) for c in eg.nodes[i].inputs if c != NONE}:
            readers.setdefault(d, []).append(i)
    per_op: dict[int, dict[int, float]] = {}
    for k, (i, p, c, via) in enumerate(fused):
        rows.append(({fcol + k: 1.0, col[i]: -1.0}, -np.inf, 0.0))  # fused only if both are picked
        rows.append(({fcol + k: 1.0, col[p]: -1.0}, -np.inf, 0.0))
        if via:  # an activation after a fused op: only when that op is fused into a Conv or Gemm
            rows.append(({fcol + k: 1.0, **{fcol + v: -1.0 for v in via}}, -np.inf, 0.0))
        for m in readers.get(c, []):  # and nothing else reads the producer's output
            if m != i:
                rows.append(({fcol + k: 1.0, col[m]: 1.0}, -np.inf, 1.0))
        per_op.setdefault(i, {})[fcol + k] = 1.0
    rows.extend((row, -np.inf, 1.0) for row in per_op.values())
    a = lil_matrix((len(rows), nvar))
    lo, hi = np.empty(len(rows)), np.empty(len(rows))
    for r, (row, low, high) in enumerate(rows):
        for k, v in row.items():
            a[r, k] += v
        lo[r], hi[r] = low, high
    c_vec = np.concatenate([costs[nodes], np.zeros(len(classes)), [-costs[i] for i, _, _, _ in fused]])
    integrality = np.concatenate([np.ones(len(nodes)), np.zeros(len(classes)), np.ones(len(fused))])
    upper = np.concatenate([np.ones(len(nodes)), np.full(len(classes), big), np.ones(len(fused))])
    res = milp(c_vec, constraints=LinearConstraint(a.tocsr(), lo, hi), integrality=integrality,
               bounds=Bounds(np.zeros(nvar), upper), options={"time_limit": time_limit, "disp": False})
    if res.x is None or res.status not in (0, 1):
        return None, f"ilp failed ({res.message})", None
    chosen = {i for i in nodes if res.x[col[i]] > 0.5}
    pick: dict[int, int] = {}
    for i in sorted(chosen, key=lambda i: costs[i]):
        for c in eg.nodes[i].outputs:
            pick.setdefault(eg.find(c), i)
    return pick, "ilp" if res.status == 0 else "ilp (time limit)", float(res.fun)


def reachable(eg, producers) -> set[int]:
    seen, stack = set(), [eg.find(c) for c in eg.outputs]
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        for i in producers.get(c, []):
            stack.extend(eg.find(d) for d in eg.nodes[i].inputs if d != NONE)
    return seen


def build(eg, pick: dict[int, int]) -> Graph:
    """The graph of the picked e-nodes, tensors named after the source graph's where a class has one."""
    label = {}
    for t, c in eg.tensor_class.items():
        label.setdefault(eg.find(c), t)
    for c, t in eg.leaf.items():
        label[eg.find(c)] = t
    out_names = {}
    for t, c in zip(eg.graph.outputs, eg.outputs):
        out_names.setdefault(eg.find(c), t)
    label.update(out_names)
    used_names: set[str] = set()
    made: dict[int, str] = {eg.find(c): t for c, t in eg.leaf.items()}
    nodes: list[Node] = []
    emitted: set[int] = set()

    def fresh(c: int) -> str:
        base = label.get(c, f"e{c}")
        name, k = base, 0
        while name in used_names:
            k += 1
            name = f"{base}_{k}"
        used_names.add(name)
        return name

    used_names.update(made.values())

    def need(c: int, path: frozenset) -> str:
        c = eg.find(c)
        if c in made:
            return made[c]
        if c in path or c not in pick:
            raise UsageError(f"extraction left class {c} without an acyclic producer")
        i = pick[c]
        n = eg.nodes[i]
        ins = tuple(need(d, path | {c}) if d != NONE else "" for d in n.inputs)
        if c in made:  # produced meanwhile
            return made[c]
        outs = []
        for d in (eg.find(d) for d in n.outputs):
            if d in made:
                outs.append(fresh(made[d] + "_dup"))
            else:
                made[d] = fresh(d) if d not in out_names else out_names[d]
                outs.append(made[d])
        if i not in emitted:
            emitted.add(i)
            nodes.append(Node(n.op, ins, tuple(outs), n.attrs, n.fixed, n.domain))
        return made[c]

    outputs = []
    extra = []
    for t, c in zip(eg.graph.outputs, eg.outputs):
        got = need(c, frozenset())
        outputs.append(t)
        if got != t:  # two outputs in one class, or an output that is an input or weight: copy it
            extra.append(Node.make("Identity", [got], [t]))
    return Graph(nodes + extra, eg.graph.inputs, outputs, eg.weights, eg.graph.name,
                 opset=eg.graph.opset, domains=eg.graph.domains)
