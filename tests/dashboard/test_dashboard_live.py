"""A database that changes under the dashboard: a campaign running (or resumed) while the page reads it,
figures another thread is still reading, and a database that fails."""

from __future__ import annotations

import time

from dashboard_helpers import get, history
from sqlalchemy import create_engine, text
from starlette.testclient import TestClient

from autotune.dashboard.app import create_app


def test_a_running_campaign_is_followed_live(tmp_path):
    from autotune.drivers.replay import tune_replay
    from autotune.testing.caches import turing_time, write_cache

    cache = write_cache(tmp_path / "t.json.gz", "NVIDIA TITAN RTX", turing_time)
    url = f"sqlite:///{tmp_path / 'live.db'}"
    tune_replay(cache, algorithm="random", cost_model=None, trials=8, db=url, campaign="live")
    with TestClient(create_app(url, warm=False)) as c:
        assert get(c, "convergence", campaign="live")["own"]["n"] == 8
        assert get(c, "trials", campaign="live", limit=50)["count"] == 8
        tune_replay(cache, algorithm="random", cost_model=None, trials=20, db=url, campaign="live")  # resumed
        conv = get(c, "convergence", campaign="live")
        assert conv["own"]["n"] == 20 and conv["own"]["best"] == min(r[1] for r in history(url, "live"))
        assert get(c, "campaign", campaign="live")["measured"] == 20
        assert len(get(c, "sample", campaign="live")["trials"]) == 20


def test_figures_being_read_by_another_thread_answer_at_once_marked_incomplete(demo_db):
    from autotune.dashboard.data import DashboardData, open_dashboard_db
    from autotune.dashboard.summary import Summary

    data = DashboardData(open_dashboard_db(demo_db["url"]))
    try:
        row = data._campaign_row("bulk-small")[0]
        summ = data._summaries[row.id] = Summary(row.id)  # never read yet, as at start-up
        with summ.lock:  # as while the warm-up reads its history for the first time
            t0 = time.perf_counter()
            listed = {c["name"]: c for c in data.campaigns()["campaigns"]}
            page = data.trials("bulk-small", limit=5)
            assert time.perf_counter() - t0 < 5
        assert listed["bulk-small"]["complete"] is False and listed["toy-turing"]["complete"] is True
        assert data.campaign("bulk-small")["complete"] and not page["count_exact"]
    finally:
        data.db.close()


def test_figures_read_to_the_end_stay_complete_while_another_request_checks_them(demo_db):
    """The page's requests run at once: one holds a summary while it only checks for new links, and the
    others must not then call a finished campaign's figures incomplete ("3,000+ trials", "3,000…")."""
    from autotune.dashboard.data import DashboardData, open_dashboard_db

    data = DashboardData(open_dashboard_db(demo_db["url"]))
    try:
        row = data._campaign_row("bulk-small")[0]
        summ, complete = data.summary_of(row.id)
        assert complete and summ.all.n == 3000
        with summ.lock:  # as while the sample's request brings the summary up to date
            listed = {c["name"]: c for c in data.campaigns(q="bulk-small")["campaigns"]}
            page = data.trials("bulk-small", limit=5)
            head = data.campaign("bulk-small")
        assert listed["bulk-small"]["complete"] is True and head["complete"] is True
        assert (page["count"], page["count_exact"]) == (3000, True)
    finally:
        data.db.close()


def test_a_database_failing_under_the_dashboard_answers_503_in_one_line(tmp_path):
    from autotune.drivers.replay import tune_replay
    from autotune.testing.caches import turing_time, write_cache

    url = f"sqlite:///{tmp_path / 'gone.db'}"
    tune_replay(write_cache(tmp_path / "t.json.gz", "NVIDIA TITAN RTX", turing_time), algorithm="random",
                cost_model=None, trials=4, db=url, campaign="c")
    with TestClient(create_app(url, warm=False)) as c:
        assert get(c, "trials", campaign="c")["count"] == 4
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE campaign_trials"))
        engine.dispose()
        body = get(c, "trials", expect=503, campaign="c")
        assert body["error"].startswith("database error on sqlite:///") and "\n" not in body["error"]


def test_a_campaign_made_again_under_its_name_is_read_afresh(tmp_path):
    """--fresh deletes the campaign and makes a new one of the same name; SQLite gives it the deleted
    campaign's id (and link ids), so the dashboard must not take it for the one it read before."""
    from autotune.drivers.replay import tune_replay
    from autotune.testing.caches import turing_time, write_cache

    cache = write_cache(tmp_path / "t.json.gz", "NVIDIA TITAN RTX", turing_time)
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    tune_replay(cache, algorithm="random", cost_model=None, trials=10, db=url, campaign="c")
    with TestClient(create_app(url, warm=False)) as c:
        before = get(c, "campaign", campaign="c")
        assert before["measured"] == 10 and len(get(c, "sample", campaign="c")["trials"]) == 10
        tune_replay(cache, algorithm="random", cost_model=None, trials=20, db=url, campaign="c", fresh=True, seed=5)
        after = get(c, "campaign", campaign="c")
        assert after["id"] == before["id"]  # the premise: the id is the deleted campaign's
        rows = history(url, "c")
        own = [r for r in rows if r[2]]
        assert (after["measured"], after["reused"], after["evaluations"]) == (20, len(rows) - 20, len(rows))
        assert after["best_cost"] == min(r[1] for r in own if r[1] is not None)
        conv = get(c, "convergence", campaign="c")
        assert (conv["own"]["n"], conv["all"]["n"]) == (20, len(rows))
        assert sorted(t["id"] for t in get(c, "sample", campaign="c")["trials"]) == sorted(r[0] for r in rows)


def test_the_task_page_shows_each_campaigns_status_as_it_is_now(tmp_path):
    """A campaign's status changes without a new trial (it finishes, or its workers die): the task page says
    it as the campaign list does, "stopped" for one stored as running whose workers are gone."""
    from autotune.db import open_database
    from autotune.drivers.replay import tune_replay
    from autotune.testing.caches import turing_time, write_cache

    url = f"sqlite:///{tmp_path / 'status.db'}"
    tune_replay(write_cache(tmp_path / "t.json.gz", "NVIDIA TITAN RTX", turing_time), algorithm="random",
                cost_model=None, trials=4, db=url, campaign="c")
    with TestClient(create_app(url, warm=False)) as c:
        camp = get(c, "campaign", campaign="c")
        assert [x["status"] for x in get(c, "task", task=camp["task_key"])["campaigns"]] == ["finished"]
        db = open_database(url)
        try:
            for stored, shown in (("running", "stopped"), ("interrupted", "interrupted")):
                db.set_campaign_status(camp["id"], stored)
                assert [x["status"] for x in get(c, "task", task=camp["task_key"])["campaigns"]] == [shown]
                assert get(c, "campaign", campaign="c")["status"] == shown
        finally:
            db.close()


def test_figures_catching_up_on_a_backlog_are_incomplete_until_read_to_the_end(demo_db, monkeypatch):
    from autotune.dashboard import summary
    from autotune.dashboard.data import DashboardData, open_dashboard_db

    monkeypatch.setattr(summary, "SCAN_CHUNK", 1000)
    seen = []
    add = summary.Summary._add
    monkeypatch.setattr(summary.Summary, "_add", lambda self, rows: (seen.append(self.ready), add(self, rows)))
    data = DashboardData(open_dashboard_db(demo_db["url"]))
    try:
        row = data._campaign_row("bulk-small")[0]
        summ, complete = data.summary_of(row.id)
        assert complete and summ.ready and summ.all.n == 3000
        assert seen == [False] * 3  # 3,000 links in chunks of 1,000: a reader meanwhile sees them incomplete
    finally:
        data.db.close()
