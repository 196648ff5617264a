"""A script calling the library, ended by SIGTERM (a batch scheduler's time limit, ``timeout``, ``docker stop``),
stops as Ctrl-C would stop it: the measurements completed are stored, the campaign is marked interrupted and
says how a script resumes it; a program with its own SIGTERM handler keeps it."""

import signal
import subprocess
import sys
import textwrap

from autotune.db import open_database
from autotune.errors import UsageError
from autotune.testing.cli_process import wait_until

SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    import autotune

    if sys.argv[2] == "own":
        signal.signal(signal.SIGTERM, lambda *a: (print("own handler", flush=True), os._exit(7)))

    def slow(config):
        time.sleep(0.05)
        return config["x"] + 1

    autotune.minimize(slow, {"x": list(range(2000))}, trials=2000, algorithm="random", cost_model=None,
                      db=sys.argv[1], campaign="t", batch=4, progress=False)
""")


def _run_until_measuring(tmp_path, handler, sig=signal.SIGTERM):
    url = f"sqlite:///{tmp_path / 't.db'}"
    db = open_database(url)  # the schema made before the script starts: the two processes never both create it
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    run = subprocess.Popen([sys.executable, str(script), url, handler], cwd=tmp_path, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)

    def measuring():
        try:
            db.campaign("t")
        except UsageError:
            return False
        return db.count_trials() >= 4

    try:
        wait_until("the script to store trials", measuring)
        run.send_signal(sig)
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    return db, run.returncode, out, err


def test_sigterm_stops_a_scripts_campaign_as_ctrl_c_does(tmp_path):
    db, code, _, err = _run_until_measuring(tmp_path, "default")
    stored = db.count_trials()
    assert code != -signal.SIGTERM, err  # not killed on the spot
    assert f"interrupted: {stored} trials stored; resume with: rerun the script, or call it again with the campaign " \
           "name 't'" in err, err
    assert db.campaign("t").status == "interrupted"
    row = db.campaign("t")
    assert db.campaign_workers(row.id) == [] and db.pending_keys(row.id) == {}
    db.close()


def test_a_programs_own_sigterm_handler_is_kept(tmp_path):
    db, code, out, err = _run_until_measuring(tmp_path, "own")
    assert code == 7 and "own handler" in out, err
    assert "interrupted:" not in err
    db.close()


def test_ctrl_c_ends_a_script_as_ctrl_c_ends_any_python_script(tmp_path):
    """Killed by SIGINT (status 130 in a shell, which stops a loop of scripts), after the campaign has said how
    to resume: Python ends a script so only for a KeyboardInterrupt itself, not a subclass of it."""
    db, code, _, err = _run_until_measuring(tmp_path, "default", signal.SIGINT)
    assert code == -signal.SIGINT, err
    assert "interrupted: " in err and "resume with: rerun the script" in err
    assert db.campaign("t").status == "interrupted"
    db.close()
