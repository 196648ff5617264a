"""`autotune worker` joining a campaign: the budget it runs to, and a database that is not there."""

import threading
import time

import pytest
from sqlalchemy import select

from autotune.campaign import Campaign
from autotune.db import open_database
from autotune.db.models import TrialRow
from autotune.drivers.replay import tune_replay
from autotune.drivers.scale import join_campaign
from autotune.errors import UsageError
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import ReplaySpace

EXAMPLE = "example:pnpoly-rtx3090"


def _workers(db, name):
    with db.session() as s:
        rows = s.execute(select(TrialRow.candidate_key, TrialRow.worker)
                         .where(TrialRow.campaign_id == db.campaign(name).id)).all()
    return rows


def test_a_worker_joins_with_the_trial_budget_the_campaign_runs_to_not_its_first_runs(sqlite_url, capsys):
    """The campaign ran to 10 trials (its recipe says 10) and is resumed to 30: a worker joining the resumed run
    measures its share of the 30, not stopping at once as the 10 of its recipe, stored already, would have it."""
    tune_replay(EXAMPLE, algorithm="random", cost_model=None, trials=10, campaign="b", db=sqlite_url, progress=False)
    space, db = ReplaySpace(EXAMPLE), open_database(sqlite_url)
    first = {w for _, w in _workers(db, "b")}
    joined = {}

    def join():
        try:
            joined["out"] = join_campaign("b", sqlite_url)
        finally:
            joined["done"] = True

    class WaitsForTheWorker(ReplayRunner):
        """The resumed run: it lets the worker join, and measures on once the worker has stored a trial (or ended)."""

        def measure(self, task, cands):
            if "thread" not in joined:
                joined["thread"] = threading.Thread(target=join)
                joined["thread"].start()
                deadline = time.time() + 120
                while not joined.get("done") and len({w for _, w in _workers(db, "b")} - first) < 1:
                    assert time.time() < deadline, "the worker never stored a trial"
                    time.sleep(0.05)
            return super().measure(task, cands)

    Campaign("b", space, "random", WaitsForTheWorker(space.cache), db, trials=30, batch=2, seed=0).run()
    joined["thread"].join(120)
    rows = _workers(db, "b")
    keys = [k for k, _ in rows]
    assert len(keys) == len(set(keys)) == 30  # exactly the budget of the running campaign, nothing twice
    assert joined["out"]["measured_here"] > 0 and joined["out"]["trials"] == 30
    assert len({w for _, w in rows} - first) == 2  # the resumed run and the worker both measured
    assert "joining its running workers with their trial budget of 30, not 10" in capsys.readouterr().err


def test_a_worker_pointed_at_a_missing_database_file_creates_nothing(tmp_path):
    with pytest.raises(UsageError, match="no database file"):
        join_campaign("c", f"sqlite:///{tmp_path / 'typo.db'}")
    assert list(tmp_path.iterdir()) == []


def test_ray_options_a_campaign_kind_cannot_use_are_refused_not_ignored(sqlite_url):
    """A parallel campaign runs whole as one Ray task: --ray-actors would be dropped, and running here after
    all is not what the worker was asked."""
    from autotune.drivers.parallel import parallelize

    parallelize("mlp-unity", "dgx-a100-x1", trials=3, campaign="p", db=sqlite_url)
    with pytest.raises(UsageError, match="does not apply to parallel campaigns"):
        join_campaign("p", sqlite_url, ray="local", ray_actors=2)
    with pytest.raises(UsageError, match="does not apply to parallel campaigns"):
        join_campaign("p", sqlite_url, ray_actors=2)


def test_a_worker_started_in_another_folder_reads_the_files_a_relative_path_named(tmp_path, monkeypatch):
    """`tune replay --cache x.json.gz` in one folder, a worker started in another: the recipe keeps the file's
    absolute path, so the worker reads the same recording, and the resume command names it from anywhere."""
    import shutil

    from autotune.campaign import resume_command
    from autotune.search_spaces.replay import resolve_cache_path

    first, other = tmp_path / "first", tmp_path / "other"
    first.mkdir(), other.mkdir()
    shutil.copy(resolve_cache_path(EXAMPLE), first / "rec.json.gz")
    url = f"sqlite:///{tmp_path / 'w.db'}"
    monkeypatch.chdir(first)
    tune_replay("rec.json.gz", algorithm="random", cost_model=None, trials=10, campaign="rel", db=url, progress=False)
    db = open_database(url)
    recipe = db.campaign("rel").options["recipe"]
    assert recipe["args"]["cache"] == str(first / "rec.json.gz")
    assert str(first / "rec.json.gz") in resume_command("rel", recipe)
    monkeypatch.chdir(other)
    db.close()
    out = join_campaign("rel", url)  # the campaign is done: the worker opens the recording and finds no work
    assert out["campaign"] == "rel"


def test_a_worker_started_alone_runs_the_recipe_and_budget_of_the_last_run_not_the_first(sqlite_url, monkeypatch):
    """The campaign ran to 10 trials, then was resumed to 30 and stopped by Ctrl-C: a worker started later, alone,
    goes on to the 30, where it ran the first run's recipe to 10 and stored that back."""
    from autotune.testing.fakes import interrupting

    run = dict(algorithm="random", cost_model=None, campaign="b", db=sqlite_url, progress=False)
    tune_replay(EXAMPLE, trials=10, **run)
    with monkeypatch.context() as m, pytest.raises(KeyboardInterrupt):
        m.setattr("autotune.drivers.replay.ReplayRunner", interrupting(ReplayRunner, 1))  # a fake: this test only
        tune_replay(EXAMPLE, trials=30, **run)
    db = open_database(sqlite_url)
    assert 10 < len(_workers(db, "b")) < 30
    db.close()
    out = join_campaign("b", sqlite_url)
    assert out["trials"] == 30
    db = open_database(sqlite_url)
    options = db.campaign("b").options
    assert options["budget"]["trials"] == 30 and options["recipe"]["args"]["trials"] == 30
    db.close()
