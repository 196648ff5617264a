"""A campaign that retries failures (``retry_failed``) measures again the points whose stored trial failed in a
way another attempt may pass (TIMEOUT, RUNTIME_ERROR), and keeps the failure with the new measurement; a
compile error, an invalid point or a wrong result is looked up as before, and so is every failure without it."""

import pytest
from sqlalchemy import select

from autotune.campaign import Campaign
from autotune.db import open_database
from autotune.db.models import CampaignTrialRow, TrialRow
from autotune.errors import UsageError
from autotune.testing.fakes import FakeRunner, small_knob_space
from autotune.types import Measurement, Status


class RecordingRunner(FakeRunner):
    """FakeRunner that records the keys it measured (a fake: for tests only)."""

    def __init__(self, space, fail=frozenset()):
        super().__init__(space, fail)
        self.measured: list[str] = []

    def measure(self, task, candidates):
        self.measured += [c.key for c in candidates]
        return super().measure(task, candidates)


@pytest.fixture
def setting(db_url):
    space = small_knob_space()
    points = list(space.enumerate())
    db = open_database(db_url)
    yield space, points, db
    db.close()


def _run(space, db, name, runner, **kw):
    return Campaign(name, space, "random", runner, db, trials=len(list(space.enumerate())), progress=False,
                    **kw).run()


def test_retried_failures_are_measured_again_and_keep_the_earlier_failure(setting):
    space, points, db = setting
    flaky = {points[0].key, points[1].key}
    _run(space, db, "first", RecordingRunner(space, fail=flaky))  # those two fail (RUNTIME_ERROR) the first time
    again = RecordingRunner(space)
    result = _run(space, db, "again", again, retry_failed=True)
    assert sorted(again.measured) == sorted(flaky)  # the rest is looked up
    assert result.errors == 0
    with db.session() as s:
        rows = {r.candidate_key: r for r in s.scalars(select(TrialRow).where(TrialRow.candidate_key.in_(flaky)))}
        assert {r.status for r in rows.values()} == {"OK"}
        for r in rows.values():
            (earlier,) = r.meta["earlier"]
            assert earlier["status"] == "RUNTIME_ERROR" and earlier["error"] == "planted failure"
            assert earlier["campaign"] == "first" and earlier["created"] and earlier["worker"]
        # the first campaign keeps the point in its history, as a look-up now; the retry measured it
        links = {(t.campaign_id, t.trial_id): t.reused for t in s.scalars(select(CampaignTrialRow))}
        first, second = db.campaign("first").id, db.campaign("again").id
        for r in rows.values():
            assert r.campaign_id == second and links[(first, r.id)] is True and links[(second, r.id)] is False
    # without retry_failed the failure of a stored trial is looked up: nothing measured
    third = RecordingRunner(space, fail=flaky)
    _run(space, db, "third", third)
    assert third.measured == []


def test_only_failures_another_attempt_may_pass_are_retried_and_a_second_failure_is_kept_too(setting):
    space, points, db = setting
    statuses = [Status.TIMEOUT, Status.RUNTIME_ERROR, Status.COMPILE_ERROR, Status.INVALID, Status.WRONG_RESULT]
    db.add_trials(space.task, FakeRunner(space).device,
                  [Measurement(p, st, error=f"stored {st.value}") for p, st in zip(points, statuses)])
    still_failing = RecordingRunner(space, fail={points[0].key})
    _run(space, db, "retry", still_failing, retry_failed=True)
    assert points[0].key in still_failing.measured and points[1].key in still_failing.measured
    assert not {p.key for p in points[2:5]} & set(still_failing.measured)
    _run(space, db, "retry-again", RecordingRunner(space), retry_failed=True)
    with db.session() as s:
        row = s.scalar(select(TrialRow).where(TrialRow.candidate_key == points[0].key))
    assert row.status == "OK"
    assert [(e["status"], e["error"], e["campaign"]) for e in row.meta["earlier"]] == [
        ("TIMEOUT", "stored TIMEOUT", None), ("RUNTIME_ERROR", "planted failure", "retry")]


def test_retry_failed_must_be_a_bool(setting):
    space, _, db = setting
    with pytest.raises(UsageError, match="retry_failed"):
        Campaign("x", space, "random", FakeRunner(space), db, trials=4, retry_failed="yes")
