"""`autotune rules list` with nothing to list answers as the other listings do: one line on standard error and
no table; --format json an empty array, --format csv the header alone."""

import json

from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import open_database
from autotune.search_spaces.graphs.builtin_rules import builtin_rules
from autotune.search_spaces.graphs.rule_files import rule_record

cli = CliRunner()


def test_an_empty_rule_listing_is_one_line_on_stderr_and_an_empty_array_or_header(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    open_database(url).close()
    r = cli.invoke(app, ["rules", "list", "--db", url])
    assert r.exit_code == 0 and r.stdout == "" and r.stderr == "no rules yet\n", r.output
    r = cli.invoke(app, ["rules", "list", "--format", "json", "--db", url])
    assert r.exit_code == 0 and json.loads(r.stdout) == []
    r = cli.invoke(app, ["rules", "list", "--format", "csv", "--db", url])
    assert r.exit_code == 0 and r.stdout == "key,name,provenance,status,rule,created\n"


def test_a_filter_nothing_matches_says_so(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    database = open_database(url)
    database.save_rules([rule_record(r) for r in builtin_rules()])
    database.close()
    r = cli.invoke(app, ["rules", "list", "--status", "proved", "--db", url])
    assert r.exit_code == 0 and r.stdout == "" and r.stderr == "no rules match\n", r.output
    r = cli.invoke(app, ["rules", "list", "--status", "tested", "--db", url])
    assert r.exit_code == 0 and "fuse_attention" in r.stdout and r.stderr == ""
