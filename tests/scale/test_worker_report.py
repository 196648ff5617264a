"""`autotune worker` and `tune many` say a campaign's best cost as `tune` does (a time with its unit), and the
worker says how many of the campaign's trials it measured itself."""

from __future__ import annotations

from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import open_database

EXAMPLE = "example:pnpoly-rtx3090"


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_a_worker_reports_its_own_measurements_and_the_best_with_a_unit(tmp_path):
    url = f"sqlite:///{tmp_path / 'w.db'}"
    r = run("tune", "replay", "--cache", EXAMPLE, "--trials", 4, "--algorithm", "random", "--cost-model", "none",
            "--campaign", "shared", "--no-progress", "--db", url)
    assert r.exit_code == 0, r.output
    tune_best = next(line for line in r.stdout.splitlines() if line.startswith("best ")).split("  ")[0]
    db = open_database(url)  # the campaign now runs to 7 trials: the worker measures the 3 left
    row = db.campaign("shared")
    recipe = row.options["recipe"]
    recipe["args"]["trials"] = 7
    db.set_campaign_run(row.id, {"trials": 7, "time_s": None, "simulated_s": None}, recipe)
    db.close()
    w = run("worker", "--campaign", "shared", "--no-progress", "--db", url)
    assert w.exit_code == 0, w.output
    line = w.stdout.strip()
    assert line.startswith("campaign shared (finished): 7 trials (3 measured by this worker), best "), line
    assert line.endswith(" ms") and " s" not in line.split("best ")[1], line
    assert float(line.split("best ")[1].split()[0]) <= float(tune_best.split()[1])  # in ms, as tune says it


def test_tune_many_says_each_best_with_a_unit(tmp_path):
    spec = tmp_path / "many.yaml"
    spec.write_text(f"- {{kind: replay, cache: '{EXAMPLE}', campaign: one, trials: 3, algorithm: random,"
                    " cost_model: null}\n")
    r = run("tune", "many", str(spec), "--db", f"sqlite:///{tmp_path / 'm.db'}")
    assert r.exit_code == 0, r.output
    done = next(line for line in r.stderr.splitlines() if line.startswith("[1/1] one: finished, best "))
    assert done.endswith(" ms"), done
