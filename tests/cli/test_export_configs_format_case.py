"""`export-configs --format` takes any case, as the listings' --format does."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from autotune.cli.main import app


def test_export_configs_takes_its_format_in_any_case(recorded):
    _, url, task, _ = recorded
    run = CliRunner().invoke
    header = run(app, ["export-configs", "--task", task.name, "--format", "C-HEADER", "--db", url])
    assert header.exit_code == 0, header.output
    assert header.stdout.startswith("/* Tuned configurations of toy_kernel")
    doc = run(app, ["export-configs", "--task", task.name, "-f", "Json", "--db", url])
    assert doc.exit_code == 0 and json.loads(doc.stdout)["task"] == task.name, doc.output
    bad = run(app, ["export-configs", "--task", task.name, "--format", "XML", "--db", url])
    assert bad.exit_code == 2 and "valid: json, c-header" in bad.stderr
