"""The simulator's event-driven pass: tasks of a fixed graph, each with a duration and the resources it holds
(device compute queues, device link ports, node network ports), run in order of readiness. A task starts when
its inputs are done and every resource it uses is free; a task with no duration or no resource runs at once.
"""

from __future__ import annotations

import heapq

import numpy as np


def run(dur: list[float], res: list[np.ndarray], succ: list[list[int]], indeg: np.ndarray, sources: list[int],
        names: list[str], resources: int, timeline: bool) -> tuple[float, list]:
    """The end time of the last task and, with ``timeline``, (resource, start, end, task name) per resource use.
    ``res[t]`` are task t's resource indices (below ``resources``), ``succ[t]`` the tasks waiting for it,
    ``indeg[t]`` how many tasks it waits for, ``sources`` those that wait for none."""
    free = [0.0] * resources  # a list: a task holds a few resources, where numpy's indexing costs more than a loop
    ready = [0.0] * len(names)
    left = indeg.tolist()  # a new list: the caller's counts serve every pass
    busy = [d > 0 and len(r) > 0 for d, r in zip(dur, res)]
    heap = [(0.0, t) for t in sources if busy[t]]
    heapq.heapify(heap)
    stack = [(t, 0.0) for t in sources if not busy[t]]  # no resources: run at once, in any order
    pop, push = heapq.heappop, heapq.heappush
    end_all, tl = 0.0, []
    while heap or stack:
        if stack:
            t, r = stack.pop()
        else:
            r, t = pop(heap)
        if busy[t]:
            rs = res[t].tolist()
            s = r
            for x in rs:
                if free[x] > s:  # noqa: PLR1730 (a comparison costs less than max() in this loop)
                    s = free[x]
            e = s + dur[t]
            for x in rs:
                free[x] = e
            if timeline:
                tl.extend((x, s, e, names[t]) for x in rs)
        else:
            e = r + dur[t]
        if e > end_all:  # noqa: PLR1730
            end_all = e
        for v in succ[t]:
            if e > ready[v]:  # noqa: PLR1730
                ready[v] = e
            left[v] -= 1
            if left[v] == 0:
                if busy[v]:
                    push(heap, (ready[v], v))
                else:
                    stack.append((v, ready[v]))
    return end_all, tl
