"""WarmStart's race: the arms' shares follow their credit, the cold floor, and what a misleading or a good
source gets from it."""

from __future__ import annotations

import numpy as np
from warm_start_fixtures import drive, good_source, misleading_source, race_space, source_data

from autotune.algorithms.random_search import RandomSearch
from autotune.algorithms.warm_start import WarmStart
from autotune.testing.fakes import FakeRunner, small_knob_space


def test_thompson_share_follows_the_credit():
    algo = WarmStart(RandomSearch(), [source_data(small_knob_space())])
    algo.bind(small_knob_space(), np.random.default_rng(0))
    algo.credit, algo.misses = {"warm": 10.0, "cold": 0.0}, {"warm": 0.0, "cold": 10.0}
    assert sum(algo.share(8)["warm"] for _ in range(50)) >= 0.95 * 400
    algo.credit, algo.misses = {"warm": 0.0, "cold": 10.0}, {"warm": 10.0, "cold": 0.0}
    assert sum(algo.share(8)["cold"] for _ in range(50)) >= 0.95 * 400
    assert sum(algo.share(5).values()) == 5


def test_the_cold_floor_holds_a_share_of_every_batch_whatever_the_race_says():
    """A source right everywhere wins the race's draws; the floor still gives the cold arm its share of
    each batch once the probes and design points are in (none before), also one point at a time."""
    space = race_space()
    good = good_source(space)
    raced = [b.count("cold") for b in drive(WarmStart(RandomSearch(), [good], top_k=4, cold_floor=0.0), space,
                                                 batches=8)[2:]]
    assert min(raced) < 2  # without a floor the good source takes the slots
    floored = drive(WarmStart(RandomSearch(), [good], top_k=4, cold_floor=0.5), space, batches=8)
    assert floored[0][:4] == ["warm"] * 4
    assert all(b.count("cold") >= 4 for b in floored[2:])
    default = drive(WarmStart(RandomSearch(), [good], top_k=4), space, batches=8)  # a quarter
    assert all(b.count("cold") >= 2 for b in default[2:])
    algo = WarmStart(RandomSearch(), [good], top_k=4, cold_floor=0.25)
    algo.bind(space, np.random.default_rng(0))
    runner, owners = FakeRunner(space), []
    for _ in range(60):
        batch = algo.ask(1)
        owners += [algo.owner[c.key] for c in batch]
        algo.tell(runner.measure(space.task, batch))
    after = owners[12:]  # the 4 probes and 8 design points first
    assert after.count("cold") >= len(after) // 4
    state = algo.state_dict()
    assert 0.0 <= state["floor_carry"] < 1.0


def test_a_misleading_source_loses_its_slots_to_the_cold_search():
    space = race_space()
    # min_rho -1: the pooled model never leaves the source out by itself, only the race protects
    owners = drive(WarmStart(RandomSearch(), [misleading_source(space)], top_k=4, min_rho=-1.0), space, batches=8)
    assert owners[0][:4] == ["warm"] * 4  # the probes come first
    after = [o for batch in owners[2:] for o in batch]  # once the probes and a first batch are told
    assert after.count("cold") >= 0.75 * len(after)


def test_a_good_source_is_followed_past_its_first_probes_in_its_own_order():
    """After the design points, the probe arm measures the source's next-best configurations, in the
    source's order, while they pay; the misleading source's probe arm is starved above."""
    space = race_space()
    good = good_source(space)
    ranked = [m.candidate.key for m in good.ranked()]
    for seed in range(3):
        algo = WarmStart(RandomSearch(), [good], top_k=4, init=8)
        algo.bind(space, np.random.default_rng(seed))
        runner, probed = FakeRunner(space), []
        for _ in range(4):
            batch = algo.ask(8)
            probed += [c.key for c in batch if algo.owner[c.key] == "probe"]
            algo.tell(runner.measure(space.task, batch))
        assert len(probed) >= 3, seed
        assert probed == [k for k in ranked[4:28] if k in probed], seed  # in order, skipping what others measured


def test_a_misleading_source_costs_little_against_the_cold_search():
    """Measurements to the optimum, warm-started from the inverted source, against the cold search
    alone (WarmStart without sources), median over 3 seeds."""
    space = race_space()
    best = min(FakeRunner(space).measure(space.task, list(space.enumerate())), key=lambda m: m.cost).candidate.key

    def to_best(algo, seed):
        algo.bind(space, np.random.default_rng(seed))
        runner, n = FakeRunner(space), 0
        while n < 400:
            batch = algo.ask(8)
            for c in batch:
                n += 1
                if c.key == best:
                    return n
            algo.tell(runner.measure(space.task, batch))
        return n

    cold = sorted(to_best(WarmStart(RandomSearch(), []), s) for s in range(3))[1]
    warm = sorted(to_best(WarmStart(RandomSearch(), [misleading_source(space)], top_k=4), s) for s in range(3))[1]
    assert warm <= 1.3 * cold + 8
