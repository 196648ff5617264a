"""Measurements and campaigns dispatched over a local Ray cluster (skipped where ray is not installed)."""

import functools
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'autotune[ray]'): Ray tests skipped")

from autotune.campaign import Campaign  # noqa: E402
from autotune.db import open_database  # noqa: E402
from autotune.errors import UsageError  # noqa: E402
from autotune.runners.ray import RayRunner  # noqa: E402
from autotune.runners.replay import ReplayRunner  # noqa: E402
from autotune.search_spaces.replay import ReplaySpace  # noqa: E402
from autotune.types import Status  # noqa: E402

EXAMPLE = "example:pnpoly-rtx3090"


@pytest.fixture(scope="module")
def cluster():
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def space():
    return ReplaySpace(EXAMPLE)


def _keys(db, name):
    return [m.candidate.key for m, reused in db.campaign_history(db.campaign(name).id) if not reused]


def test_a_campaign_on_ray_actors_stores_exactly_its_budget(cluster, space, sqlite_url):
    runner = RayRunner(functools.partial(ReplayRunner, space.cache, 0.02), actors=3)
    try:
        assert runner.slots == 3 and runner.device.name == space.cache.device_name
        result = Campaign("ray", space, "random", runner, open_database(sqlite_url), trials=45, seed=1).run()
    finally:
        runner.close()
    keys = _keys(open_database(sqlite_url), "ray")
    assert result.trials == 45 and len(keys) == len(set(keys)) == 45
    # the same answers as measuring here
    here = ReplayRunner(space.cache).measure(space.task, [result.best.candidate])[0]
    assert here.cost == pytest.approx(result.best.cost)


def test_killing_an_actor_mid_campaign_loses_no_trial(cluster, space, sqlite_url):
    """The actor's process is killed while it measures: Ray restarts it and runs its candidate again."""
    runner = RayRunner(functools.partial(ReplayRunner, space.cache, 0.1), actors=3)
    victim = runner.pids[0]

    def kill_soon():
        time.sleep(1.0)
        os.kill(victim, signal.SIGKILL)

    killer = threading.Thread(target=kill_soon)
    killer.start()
    try:
        result = Campaign("kill", space, "random", runner, open_database(sqlite_url), trials=60, seed=2).run()
        restarted = ray.get([a.ready.remote(runner.factory) for a in runner.actors])
    finally:
        killer.join()
        runner.close()
    assert victim not in [pid for _, _, pid in restarted], "the killed actor was not restarted"
    db = open_database(sqlite_url)
    history = [m for m, _ in db.campaign_history(db.campaign("kill").id)]
    assert result.trials == 60 and len({m.candidate.key for m in history}) == 60
    # every trial is the recorded answer (the cache's own failures included), none a lost measurement
    direct = ReplayRunner(space.cache).measure(space.task, [m.candidate for m in history])
    assert [(m.status, m.error) for m in history] == [(d.status, d.error) for d in direct]


def test_a_candidate_ray_gives_up_on_is_a_failed_trial_that_says_why(cluster, space, sqlite_url):
    runner = RayRunner(functools.partial(ReplayRunner, space.cache, 0.5), actors=1, max_restarts=0,
                       max_task_retries=0)
    cand = next(iter(space.enumerate()))
    runner.submit(space.task, [cand])
    time.sleep(0.2)
    os.kill(runner.pids[0], signal.SIGKILL)
    out = []
    while runner.in_flight:
        out += runner.collect(timeout_s=30)
    assert len(out) == 1 and out[0].status is Status.RUNTIME_ERROR and "Ray gave up" in out[0].error


def test_closing_with_candidates_in_flight_prints_nothing(cluster, space, capfd):
    """Ctrl-C closes the runner while actors measure: their calls end with them, without Ray announcing on
    standard output (where --json prints) that it will retry them."""
    runner = RayRunner(functools.partial(ReplayRunner, space.cache, 3.0), actors=2)
    runner.submit(space.task, list(space.enumerate())[:4])
    time.sleep(1.0)
    runner.close()
    time.sleep(3.0)  # Ray's messages come from a thread of its own
    out, err = capfd.readouterr()
    assert "retr" not in out + err, out + err


def test_builds_run_as_cpu_tasks_and_the_actor_runs_what_they_built(cluster, sqlite_url):
    from autotune.runners.c import CRunner
    from autotune.search_spaces.kernels import kernel_problem

    kspace, template = kernel_problem("softmax", "64,64", "cpu", threads=1)
    runner = RayRunner(functools.partial(CRunner, template), actors=1, num_cpus=1, build_cpus=0.5)
    try:
        assert runner.stage is not None and runner.slots == 2  # a build queued behind each run
        rng = np.random.default_rng(0)
        cands = list({c.key: c for c in [kspace.initial()] + [kspace.sample(rng) for _ in range(3)]}.values())
        ms = runner.measure(template.task, cands)
    finally:
        runner.close()
    assert [m.candidate.key for m in ms] == [c.key for c in cands]
    assert all(m.ok for m in ms), [m.error for m in ms]
    assert all(m.build_s >= 0 and m.meta["runner"] == "c" for m in ms)


def test_actors_holding_every_cpu_build_their_own_candidates(cluster):
    """One C actor per core of the cluster: no CPU is left for a build task, so each actor builds what it
    measures, rather than every candidate waiting for a build that is never scheduled."""
    from autotune.runners.c import CRunner
    from autotune.search_spaces.kernels import kernel_problem

    kspace, template = kernel_problem("softmax", "64,64", "cpu", threads=1)
    runner = RayRunner(functools.partial(CRunner, template), actors=2, num_cpus=1)
    try:
        assert runner.stage is not None and runner.slots == 2
        runner.submit(template.task, [kspace.initial()])
        out = runner.collect(timeout_s=120)
    finally:
        runner.close()
    assert len(out) == 1 and out[0].ok, [m.error for m in out]


def test_actors_that_cannot_start_are_a_usage_error(cluster, space):
    with pytest.raises(UsageError, match="at least one actor"):
        RayRunner(functools.partial(ReplayRunner, space.cache), actors=0)
    with pytest.raises(UsageError, match="did not start"):
        RayRunner(functools.partial(ReplayRunner, space.cache), actors=1, num_gpus=64, start_timeout_s=3)
    with pytest.raises(UsageError, match="could not make its runner: ValueError: invalid literal") as failed:
        RayRunner(functools.partial(int, "x"), actors=1)  # the runner's own error, in one line
    assert "\n" not in str(failed.value)


def test_tune_many_runs_each_campaign_as_a_ray_task_and_reports_failures(cluster, tmp_path, sqlite_url):
    from autotune.drivers.scale import load_many, tune_many

    spec = tmp_path / "many.yaml"
    spec.write_text(f"""
defaults: {{trials: 12}}
campaigns:
  - {{kind: replay, cache: "{EXAMPLE}", campaign: a, seed: 1}}
  - {{kind: parallel, model: mlp-unity, cluster: dgx-a100-x1, campaign: p, trials: 5}}
  - {{kind: replay, cache: missing.json, campaign: bad}}
""")
    results = {r["campaign"]: r for r in tune_many(load_many(spec), sqlite_url, ray="local")}
    assert results["a"]["trials"] == 12
    assert results["p"]["status"] == "finished" and results["p"]["best_cost"] > 0
    assert results["bad"]["status"] == "failed" and "missing.json" in results["bad"]["error"]
    db = open_database(sqlite_url)
    assert len(_keys(db, "a")) == 12


def test_tune_many_on_ray_tells_which_campaigns_still_run_while_none_ends(cluster, sqlite_url):
    from autotune.drivers.scale import tune_many

    entry = {"kind": "replay", "args": {"cache": EXAMPLE, "trials": 10, "measure_delay": 0.2, "algorithm": "random",
                                        "cost_model": None}, "campaign": "slow"}
    waits = []
    results = tune_many([entry], sqlite_url, ray="local", on_wait=waits.append, wait_s=0.5)
    assert results[0]["trials"] == 10
    assert waits and all([e["campaign"] for e in running] == ["slow"] for running in waits)


def test_tune_many_on_ray_fails_a_gpu_campaign_at_once_where_the_cluster_has_no_gpu(cluster, sqlite_url):
    """A CUDA campaign's Ray task asks for a GPU: on a cluster with none it is reported failed, saying why, and the
    others run, rather than left pending for good as a campaign still running."""
    if ray.cluster_resources().get("GPU", 0):
        pytest.skip("the local Ray cluster has a GPU")
    from autotune.drivers.scale import tune_many

    entries = [{"kind": "kernel", "args": {"name": "gemm", "shape": "64,64,64", "target": "cuda", "trials": 2},
                "campaign": "gpu"},
               {"kind": "replay", "args": {"cache": EXAMPLE, "trials": 3}, "campaign": "cpu"}]

    def waiting(running):
        raise AssertionError(f"still waiting for {[e['campaign'] for e in running]}")

    results = {r["campaign"]: r for r in tune_many(entries, sqlite_url, ray="local", on_wait=waiting, wait_s=10)}
    assert results["gpu"]["status"] == "failed"
    assert "holding a GPU, and the Ray cluster has none" in results["gpu"]["error"]
    assert results["cpu"]["trials"] == 3


def test_tune_replay_with_ray_on_the_command_line(tmp_path):
    """A fresh process with --ray local starts its own cluster, measures there and logs as usual."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    r = subprocess.run([sys.executable, "-c", "from autotune.cli.main import main; main()", "tune", "replay", "--cache", EXAMPLE, "-n", "20",
                        "--ray", "local", "--ray-actors", "2", "--db", url, "--campaign", "cli", "--json",
                        "--no-progress"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert '"trials": 20' in r.stdout.splitlines()[-1]
    # no error line from Ray's core (an actor's constructor arguments in the object store, say) alarms the user
    assert not re.search(r"^\[[^]]* E \d+ \d+\]", r.stderr, re.M), r.stderr[-2000:]
    assert len(_keys(open_database(url), "cli")) == 20


def test_ctrl_c_interrupts_the_campaigns_running_as_ray_tasks(cluster, tmp_path, sqlite_url):
    """Ctrl-C in `tune many --ray`: each campaign's Ray task is interrupted as Ctrl-C interrupts a campaign here:
    it stores what it measured and is marked interrupted, with no claim left."""
    from autotune.drivers.scale import load_many, tune_many

    spec = tmp_path / "many.yaml"
    spec.write_text(f"""
defaults: {{trials: 5000, measure_delay: 0.05, algorithm: random, cost_model: null, batch: 2}}
campaigns:
  - {{kind: replay, cache: "{EXAMPLE}", campaign: a, seed: 1}}
  - {{kind: replay, cache: "{EXAMPLE}", campaign: b, seed: 2}}
""")
    db = open_database(sqlite_url)

    def interrupt_once_both_measure():
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if all(len(_keys(db, n)) >= 2 for n in "ab"):
                    break
            except UsageError:  # not opened yet
                pass
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGINT)

    ctrl_c = threading.Thread(target=interrupt_once_both_measure)
    ctrl_c.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            tune_many(load_many(spec), sqlite_url, ray="local")
    finally:
        ctrl_c.join()
    for name in "ab":
        row = db.campaign(name)
        assert row.status == "interrupted" and db.campaign_workers(row.id) == []
        assert 2 <= len(_keys(db, name)) < 5000


def test_a_worker_of_a_parallel_campaign_with_ray_runs_it_as_a_ray_task(cluster, sqlite_url):
    """`autotune worker --ray` on a campaign whose driver has no actors runs it on the cluster, as `tune parallel
    --ray` does, rather than here."""
    from sqlalchemy import select

    from autotune.db.models import CampaignRow, TrialRow
    from autotune.drivers.parallel import parallelize
    from autotune.drivers.scale import join_campaign

    parallelize("mlp-unity", "dgx-a100-x1", trials=3, campaign="p", db=sqlite_url)
    db = open_database(sqlite_url)
    with db.session() as s:  # the recipe asks for more than was run
        row = s.scalar(select(CampaignRow).where(CampaignRow.name == "p"))
        recipe = dict(row.options["recipe"])
        recipe["args"] = {**recipe["args"], "trials": 8}
        row.options = {**row.options, "recipe": recipe}
    before = len(_keys(db, "p"))
    out = join_campaign("p", sqlite_url, ray="local")
    with db.session() as s:
        workers = s.scalars(select(TrialRow.worker).where(TrialRow.campaign_id == db.campaign("p").id)).all()
    assert out["status"] == "finished" and len(_keys(db, "p")) > before
    assert {int(w.split(":")[1]) for w in workers} - {os.getpid()}, "the worker ran here, not on Ray"
