"""What the query commands print when the answer is empty, wide or partly failed, and what a script that asked
for JSON (--format json, --json) reads when the command fails or is interrupted: one JSON object, the last line
of standard output."""

from __future__ import annotations

import json
import shutil

import pytest
import typer
from typer.testing import CliRunner

import autotune
from autotune.cli.common import handle_errors, handle_interrupts
from autotune.cli.main import app
from autotune.db import open_database

cli = CliRunner()

#: configurations of about 440 characters as k=v text: over any cut a table makes
KNOBS = {f"knob_{i}_with_a_name_long_enough_to_fill_a_table_row": [1, 2] for i in range(8)}


def run(*args):
    # COLUMNS unset (pytest-xdist sets 80): a table goes to a pipe or a file at its own width
    return cli.invoke(app, [str(a) for a in args], env={"COLUMNS": ""})


def wide_objective(config: dict) -> float:
    """A cost over the knobs; a configuration whose knobs sum to a multiple of 5 fails."""
    total = sum(config.values())
    if total % 5 == 0:
        raise ValueError("a multiple of 5")
    return total * 1e-3


def failing_objective(config: dict) -> float:
    raise RuntimeError("never works")


@pytest.fixture(scope="module")
def logged(tmp_path_factory) -> dict:
    """A database with a campaign of long configurations (some of them failed), one whose every trial
    failed, and an empty database beside it."""
    folder = tmp_path_factory.mktemp("query")
    url, empty = f"sqlite:///{folder / 'q.db'}", f"sqlite:///{folder / 'empty.db'}"
    wide = autotune.minimize(wide_objective, KNOBS, trials=40, db=url, campaign="wide", cost_model=None,
                             algorithm="random", progress=False)
    failed = autotune.minimize(failing_objective, {"x": [1, 2, 3]}, trials=3, db=url, campaign="failed",
                               cost_model=None, algorithm="random", progress=False)
    open_database(empty).close()
    assert wide.errors > 0 and failed.errors == 3
    return {"url": url, "empty": empty, "wide_errors": wide.errors}


def test_wide_shows_a_long_configuration_in_full(logged):
    r = run("trials", "--campaign", "wide", "--limit", 1, "--wide", "--db", logged["url"])
    assert r.exit_code == 0, r.output
    row = next(line for line in r.stdout.splitlines() if "knob_0_" in line)
    assert all(f"{k}=" in row for k in KNOBS) and "…" not in row


def test_wide_keeps_a_row_whose_error_holds_a_traceback_on_one_line(logged):
    # the error column holds "RuntimeError: never works" and the traceback's lines: still one line per row
    r = run("trials", "--campaign", "failed", "--wide", "--db", logged["url"])
    assert r.exit_code == 0, r.output
    rows = [line for line in r.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 3, r.stdout
    assert all("RuntimeError: never works" in row and "Traceback" in row and "failing_objective" in row for row in rows)


def test_campaigns_count_the_failed_trials(logged):
    listed = {c["campaign"]: c for c in json.loads(run("campaigns", "-f", "json", "--db", logged["url"]).stdout)}
    assert listed["wide"]["errors"] == logged["wide_errors"] and listed["failed"]["errors"] == 3
    assert listed["failed"]["trials"] == 3 and listed["failed"]["best_cost"] is None
    csv = run("campaigns", "-f", "csv", "--db", logged["url"]).stdout.splitlines()
    assert "errors" in csv[0].split(",")
    table = run("campaigns", "--db", logged["url"]).stdout.splitlines()
    assert table[0].split()[6:8] == ["reused", "errors"]
    end = table[0].index("errors") + len("errors")  # a right-aligned column
    assert [line[end - 6:end].strip() for line in table[2:] if line.startswith("failed")] == ["3"]
    assert max(map(len, table)) <= 100


def test_a_campaign_without_failures_leaves_the_errors_column_out(tmp_path):
    url = f"sqlite:///{tmp_path / 'ok.db'}"
    autotune.minimize(lambda c: c["x"] * 1.0, {"x": [1, 2, 3]}, trials=3, db=url, campaign="fine", cost_model=None,
                      algorithm="random", progress=False)
    assert "errors" not in run("campaigns", "--db", url).stdout.splitlines()[0]
    assert json.loads(run("campaigns", "-f", "json", "--db", url).stdout)[0]["errors"] == 0


@pytest.mark.parametrize("command", [["campaigns"], ["trials"], ["best"]])
def test_an_empty_answer_is_one_line_in_a_table_an_empty_array_in_json_and_a_header_in_csv(logged, command):
    table = run(*command, "--db", logged["empty"])
    assert table.exit_code == 0 and table.stdout == "", table.output
    assert len(table.stderr.splitlines()) == 1 and "yet" in table.stderr
    as_json = run(*command, "-f", "json", "--db", logged["empty"])
    assert as_json.exit_code == 0 and json.loads(as_json.stdout) == []
    csv = run(*command, "-f", "csv", "--db", logged["empty"])
    assert csv.exit_code == 0 and len(csv.stdout.splitlines()) == 1 and "task" in csv.stdout


def test_a_task_without_a_success_has_no_best_and_that_is_no_error(logged):
    listed = json.loads(run("campaigns", "-f", "json", "--db", logged["url"]).stdout)
    task = next(c["task_key"] for c in listed if c["campaign"] == "failed")
    r = run("best", "--task", task, "--db", logged["url"])
    assert r.exit_code == 0 and r.stdout == "" and "no successful trial matches task" in r.stderr, r.output
    r = run("best", "--task", task, "-f", "json", "--db", logged["url"])
    assert r.exit_code == 0 and json.loads(r.stdout) == []
    r = run("trials", "--status", "timeout", "--db", logged["url"])
    assert r.exit_code == 0 and r.stdout == "" and r.stderr == "no trials match\n"


@pytest.mark.parametrize("args", [["trials", "--campaign", "nope"], ["campaigns", "--device", "nope"],
                                  ["best", "--task", "nope"], ["campaigns", "list", "--task", "nope"]])
def test_an_error_asked_for_json_ends_standard_output_with_a_json_object(logged, args):
    r = run(*args, "--format", "json", "--db", logged["url"])
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1
    doc = json.loads(r.stdout.splitlines()[-1])
    assert doc["exit_code"] == 2 and doc["kind"] == "UnknownName" and "unknown" in doc["error"]
    assert run(*args, "--db", logged["url"]).stdout == ""  # a table asked for: nothing on standard output


def test_a_missing_database_asked_for_json_is_a_json_object_too(tmp_path):
    r = run("trials", "-f", "JSON", "--db", f"sqlite:///{tmp_path / 'typo.db'}")
    assert r.exit_code == 2 and json.loads(r.stdout)["error"].startswith("no database file")
    assert not (tmp_path / "typo.db").exists()


def test_ctrl_c_in_a_json_listing_ends_standard_output_with_a_json_object(logged, monkeypatch):
    from autotune.db import queries

    def interrupted_pages(db, **filters):
        yield queries.trials(db, **filters, limit=2)
        raise KeyboardInterrupt

    monkeypatch.setattr(queries, "trial_pages", interrupted_pages)
    r = run("trials", "--all", "-f", "json", "--db", logged["url"])
    assert r.exit_code == 130
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("[{")  # the part written, on a line of its own
    doc = json.loads(lines[-1])
    assert doc == {"error": "interrupted; what was stored before stays in the database", "kind": "Interrupted",
                   "exit_code": 130}
    assert r.stderr == "interrupted; what was stored before stays in the database\n"
    table = run("trials", "--all", "--db", logged["url"])
    assert table.exit_code == 130 and table.stdout == ""  # no JSON asked for, none printed


def test_ctrl_c_in_a_command_asked_for_json_prints_the_interruption_as_json():
    demo = typer.Typer()

    @demo.command("report")
    @handle_errors
    def report(json: bool = False) -> None:  # a command with --json, interrupted
        raise KeyboardInterrupt

    @demo.command("export")
    @handle_errors
    def export(format: str = "json") -> None:  # a --format whose default is not a table: not a listing
        raise KeyboardInterrupt

    handle_interrupts(demo)
    r = cli.invoke(demo, ["report", "--json"])
    assert r.exit_code == 130 and json.loads(r.stdout.splitlines()[-1])["kind"] == "Interrupted"
    assert json.loads(r.stdout)["error"] == "interrupted; nothing was stored"
    assert cli.invoke(demo, ["report"]).stdout == ""
    assert cli.invoke(demo, ["export"]).stdout == ""


@pytest.mark.parametrize("args", [["import", "missing.jsonl"], ["import-kt", "missing.json.gz"],
                                  ["import-kt", "example:pnpoly-rtx3090", "missing.json.gz"], ["import-kt", "BAD"]])
def test_an_import_of_a_missing_or_bad_file_creates_no_database(args, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    db = tmp_path / "new.db"
    r = run(*[str(bad) if a == "BAD" else a for a in args], "--db", f"sqlite:///{db}")
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1, r.output
    assert not db.exists()


def test_an_export_over_its_own_database_is_refused(logged, tmp_path):
    db = tmp_path / "copy.db"
    shutil.copy(logged["url"].removeprefix("sqlite:///"), db)
    r = run("export", "-o", db, "--db", f"sqlite:///{db}")
    assert r.exit_code == 2 and "is the database itself" in r.stderr, r.output
    assert len(json.loads(run("campaigns", "-f", "json", "--db", f"sqlite:///{db}").stdout)) == 2  # still a database
