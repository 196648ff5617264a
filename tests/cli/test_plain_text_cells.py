"""Values printed in tables and progress lines are plain text: brackets in them are never rich markup."""

import io

import pandas as pd
from rich.console import Console
from typer.testing import CliRunner

from autotune.cli.listings import print_table
from autotune.cli.main import app


def test_table_cells_keep_their_brackets():
    out = io.StringIO()
    print_table(pd.DataFrame([{"error": "pip install 'autotune[cuda]' [bold]x[/bold]"}]),
                console=Console(file=out, width=200))
    assert "pip install 'autotune[cuda]' [bold]x[/bold]" in out.getvalue()


def test_tune_many_reports_an_error_with_brackets_as_written(tmp_path):
    spec = tmp_path / "many.yaml"
    spec.write_text('campaigns:\n  - {kind: replay, cache: "no[red].json", trials: 2}\n')
    r = CliRunner().invoke(app, ["tune", "many", str(spec), "--db", f"sqlite:///{tmp_path / 'm.db'}"],
                           env={"COLUMNS": "300"})
    assert r.exit_code == 1, r.output
    line = next(x for x in r.output.splitlines() if x.startswith("[1/1]"))
    assert "'no[red].json' does not exist" in line
