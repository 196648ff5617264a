"""What the `autotune tune parallel` test files share: each test runs in its tmp_path (``in_tmp``, imported by
the test modules, where pytest finds it) and names its database there unless it checks the default."""

import json

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default --db is autotune.db in the working directory


def run(*args, command=("tune", "parallel")):
    """The command with a database under the test's tmp_path (the working directory) unless ``args`` name one."""
    db = [] if "--db" in args or "--list" in args or "--help" in args else ["--db", "sqlite:///parallel.db"]
    return runner.invoke(app, [*command, *map(str, args), *db])


def last_json(r) -> dict:
    assert r.exit_code == 0, r.output
    assert len(r.stdout.strip().splitlines()) == 1  # --json: standard output is the one JSON line
    return json.loads(r.stdout)
