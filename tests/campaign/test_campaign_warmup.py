"""Campaign(warmup=...): reference points evaluated first, as trials of the campaign."""

from __future__ import annotations

from sqlalchemy import select

from autotune.campaign import Campaign
from autotune.db import open_database
from autotune.db.models import CampaignTrialRow, TrialRow
from autotune.testing.fakes import FakeRunner, small_knob_space


def _log(db, campaign: str) -> list[tuple[str, bool]]:
    """(candidate key, reused) of the campaign's trials, in the order it evaluated them."""
    cid = db.campaign(campaign).id
    with db.session() as s:
        rows = s.execute(select(TrialRow.candidate_key, CampaignTrialRow.reused)
                         .join(CampaignTrialRow, CampaignTrialRow.trial_id == TrialRow.id)
                         .where(CampaignTrialRow.campaign_id == cid).order_by(CampaignTrialRow.id)).all()
    return [(k, bool(r)) for k, r in rows]


def _warmup(space):
    pts = list(space.enumerate())
    return [pts[-1], pts[len(pts) // 2], pts[-1], pts[0]]  # one repeat: evaluated once


def test_warmup_is_evaluated_first_counted_and_told(sqlite_url):
    space, db = small_knob_space(), open_database(sqlite_url)
    warm = _warmup(space)
    res = Campaign("w", space, "random", FakeRunner(space), db, trials=10, batch=4, warmup=warm).run()
    log = _log(db, "w")
    assert [k for k, _ in log[:3]] == [warm[0].key, warm[1].key, warm[3].key]
    assert res.trials == len(log) == 10 and len({k for k, _ in log}) == 10  # told: random never proposes them


def test_warmup_is_evaluated_whatever_the_budget(sqlite_url):
    space, db = small_knob_space(), open_database(sqlite_url)
    res = Campaign("w", space, "random", FakeRunner(space), db, time_budget=1e-9, warmup=_warmup(space)).run()
    assert res.status == "time-budget" and res.trials == 3


def test_resume_evaluates_only_missing_warmup_and_continues_the_same_search(tmp_path):
    space = small_knob_space()
    warm = _warmup(space)
    db = open_database(f"sqlite:///{tmp_path / 'a.db'}")
    runner = FakeRunner(space)
    Campaign("w", space, "mcmc", runner, db, trials=5, batch=2, seed=3, warmup=warm).run()
    calls = runner.calls
    res = Campaign("w", space, "mcmc", runner, db, trials=12, batch=2, seed=3, warmup=warm).run()
    assert res.resumed and runner.calls - calls == 4  # four batches of two new points, no warm-up again
    ref = open_database(f"sqlite:///{tmp_path / 'b.db'}")
    Campaign("w", space, "mcmc", FakeRunner(space), ref, trials=12, batch=2, seed=3, warmup=warm).run()
    assert _log(db, "w") == _log(ref, "w")


def test_warmup_points_measured_before_are_reused(sqlite_url):
    space, db = small_knob_space(), open_database(sqlite_url)
    warm = _warmup(space)
    Campaign("first", space, "random", FakeRunner(space), db, trials=3, warmup=warm).run()
    runner = FakeRunner(space)
    res = Campaign("second", space, "random", runner, db, trials=2, warmup=warm).run()
    assert _log(db, "second")[:3] == [(warm[0].key, True), (warm[1].key, True), (warm[3].key, True)]
    assert res.trials == 2 and res.evaluations == 5


def test_warmup_past_the_required_points_stops_at_the_time_budget(sqlite_url):
    space, db = small_knob_space(), open_database(sqlite_url)
    warm = list(space.enumerate())[:20]
    res = Campaign("w", space, "random", FakeRunner(space), db, time_budget=1e-9, warmup=warm, warmup_required=2).run()
    assert res.status == "time-budget" and [k for k, _ in _log(db, "w")] == [c.key for c in warm[:2]]


def test_optional_warmup_points_are_all_measured_first_while_the_budget_lasts(sqlite_url):
    space, db = small_knob_space(), open_database(sqlite_url)
    warm = list(space.enumerate())[:20]
    runner = FakeRunner(space)
    res = Campaign("w", space, "random", runner, db, trials=25, batch=4, warmup=warm, warmup_required=2).run()
    log = [k for k, _ in _log(db, "w")]
    assert log[:20] == [c.key for c in warm] and res.trials == 25 and len(set(log)) == 25
    assert runner.calls >= 3  # the optional points in chunks: the time budget is checked between them
