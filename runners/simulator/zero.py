"""ZeRO-3's weight gathers in the simulator's task graph: when each op's gathers (``WF`` before its forward,
``WB`` before its backward) may start.

On demand (DeepSpeed's ZeRO-3, fetching in each module's pre-forward and pre-backward hook) an op's forward
gather starts once its inputs are ready and its backward gather once its output gradients are, so the compute
waits for each. Prefetched (PyTorch FSDP's forward and backward prefetch, a unit ahead) the gathers of an op
start once the inputs (output gradients) of the nearest ops with weights before (after) it are ready, so they
run during those ops and the weightless ones between, one weighted op ahead.
"""

from __future__ import annotations


def weighted_neighbours(ops, links: list[list[int]], i: int) -> list[int]:
    """The nearest ops with weights reached from op ``i`` along ``links`` (producers or consumers of each op),
    passing through ops without weights."""
    seen, out, todo = {i}, [], list(links[i])
    while todo:
        j = todo.pop()
        if j in seen:
            continue
        seen.add(j)
        if ops[j].weight_elems:
            out.append(j)
        else:
            todo.extend(links[j])
    return sorted(out)


def gather_deps(sim, producers: list[list[int]], consumers: list[list[int]], dep) -> None:
    """Add the dependencies of every op's ``WF`` and ``WB`` tasks to ``sim``'s task graph (``consumers``: the
    out-edges of each op; ``producers``: the ops feeding each op)."""
    ops, edges = sim.g.ops, sim.g.edges
    after_ops = [[edges[e][1] for e in out] for out in consumers]
    for i in range(len(ops)):
        before = weighted_neighbours(ops, producers, i) if sim.zero_prefetch else [i]
        after = weighted_neighbours(ops, after_ops, i) if sim.zero_prefetch else [i]
        for j in before:
            for e in sim.in_edges[j]:
                dep(sim.X[e], sim.WF[i])
        for j in after:
            dep(sim.AO[j], sim.WB[i])
            for e in consumers[j]:
                dep(sim.XB[e], sim.WB[i])
        dep(sim.WF[i], sim.F[i])
        dep(sim.F[i], sim.WB[i])
        dep(sim.WB[i], sim.B[i])
