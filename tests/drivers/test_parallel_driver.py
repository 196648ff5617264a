"""parallelize(): the strategy search as a campaign, on built-in and imported models."""

import pytest

from autotune.drivers.parallel import parallelize, warmup


@pytest.mark.parametrize("algorithm", ["mcmc", "evolutionary", "random"])
def test_every_algorithm_finds_a_strategy_better_than_every_baseline(algorithm):
    """MLP 16x8192 at batch 256 on 16 P100s: all baselines pay for its 1 GiB of weights (data
    parallelism all-reduces their gradients, Megatron and model parallelism move activations
    between nodes); the search itself must find a faster strategy, and report its true time."""
    from autotune.runners.simulator.engine import Simulator

    r = parallelize("mlp-unity", "p100-4x4", 256, algorithm, trials=150, seed=1)
    assert r.best_source == "search" and r.best.cost < 0.5 * min(m.cost for m in r.baselines.values())
    best = r.best.candidate
    sim = Simulator(r.model, r.cluster, zero=r.space.zero_of(best), zero_prefetch=r.space.prefetch_of(best))
    assert r.best.cost == sim.simulate(r.space.strategy(best)).iteration_s
    first = len(warmup(r.space))
    assert r.simulations == first + 150 and len(r.trace) == 150  # the baselines and seeds, then 150 new strategies
    assert r.trace[-1] == r.best.cost and all(a >= b for a, b in zip(r.trace, r.trace[1:]))
    out = r.to_json()
    assert set(out) >= {"model", "cluster", "devices", "best", "baselines", "search_s", "simulations"}
    assert set(out["best"]) >= {"iteration_s", "peak_memory_bytes", "strategy"}


def test_mcmc_improves_on_data_parallel_where_it_is_poor():
    r = parallelize("dlrm", "p100-4x4", 4096, "mcmc", trials=300, seed=0)
    assert r.best.cost < 0.5 * r.baselines["data-parallel"].cost
    best = r.space.candidate(r.best.candidate.payload)
    assert best.key == r.best.candidate.key and r.space.contains(best)


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install 'autotune[graphs]')")
    from autotune.search_spaces.graphs import model_zoo

    path = tmp_path_factory.mktemp("onnx") / "resnet50.onnx"
    onnx.save(model_zoo.build("resnet50", small=True), str(path))
    return str(path)


def test_onnx_model_parallelizes_through_the_cli_path(resnet):
    from autotune.runners.simulator.engine import Simulator

    r = parallelize(resnet, "p100-4x4", 32, "mcmc", trials=20)
    assert r.best.ok and r.simulations == len(warmup(r.space)) + 20  # the baselines and seeds, then 20 new
    best = r.best.candidate
    sim = Simulator(r.model, r.cluster, zero=r.space.zero_of(best), zero_prefetch=r.space.prefetch_of(best))
    assert r.best.cost == sim.simulate(r.space.strategy(best)).iteration_s
    assert r.best.cost == min(t for t in r.trace + [m.objective for m in r.baselines.values()])


def test_budgets_are_checked_and_only_the_baselines_are_measured_whatever_the_time_budget():
    from autotune.errors import UsageError

    with pytest.raises(UsageError, match="trial budget must be >= 0"):
        parallelize("rnnlm", "p100-4x4", trials=-1)
    with pytest.raises(UsageError, match="time budget must be a positive number"):
        parallelize("rnnlm", "p100-4x4", time_budget=0)
    r = parallelize("gpt-1.3b", "dgx-a100-x2", time_budget=1e-6)
    assert len(warmup(r.space)) > 3  # the seed layouts stop at the time budget, the baselines do not
    assert len(r.baselines) == 3 and r.simulations == 3 and r.trace == []


def test_seed_layouts_come_in_turn_from_every_tensor_and_pipeline_degree():
    """A time budget that stops the seeds early has tried every (t, p) first, not the first few only."""
    import re

    from autotune.drivers.parallel import strategy_space
    from autotune.search_spaces.parallel.clusters import get_cluster
    from autotune.search_spaces.parallel.models import get_model

    space = strategy_space(get_model("gpt-1.3b"), get_cluster("dgx-a100-x2"))
    names = list(warmup(space))[len(space.baselines()):]
    degrees = [m.group(1) for n in names if (m := re.match(r"layout (t\d+ p\d+)", n))]
    distinct = list(dict.fromkeys(degrees))
    assert len(distinct) > 4 and len(degrees) > 2 * len(distinct)
    assert set(degrees[:len(distinct)]) == set(distinct)  # one of each degree before a second of any


def test_within_a_degree_the_seeds_with_less_recomputation_come_first():
    """The faster recomputation modes first (none, selective, full): where a budget stops the seeds, the
    layouts that fit with less recomputation were tried."""
    import re

    from autotune.drivers.parallel import strategy_space
    from autotune.search_spaces.parallel.clusters import get_cluster
    from autotune.search_spaces.parallel.models import RECOMPUTE, get_model

    space = strategy_space(get_model("gpt-1.3b"), get_cluster("dgx-a100-x2"))
    seeds = list(warmup(space).items())[len(space.baselines()):]
    modes: dict[str, list[int]] = {}
    for name, c in seeds:
        degree = re.match(r"layout (t\d+ p\d+)", name)
        if degree:
            modes.setdefault(degree.group(1), []).append(RECOMPUTE.index(c.payload.get("recompute", space.recompute)))
    assert len(modes) > 4 and any(len(set(m)) > 1 for m in modes.values())
    assert all(m == sorted(m) for m in modes.values())


def test_measured_times_from_a_database_override_the_estimates(tmp_path):
    from autotune.db import open_database
    from autotune.db.calibration import record
    from autotune.types import Device

    url = f"sqlite:///{tmp_path / 'm.db'}"
    db = open_database(url)
    record(db, Device("Tesla P100-SXM2-16GB", "cuda", {}), collectives=[("allreduce", 16, 1e3, 1.0), ("allreduce", 16, 1e9, 10.0)])
    plain = parallelize("rnnlm", "p100-4x4", trials=0)
    by_url = parallelize("rnnlm", "p100-4x4", trials=0, measured_db=url)
    by_db = parallelize("rnnlm", "p100-4x4", trials=0, measured_db=db, measured_device="P100")
    db.close()
    assert plain.measured is None and by_url.measured == by_db.measured == {"op_times": 0, "collectives": 2}
    slow = by_url.baselines["data-parallel"].cost
    assert slow > plain.baselines["data-parallel"].cost + 1.0 and by_db.baselines["data-parallel"].cost == slow
    assert by_url.runner.device.key != plain.runner.device.key  # measured figures make another device
