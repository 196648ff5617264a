"""SIGTERM (kill PID, timeout, docker stop, a batch scheduler or Kubernetes ending the job) stops an `autotune`
run as Ctrl-C does: what it measured is stored, its claim and reservations are given back at once (the other
workers need not wait for its heartbeat to age), the campaign is marked interrupted, and one line says how to
resume it."""

import signal
import subprocess

from autotune.db import open_database
from autotune.errors import UsageError
from autotune.testing.cli_process import CLI, wait_until

EXAMPLE = "example:pnpoly-rtx3090"


def test_sigterm_stores_what_was_measured_gives_back_the_claim_and_says_how_to_resume(tmp_path):
    url = f"sqlite:///{tmp_path / 't.db'}"
    db = open_database(url)  # the schema made before the run starts: the two processes never both create it
    run = subprocess.Popen([*CLI, "tune", "replay", "--cache", EXAMPLE, "-a", "random", "--cost-model", "none",
                            "-n", "2000", "--batch", "4", "--measure-delay", "0.05", "--campaign", "t", "--db", url,
                            "--no-progress"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def measuring():  # it has stored trials and holds its claim
            try:
                row = db.campaign("t")
            except UsageError:
                return None
            return row.id if db.count_trials() >= 4 and db.campaign_workers(row.id) else None

        cid = wait_until("the run to store trials", measuring)
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    stored = db.count_trials()
    assert run.returncode == 130, err
    assert err.splitlines()[-1] == (  # the last line (a library's warning may come before it)
        f"interrupted: {stored} trials stored; resume with: autotune tune replay --cache {EXAMPLE} "
        f"--algorithm random --cost-model none --trials 2000 --batch 4 --measure-delay 0.05 --campaign t --db {url}"), err
    assert db.campaign("t").status == "interrupted"
    assert db.campaign_workers(cid) == [] and db.pending_keys(cid) == {}
    db.close()
