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


def test_a_failure_measured_again_since_the_run_started_is_not_retried_again(setting):
    """Workers and campaigns retrying side by side: a failure another writer stored after this run started (its
    own retry) is neither among the run's failures to retry nor reservable as one; one stored before is both."""
    from autotune.db.models import utcnow
    from autotune.db.workers import worker_id

    space, points, db = setting
    device = FakeRunner(space).device
    tid, did = db.task_id(space.task), db.device_id(device)
    key = points[0].key
    db.add_trials(space.task, device, [Measurement(points[0], Status.TIMEOUT, error="hung")])
    run_started = utcnow()
    assert db.failed_before(tid, did, [key], [Status.TIMEOUT, Status.RUNTIME_ERROR], run_started) == {key}
    row, _ = db.open_campaign("other", space.task, device, "random", {})
    # another campaign's retry, stored after this run started, fails again
    db.record_batch(tid, did, row.id, [Measurement(points[0], Status.TIMEOUT, error="hung again")],
                    replace_failed=True)
    assert db.failed_before(tid, did, [key], [Status.TIMEOUT, Status.RUNTIME_ERROR], run_started) == set()
    mine, _ = db.open_campaign("mine", space.task, device, "random", {})
    assert db.reserve(mine.id, worker_id(), [points[0]], again=[key], again_before=run_started) == []
    assert db.reserve(mine.id, worker_id(), [points[0]], again=[key], again_before=utcnow()) == [points[0]]


def test_a_measurement_whose_trial_is_stored_as_ok_is_linked_as_a_look_up_and_changes_nothing(setting):
    space, points, db = setting
    device = FakeRunner(space).device
    tid, did = db.task_id(space.task), db.device_id(device)
    first, _ = db.open_campaign("first", space.task, device, "random", {})
    second, _ = db.open_campaign("second", space.task, device, "random", {})
    ok = Measurement(points[0], Status.OK, times=[1e-3])
    db.record_batch(tid, did, first.id, [ok])
    got = db.record_batch(tid, did, second.id, [Measurement(points[0], Status.TIMEOUT, error="late")],
                          replace_failed=True)
    assert got.total == 0  # the second campaign owns no trial: its budget is not spent on it
    with db.session() as s:
        row = s.scalar(select(TrialRow).where(TrialRow.candidate_key == points[0].key))
        links = {t.campaign_id: t.reused for t in s.scalars(select(CampaignTrialRow))}
    assert row.status == "OK" and row.campaign_id == first.id and "earlier" not in row.meta
    assert links == {first.id: False, second.id: True}


def test_an_imported_retry_replaces_the_stored_failure_it_retried(setting, tmp_path):
    """Logs merged across machines: a database that holds a failure takes the retry of it from another one's
    export (the retry's earlier attempts come with it); a plain trial of the file keeps the stored one."""
    from autotune.db.logs import export_file, import_file

    space, points, db = setting
    other = open_database(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        flaky = {points[0].key, points[1].key}
        for target in (db, other):  # both measured the two points as failures (a copy of one log, say)
            _run(space, target, "first", RecordingRunner(space, fail=flaky))
        _run(space, other, "again", RecordingRunner(space), retry_failed=True)  # the other retried them
        export_file(other, tmp_path / "other.jsonl")
    finally:
        other.close()
    import_file(db, tmp_path / "other.jsonl")
    with db.session() as s:
        rows = list(s.scalars(select(TrialRow).where(TrialRow.candidate_key.in_(flaky))))
    assert {r.status for r in rows} == {"OK"}
    # every attempt is kept: the other machine's failure that it retried, then this one's own
    for r in rows:
        assert [e["status"] for e in r.meta["earlier"]] == ["RUNTIME_ERROR", "RUNTIME_ERROR"]
        assert len({e["created"] for e in r.meta["earlier"]}) == 2
    # importing the file again changes nothing: the trial it holds is the one stored
    import_file(db, tmp_path / "other.jsonl")
    with db.session() as s:
        again = {r.candidate_key: r.meta for r in s.scalars(select(TrialRow).where(TrialRow.candidate_key.in_(flaky)))}
    assert again == {r.candidate_key: r.meta for r in rows}
