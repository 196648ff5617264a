"""One meaning of a campaign's figures: trials, best and convergence count the campaign's own
measurements (trials whose campaign is this one), and look-ups of trials measured elsewhere are
counted apart as ``reused``. The JSON summary, `autotune campaigns`, the campaign's own best trial,
`queries.convergence` and the plotted data agree, on a campaign that reuses another's trials and is
then resumed; and two runs of one campaign at once never report negative counts."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

import autotune
from autotune.campaign import Campaign
from autotune.cli.main import app
from autotune.cli.plot import convergence_series
from autotune.db import open_database, queries
from autotune.db.models import CampaignTrialRow
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import ReplaySpace

CACHE = "example:pnpoly-rtx3090"
cli = CliRunner()


def tune(url: str, name: str, seed: int, trials: int, algorithm: str, *extra: str) -> dict:
    r = cli.invoke(app, ["tune", "replay", "--cache", CACHE, "--db", url, "--campaign", name, "--seed", str(seed),
                         "--trials", str(trials), "-a", algorithm, "--cost-model", "none", "--no-progress", "--json",
                         *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout.strip().splitlines()[-1])


def lookups(db, name: str) -> int:
    """Evaluations the campaign answered from the database instead of measuring them."""
    with db.session() as s:
        return s.scalar(select(func.count(CampaignTrialRow.id)).where(
            CampaignTrialRow.campaign_id == db.campaign(name).id, CampaignTrialRow.reused.is_(True)))


# random with the first campaign's seed proposes its 40 points first, and reuse finds a better trial
# than the second campaign's own; grid enumerates the same order whatever the seed, and its own best wins
@pytest.mark.parametrize("algorithm,seeds,reuse_better", [("random", (1, 1), True), ("grid", (1, 2), False)])
def test_summary_campaigns_best_convergence_and_plot_agree(tmp_path, algorithm, seeds, reuse_better):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    first = tune(url, "first", seeds[0], 40, algorithm)
    assert first["trials"] == 40 and first["reused"] == 0 and "best_including_reused" not in first
    second = tune(url, "second", seeds[1], 40, algorithm)
    assert second["trials"] == 40 and second["reused"] == 40 and second["measured_here"] == 40
    out = tune(url, "second", seeds[1], 60, algorithm)  # resumed for 20 more
    assert out["status"] == "finished" and out["measured_here"] == 20
    assert out["trials"] == 60 and out["reused"] == 40

    db = open_database(url)
    assert out["reused"] == lookups(db, "second") == 40 and lookups(db, "first") == 0

    # autotune campaigns (and its rows through the CLI)
    row = queries.campaigns(db).set_index("campaign").loc["second"]
    assert (row["trials"], row["reused"]) == (out["trials"], out["reused"])
    assert row["best_cost"] == pytest.approx(out["best_cost"]) and row["simulated_s"] == pytest.approx(out["simulated_s"])
    r = cli.invoke(app, ["campaigns", "--db", url, "--format", "json"])
    assert r.exit_code == 0, r.output
    listed = {c["campaign"]: c for c in json.loads(r.stdout)}
    assert (listed["second"]["trials"], listed["second"]["reused"]) == (60, 40) and "evaluations" not in listed["second"]
    assert listed["second"]["best_cost"] == pytest.approx(out["best_cost"])

    # the campaign's own best trial: its trials whose campaign is this one
    linked = queries.trials(db, campaign="second")
    own = linked[linked["campaign"] == "second"]
    assert len(own) == out["trials"] and len(linked) == out["trials"] + out["reused"]
    assert own["cost"].min() == pytest.approx(out["best_cost"])
    assert own.loc[own["cost"].idxmin(), "config"] == out["best_config"]

    # reuse found better than the campaign's own best: reported apart, and only then
    overall = min(out["best_cost"], linked["cost"].min())
    assert ("best_including_reused" in out) == reuse_better
    if reuse_better:
        assert out["best_including_reused"]["cost"] == pytest.approx(overall) and overall < out["best_cost"]
    wide = cli.invoke(app, ["campaigns", "--db", url, "--format", "json", "--include-reused"])
    assert wide.exit_code == 0, wide.output
    wide_row = {c["campaign"]: c for c in json.loads(wide.stdout)}["second"]
    assert wide_row["evaluations"] == 100 and wide_row["trials"] == 60 and wide_row["reused"] == 40
    assert wide_row["best_cost"] == pytest.approx(out["best_cost"])
    assert wide_row["best_cost_including_reused"] == pytest.approx(overall)

    # convergence: own trials only, unless asked
    conv = queries.convergence(db, "second")
    assert len(conv) == out["trials"] and not conv["reused"].any() and list(conv["trial"]) == list(range(1, 61))
    assert conv["best_so_far"].iloc[-1] == pytest.approx(out["best_cost"])
    assert conv["simulated_cum_s"].iloc[-1] == pytest.approx(out["simulated_s"])
    conv_all = queries.convergence(db, "second", include_reused=True)
    assert len(conv_all) == out["trials"] + out["reused"] and conv_all["reused"].sum() == out["reused"]
    assert conv_all["best_so_far"].iloc[-1] == pytest.approx(overall)
    assert (conv_all.loc[conv_all["reused"], "simulated_s"] == 0).all()
    assert conv_all["simulated_cum_s"].iloc[-1] == pytest.approx(out["simulated_s"])

    # the plot: what it draws, and the command
    (series,) = convergence_series(db, ["second"])
    assert series["trial"] == list(range(1, out["trials"] + 1)) and series["reused"] == 0
    assert series["best"][-1] == pytest.approx(out["best_cost"])
    assert series["simulated_s"][-1] == pytest.approx(out["simulated_s"])
    (with_reused,) = convergence_series(db, ["second"], include_reused=True)
    assert len(with_reused["trial"]) == out["trials"] + out["reused"] and with_reused["reused"] == out["reused"]
    assert with_reused["best"][-1] == pytest.approx(overall)
    for flags in ([], ["--include-reused"]):
        png = tmp_path / f"c{len(flags)}.png"
        r = cli.invoke(app, ["plot", "convergence", "--campaign", "second", "-o", str(png), "--db", url, *flags])
        assert r.exit_code == 0 and png.stat().st_size > 0, r.output

    # the dashboard's campaign row and convergence say the same
    from starlette.testclient import TestClient

    from autotune.dashboard.app import create_app

    with TestClient(create_app(url, warm=False)) as web:
        rows = {c["name"]: c for c in web.get("/api/campaigns").json()["campaigns"]}
        shown = rows["second"]
        assert (shown["measured"], shown["reused"]) == (out["trials"], out["reused"])
        assert shown["best_cost"] == pytest.approx(out["best_cost"])
        assert shown["best_cost_including_reused"] == pytest.approx(overall)
        conv_web = web.get("/api/convergence", params={"campaign": "second"}).json()
        assert (conv_web["own"]["n"], conv_web["all"]["n"]) == (out["trials"], out["trials"] + out["reused"])
        assert conv_web["own"]["best"] == pytest.approx(out["best_cost"])
        assert conv_web["all"]["best"] == pytest.approx(overall)

    # the Python API gives the same figures (a run with nothing left to measure)
    res = autotune.tune_replay(CACHE, algorithm, None, trials=60, seed=seeds[1], campaign="second", db=url)
    assert res.measured_here == 0 and res.resumed
    again = res.summary()
    assert {k: again[k] for k in ("trials", "reused", "best_cost", "best_config")} == {
        k: out[k] for k in ("trials", "reused", "best_cost", "best_config")}
    assert res.evaluations == res.trials + res.reused and res.errors >= 0
    assert (res.best_including_reused is not None) == reuse_better

    # the human-readable report says the same
    text = cli.invoke(app, ["tune", "replay", "--cache", CACHE, "--db", url, "--campaign", "second", "--seed",
                            str(seeds[1]), "--trials", "60", "-a", algorithm, "--cost-model", "none", "--no-progress"])
    assert text.exit_code == 0 and "trials 60 measured, 40 reused" in text.stdout, text.output

    frame = queries.campaigns(db, include_reused=True)
    assert (frame["trials"] >= 0).all() and (frame["reused"] >= 0).all()
    db.close()


def test_a_link_to_a_trial_another_campaign_stored_is_reused_not_own(db_url):
    """Two campaigns measuring one candidate at once: one trial row, stored first by "a"; the link of
    "b" says measured, but the measurement is a's, so it is b's look-up, counted once, by "a"."""
    space = ReplaySpace(CACHE)
    runner = ReplayRunner(space.cache)
    db = open_database(db_url)
    cand = space.sample(np.random.default_rng(0))
    (m,) = runner.measure(space.task, [cand])
    tid, did = db.task_id(space.task), db.device_id(runner.device)
    a, _ = db.open_campaign("a", space.task, runner.device, "random", {})
    b, _ = db.open_campaign("b", space.task, runner.device, "random", {})
    db.record_batch(tid, did, a.id, [m])
    db.record_batch(tid, did, b.id, [m])  # its insert does nothing: the trial is a's
    fa, fb = db.campaign_figures(a.id), db.campaign_figures(b.id)
    assert (fa.trials, fa.reused) == (1, 0) and (fb.trials, fb.reused) == (0, 1)
    assert fb.best is None and fb.best_including_reused.cost == pytest.approx(m.cost)
    df = queries.campaigns(db).set_index("campaign")
    assert (df.loc["b", "trials"], df.loc["b", "reused"]) == (0, 1)
    assert len(queries.convergence(db, "b")) == 0 and len(queries.convergence(db, "b", include_reused=True)) == 1
    db.close()


class SlowReplay(ReplayRunner):
    def measure(self, task, candidates):
        time.sleep(0.03)
        return super().measure(task, candidates)


def test_two_runs_of_one_campaign_report_the_same_non_negative_figures(db_url):
    """Each run used to count every run's measurements as trials but only its own links as
    evaluations, so "reused" (evaluations - trials) went negative."""
    space = ReplaySpace(CACHE)
    open_database(db_url).close()
    results = {}

    def run(seed: int) -> None:
        db = open_database(db_url)
        results[seed] = Campaign("two", space, "random", SlowReplay(space.cache), db, trials=64, seed=seed).run()
        db.close()

    threads = [threading.Thread(target=run, args=(seed,)) for seed in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    db = open_database(db_url)
    row = queries.campaigns(db).set_index("campaign").loc["two"]
    assert row["trials"] == 64 and row["reused"] == lookups(db, "two")
    assert sum(r.measured_here for r in results.values()) == 64
    last = max(results.values(), key=lambda r: r.trials)
    assert last.trials == 64 and last.reused == row["reused"] and last.best_cost == pytest.approx(row["best_cost"])
    for r in results.values():
        assert r.trials >= 0 and r.reused >= 0 and r.evaluations == r.trials + r.reused
    db.close()
