"""Memory capacity as a hard constraint of the simulator: what does not fit is refused, and a search's check
of it (``simulate(time_if_full=False)``) leaves it untimed and sets no task cost, with the memory a full
simulation gives; what fits is timed as ever."""

import math

import numpy as np
import pytest
from simulator_helpers import chain, cluster

from autotune.runners.simulator import SimulatorRunner
from autotune.runners.simulator.engine import Simulator
from autotune.search_spaces.parallel.strategy import data_parallel, model_parallel
from autotune.types import Status


def test_memory_capacity_is_a_hard_constraint():
    g = chain(2, b=8, f=1024, width=1024)
    need = 2 * 1024 * 1024 * 16
    runner = SimulatorRunner(g, cluster(per_node=2, memory=need * 0.75))
    space = runner.space
    dp = runner.measure(space.task, [space.wrap(data_parallel(g, runner.cluster))])[0]
    assert dp.status is Status.INVALID and "capacity" in dp.error and dp.meta["peak_memory_bytes"] > need
    mp = runner.measure(space.task, [space.wrap(model_parallel(g, runner.cluster))])[0]
    assert mp.status is Status.OK and mp.meta["peak_memory_bytes"] < need * 0.75
    # a search discards what does not fit, so it is not timed; what fits is timed as ever
    sim = Simulator(g, runner.cluster)
    full = sim.simulate(data_parallel(g, runner.cluster))
    untimed = sim.simulate(data_parallel(g, runner.cluster), time_if_full=False)
    assert not full.fits and math.isfinite(full.iteration_s) and untimed.iteration_s == math.inf
    assert np.array_equal(untimed.memory, full.memory) and dp.meta["throughput"] is None
    fits = sim.simulate(model_parallel(g, runner.cluster), time_if_full=False)
    assert fits.iteration_s == sim.simulate(model_parallel(g, runner.cluster)).iteration_s == mp.cost


@pytest.mark.parametrize("zero", [0, 1, 3])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_what_does_not_fit_is_refused_from_the_ops_shares_alone_with_the_memory_a_full_simulation_gives(
        zero, recompute):
    """Left untimed, a strategy that does not fit sets no task cost (its memory is added up from each op's share
    of it), yet gets the very memory a full simulation gives it: sequence parallelism's reduce-scattered
    activations, pipelines, recomputation and ZeRO's shards included; one that fits is timed as ever."""
    from dataclasses import replace

    from autotune.search_spaces.parallel.clusters import get_cluster
    from autotune.search_spaces.parallel.models import transformer
    from autotune.search_spaces.parallel.strategy import megatron

    g, cl = transformer("t", 8, 4, 1024, 16, 512, 1000, recompute=recompute), get_cluster("dgx-a100-x2")
    for t, p, sequence in ((8, 2, True), (4, 4, False), (2, 1, True), (1, 4, False)):
        s = megatron(g, cl, t, p, sequence=sequence)
        full = Simulator(g, cl, 4, zero=zero).simulate(s)
        tight = replace(cl, device=replace(cl.device, memory_bytes=full.peak_memory * 0.999))
        sim = Simulator(g, tight, 4, zero=zero)
        r = sim.simulate(s, time_if_full=False)
        assert r.iteration_s == math.inf and not r.fits and sim.current is None  # no task cost was set
        assert np.array_equal(r.memory, full.memory), (t, p, sequence)
        roomy = replace(cl, device=replace(cl.device, memory_bytes=full.peak_memory))
        assert Simulator(g, roomy, 4, zero=zero).simulate(s, time_if_full=False).iteration_s == full.iteration_s


def test_a_devices_context_and_allocator_slack_are_counted_on_every_device_and_decide_what_fits():
    """What a process holds beyond its tensors: the tensors' peak times one plus the allocator's slack, plus the
    context, on every device; a strategy whose tensors fit but whose total does not is refused."""
    from dataclasses import replace

    g = chain(2, b=8, f=1024, width=1024)
    bare = cluster(per_node=2)
    dp = data_parallel(g, bare)
    tensors = Simulator(g, bare).simulate(dp).memory
    stack = replace(bare, device=replace(bare.device, context_bytes=3e6, allocator_slack=0.25))
    held = Simulator(g, stack).simulate(dp)
    assert np.allclose(held.memory, tensors * 1.25 + 3e6) and tensors.max() > 0
    tight = replace(stack, device=replace(stack.device, memory_bytes=tensors.max() * 1.1))
    runner = SimulatorRunner(g, tight)
    r = runner.measure(runner.space.task, [runner.space.wrap(dp)])[0]
    assert r.status is Status.INVALID and r.meta["peak_memory_bytes"] == pytest.approx(tensors.max() * 1.25 + 3e6)
