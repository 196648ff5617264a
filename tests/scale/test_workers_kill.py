"""Three `autotune` processes share one campaign through the database; one is killed mid-campaign."""

import os
import signal
import subprocess

import pytest
from sqlalchemy import select

from autotune.db import open_database
from autotune.db.models import TrialRow
from autotune.errors import UsageError
from autotune.testing.cli_process import CLI, wait_until

EXAMPLE = "example:pnpoly-rtx3090"


def _campaign_id(db):
    try:
        return db.campaign("shared").id
    except UsageError:
        return None


# on PostgreSQL with -m slow: its claims race by default in tests/campaign/test_campaign.py, and a dead worker's
# reservations are taken over on both databases in tests/campaign/test_workers.py
@pytest.mark.parametrize("db_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.slow)], indirect=True)
def test_killing_one_of_three_workers_the_others_finish_the_budget_and_its_candidates(db_url, tmp_path):
    trials = 150
    first = subprocess.Popen([*CLI, "tune", "replay", "--cache", EXAMPLE, "-a", "random", "-n", str(trials),
                              "--batch", "4", "--measure-delay", "0.1", "--campaign", "shared", "--db", db_url,
                              "--no-progress"], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    db = open_database(db_url)
    cid = wait_until("the campaign", lambda: _campaign_id(db))
    workers = [subprocess.Popen([*CLI, "worker", "--campaign", "shared", "--db", db_url, "--no-progress"],
                                cwd=tmp_path, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    victim = workers[1]

    def victim_name():
        return next((w for w in db.pending_keys(cid).values() if w.split(":")[1] == str(victim.pid)), None)

    def victim_busy():  # it has stored trials and holds reserved candidates
        name = victim_name()
        if name is None:
            return None
        with db.session() as s:
            stored = s.scalars(select(TrialRow.id).where(TrialRow.worker == name)).all()
        return name if len(stored) >= 4 else None

    def frozen_holding():  # stopped while it holds reserved candidates (between two batches it holds none)
        name = victim_busy()
        if name is None:
            return None
        os.kill(victim.pid, signal.SIGSTOP)
        held = {k for k, w in db.pending_keys(cid).items() if w == name}
        if held:
            return name, held
        os.kill(victim.pid, signal.SIGCONT)
        return None

    name, held = wait_until("the third worker to be measuring", frozen_holding)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    # what it still holds is what it held when stopped, or less: once its process is gone the others
    # may reclaim its reservations at any moment, so an equality here would race with them
    assert {k for k, w in db.pending_keys(cid).items() if w == name} <= held
    for p in (first, workers[0]):
        assert p.wait(timeout=180) == 0, p.stderr.read()[-2000:]
    with db.session() as s:
        rows = s.execute(select(TrialRow.candidate_key, TrialRow.worker).where(TrialRow.campaign_id == cid)).all()
    keys = [k for k, _ in rows]
    assert len(keys) == len(set(keys)) == trials  # exactly the budget, nothing measured twice
    by = dict(rows)
    assert held <= set(by) and all(by[k] != name for k in held)  # its candidates were measured by the others
    assert db.pending_keys(cid) == {}
    assert len({w for _, w in rows}) == 3
