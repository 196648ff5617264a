"""`autotune trials` prints a page by default and streams everything on request."""

import json

from typer.testing import CliRunner

from autotune.cli.main import app

cli = CliRunner()


def run(*args):
    return cli.invoke(app, [str(a) for a in args])


def test_trials_default_page_limit_all_and_campaign(tmp_path):
    url = f"sqlite:///{tmp_path / 't.db'}"
    r = run("tune", "replay", "--cache", "example:pnpoly-rtx3090", "--trials", 70, "--cost-model", "none",
            "--campaign", "c70", "--db", url, "--no-progress")
    assert r.exit_code == 0, r.output
    assert run("import-kt", "example:pnpoly-rtx3090", "--db", url).exit_code == 0  # the rest of the 4,092
    r = run("trials", "--format", "json", "--db", url)
    assert len(json.loads(r.stdout)) == 50 and "showing the first 50 of 4092 trials" in r.stderr
    assert len(json.loads(run("trials", "--format", "json", "--limit", 7, "--db", url).stdout)) == 7
    every = json.loads(run("trials", "--format", "json", "--all", "--db", url).stdout)
    assert len(every) == 4092 and [t["id"] for t in every] == sorted(t["id"] for t in every)
    csv = run("trials", "--format", "csv", "--all", "--db", url).stdout.splitlines()
    assert len(csv) == 4093 and csv[0].startswith("id,") and sum(line.startswith("id,") for line in csv) == 1
    camp = json.loads(run("trials", "--campaign", "c70", "--format", "json", "--db", url).stdout)
    assert len(camp) == 70  # a named campaign lists all its trials
    assert run("trials", "--limit", 0, "--db", url).exit_code == 2
    assert json.loads(run("trials", "--status", "TIMEOUT", "--all", "--format", "json", "--db", url).stdout) == []
