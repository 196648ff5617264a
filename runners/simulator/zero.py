"""ZeRO-3's weight gathers in the simulator's task graph: how long one takes, and when each op's gathers
(``WF`` before its forward, ``WB`` before its backward) may start.

On demand (DeepSpeed's ZeRO-3, fetching in each module's pre-forward and pre-backward hook) an op's forward
gather starts once its inputs are ready and its backward gather once its output gradients are, so the compute
waits for each. Prefetched (PyTorch FSDP's forward and backward prefetch, a unit ahead) the gathers of an op
start once the inputs (output gradients) of the nearest ops with weights before (after) it are ready, so they
run during those ops and the weightless ones between, one weighted op ahead.
"""

from __future__ import annotations

from autotune.runners.simulator import costs


def gather(sim, members, elems: float) -> tuple:
    """One gather of an op's weight shard (``elems`` elements per device once gathered) over each group of
    devices holding it (the rows of ``members``): NCCL's ring, as ``costs.allgather`` charges it. With
    ``sim.zero_rank_copies`` it also copies each rank's part, a kernel per rank, together reading and writing
    the whole weight once: DeepSpeed's ZeRO-3 of 2021 gathered into (and reduce-scattered from) a list of
    per-rank tensors, which PyTorch's NCCL process group of the time ran through one flat buffer, copying each
    rank's part out of it (into it before a reduce-scatter, which the simulator times as a gather)."""
    t, res = costs.allgather(sim.c, members, elems * sim.g.dtype_bytes)
    if sim.zero_rank_copies:
        dev = sim.c.device
        t += members.shape[1] * dev.launch_s + 2 * elems * sim.g.dtype_bytes / dev.mem_bandwidth
    return t, res


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
