"""The simulator's event-driven pass on small hand-made task graphs: end times follow dependencies and
resource contention as computed by hand."""

import numpy as np

from autotune.runners.simulator import schedule


def _run(dur, res, edges, resources=3, timeline=False):
    n = len(dur)
    succ = [[] for _ in range(n)]
    indeg = np.zeros(n, dtype=np.int64)
    for a, b in edges:
        succ[a].append(b)
        indeg[b] += 1
    sources = [t for t in range(n) if indeg[t] == 0]
    res = [np.array(r, dtype=np.int64) for r in res]
    return schedule.run(dur, res, succ, indeg, sources, [f"t{t}" for t in range(n)], resources, timeline)


def test_tasks_on_one_resource_queue_and_on_separate_resources_overlap():
    assert _run([2.0, 3.0], [[0], [0]], [])[0] == 5.0
    assert _run([2.0, 3.0], [[0], [1]], [])[0] == 3.0


def test_a_task_waits_for_its_inputs_and_for_every_resource_it_holds():
    # t0 on r0 (0-2), t1 on r1 (0-4); t2 needs both resources and waits for t0 only: starts when r1 frees at 4
    end, tl = _run([2.0, 4.0, 1.0], [[0], [1], [0, 1]], [(0, 2)], timeline=True)
    assert end == 5.0
    assert sorted(x for x in tl if x[3] == "t2") == [(0, 4.0, 5.0, "t2"), (1, 4.0, 5.0, "t2")]
    # a chain through a task without resources: it takes no resource, only its own time
    assert _run([2.0, 1.5, 1.0], [[0], [], [0]], [(0, 1), (1, 2)])[0] == 4.5


def test_the_input_counts_are_left_as_they_were():
    indeg = np.array([0, 1], dtype=np.int64)
    schedule.run([1.0, 1.0], [np.array([0]), np.array([0])], [[1], []], indeg, [0], ["a", "b"], 1, False)
    assert indeg.tolist() == [0, 1]  # the engine reuses them for every pass
