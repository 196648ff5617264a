"""parallelize(): the strategy search as a campaign, on built-in and imported models."""

import pytest

from autotune.drivers.parallel import parallelize, warmup
from autotune.db import open_database, queries


@pytest.mark.parametrize("algorithm", ["mcmc", "evolutionary", "random"])
def test_every_algorithm_finds_a_strategy_better_than_every_baseline(algorithm):
    """MLP 16x8192 at batch 256 on 16 P100s: all baselines pay for its 1 GiB of weights (data
    parallelism all-reduces their gradients, Megatron and model parallelism move activations
    between nodes); the search itself must find a faster strategy, and report its true time."""
    from autotune.runners.simulator.engine import Simulator

    r = parallelize("mlp-unity", "p100-4x4", 256, algorithm, trials=150, seed=1, db=None)
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
    r = parallelize("dlrm", "p100-4x4", 4096, "mcmc", trials=300, seed=0, db=None)
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

    r = parallelize(resnet, "p100-4x4", 32, "mcmc", trials=20, db=None)
    assert r.best.ok and r.simulations == len(warmup(r.space)) + 20  # the baselines and seeds, then 20 new
    best = r.best.candidate
    sim = Simulator(r.model, r.cluster, zero=r.space.zero_of(best), zero_prefetch=r.space.prefetch_of(best))
    assert r.best.cost == sim.simulate(r.space.strategy(best)).iteration_s
    assert r.best.cost == min(t for t in r.trace + [m.objective for m in r.baselines.values()])


def test_budgets_are_checked_and_only_the_baselines_are_measured_whatever_the_time_budget():
    from autotune.errors import UsageError

    with pytest.raises(UsageError, match="trial budget must be >= 0"):
        parallelize("rnnlm", "p100-4x4", trials=-1, db=None)
    with pytest.raises(UsageError, match="time budget must be a positive number"):
        parallelize("rnnlm", "p100-4x4", time_budget=0, db=None)
    r = parallelize("gpt-1.3b", "dgx-a100-x2", time_budget=1e-6, db=None)
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
    plain = parallelize("rnnlm", "p100-4x4", trials=0, db=None)
    by_url = parallelize("rnnlm", "p100-4x4", trials=0, measured_db=url, db=None)
    by_db = parallelize("rnnlm", "p100-4x4", trials=0, measured_db=db, measured_device="P100", db=None)
    db.close()
    assert plain.measured is None and by_url.measured == by_db.measured == {"op_times": 0, "collectives": 2}
    slow = by_url.baselines["data-parallel"].cost
    assert slow > plain.baselines["data-parallel"].cost + 1.0 and by_db.baselines["data-parallel"].cost == slow
    assert by_url.runner.device.key != plain.runner.device.key  # measured figures make another device


TINY_GPT = "transformer:layers=2,hidden=512,heads=8,seq=256,vocab=1000"


def _dp(r) -> tuple:
    m = r.baselines["data-parallel"]
    return m.status, m.cost, m.meta.get("capacity_bytes")


def test_a_run_with_another_optimizer_on_the_same_database_simulates_it_afresh(tmp_path):
    """The optimizer changes every strategy's time: a run with DeepSpeed's BF16 optimizer after a run with
    Megatron's, on one database, reports what a run of its own reports, not the other's trials looked up."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    megatron = parallelize(TINY_GPT, "p100-4x4", trials=0, db=url)
    shared = parallelize(TINY_GPT, "p100-4x4", trials=0, db=url, optimizer="deepspeed-bf16")
    alone = parallelize(TINY_GPT, "p100-4x4", trials=0, optimizer="deepspeed-bf16", db=None)
    assert _dp(shared) == _dp(alone) and _dp(shared)[1] > _dp(megatron)[1]
    assert shared.runner.device.key != megatron.runner.device.key


def test_an_edited_cluster_file_is_simulated_afresh_on_the_same_database(tmp_path):
    """A cluster file whose device memory is edited between two runs on one database: the second run
    checks memory against the new capacity, as a run on a database of its own does."""
    import json

    url, path = f"sqlite:///{tmp_path / 'shared.db'}", tmp_path / "my-cluster.json"
    spec = {"name": "my-cluster", "nodes": 1, "per_node": 4, "intra_bw": 32e9, "inter_bw": 25e9, "link": "pcie",
            "device": {"name": "L40S", "flops_fp32": 91.6e12, "flops_fp16": 362e12, "memory_bytes": 48e9,
                       "mem_bandwidth": 864e9}}
    path.write_text(json.dumps(spec))
    big = parallelize("gpt-1.3b", str(path), trials=0, db=url, time_budget=1e-3)
    spec["device"]["memory_bytes"] = 16e9
    path.write_text(json.dumps(spec))
    shared = parallelize("gpt-1.3b", str(path), trials=0, db=url, time_budget=1e-3)
    alone = parallelize("gpt-1.3b", str(path), trials=0, time_budget=1e-3, db=None)
    assert _dp(big)[2] == 48e9 and _dp(shared) == _dp(alone) and _dp(shared)[2] == 16e9
    for r in (shared, alone):
        assert not r.best.ok or r.best.meta["peak_memory_bytes"] <= 16e9


def test_other_measured_times_of_as_many_points_are_simulated_afresh_on_the_same_database(tmp_path):
    """Two measurement databases with the same collectives measured at other times: a run with the second
    after a run with the first, on one database, uses the second's times."""
    from autotune.db import open_database
    from autotune.db.calibration import record
    from autotune.types import Device

    urls = []
    for i, scale in enumerate((1.0, 10.0)):
        urls.append(f"sqlite:///{tmp_path / f'measured{i}.db'}")
        db = open_database(urls[-1])
        record(db, Device("Tesla P100-SXM2-16GB", "cuda", {}),
               collectives=[("allreduce", 16, 1e3, scale * 1e-4), ("allreduce", 16, 1e9, scale * 0.1)])
        db.close()
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    first = parallelize("rnnlm", "p100-4x4", trials=0, db=url, measured_db=urls[0])
    shared = parallelize("rnnlm", "p100-4x4", trials=0, db=url, measured_db=urls[1])
    alone = parallelize("rnnlm", "p100-4x4", trials=0, measured_db=urls[1], db=None)
    assert _dp(shared) == _dp(alone) and _dp(shared)[1] > _dp(first)[1]


def test_a_run_without_recomputation_after_one_that_chooses_it_does_not_report_a_recomputing_strategy(tmp_path):
    """Sequences of 8,192 on devices of 3 GB: only a recomputing strategy fits. A run with recomputation fixed
    to none, on the database of a run that chose it, is a campaign of its own and reports what a run of its
    own reports (nothing fits), not the other's recomputing strategy."""
    import json

    path = tmp_path / "small.json"
    path.write_text(json.dumps({"name": "small", "nodes": 1, "per_node": 4, "intra_bw": 300e9, "inter_bw": 25e9,
                                "device": {"name": "small", "flops_fp32": 19.5e12, "flops_fp16": 312e12,
                                           "memory_bytes": 3e9, "mem_bandwidth": 2e12}}))
    model, url = "transformer:layers=4,hidden=1024,heads=16,seq=8192,vocab=1000", f"sqlite:///{tmp_path / 'shared.db'}"
    chosen = parallelize(model, str(path), 1, trials=20, db=url)
    assert chosen.best.ok and chosen.to_json()["recompute"] != "none"
    fixed = parallelize(model, str(path), 1, trials=5, db=url, recompute="none")
    alone = parallelize(model, str(path), 1, trials=5, recompute="none", db=None)
    assert fixed.campaign != chosen.campaign and fixed.to_json()["recompute"] == "none"
    assert not fixed.best.ok and not alone.best.ok
    from autotune.errors import UsageError

    with pytest.raises(UsageError, match="already exists for another task"):  # naming the other's campaign
        parallelize(model, str(path), 1, trials=5, db=url, recompute="none", campaign=chosen.campaign)


def test_without_a_database_named_the_search_is_kept_in_the_working_directory(tmp_path, monkeypatch):
    """As every driver and command: autotune.db in the working directory, where a rerun resumes the campaign."""
    monkeypatch.chdir(tmp_path)
    first = parallelize("rnnlm", "p100-4x4", trials=3)
    again = parallelize("rnnlm", "p100-4x4", trials=6)
    stored = queries.trials(open_database("sqlite:///autotune.db"), campaign=first.campaign)
    assert again.campaign == first.campaign and len(stored) == first.simulations + again.simulations
    assert again.simulations == 3  # the rerun resumed the campaign: three more simulations, not six
