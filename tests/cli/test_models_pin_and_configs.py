"""`autotune models --pin/--unpin` as a script meets it (an id given twice, --format json), and `autotune
predict --configs` naming the line of a file that is not a configuration."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import autotune
from autotune.cli.main import app

cli = CliRunner()


def run(*args, input=None):
    return cli.invoke(app, [str(a) for a in args], input=input)


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> str:
    """A campaign guided by the default cost model, which stores its models as it retrains."""
    url = f"sqlite:///{tmp_path_factory.mktemp('models') / 'm.db'}"
    autotune.minimize(lambda c: (c["x"] - 3) ** 2 + c["y"] + 1.0, {"x": list(range(8)), "y": [0, 1, 2]}, trials=20,
                      db=url, campaign="fn", seed=0, progress=False)
    return url


def latest_id(url) -> int:
    return json.loads(run("models", "--campaign", "fn", "--latest", "--format", "json", "--db", url).stdout)[0]["id"]


def test_an_id_given_twice_is_pinned_once(url):
    model = latest_id(url)
    r = run("models", "--pin", model, "--pin", model, "--db", url)
    assert r.exit_code == 0 and r.stdout == f"pinned model {model}\n", r.output
    r = run("models", "--unpin", model, "--unpin", model, "--db", url)
    assert r.exit_code == 0 and r.stdout == f"unpinned model {model}\n", r.output


def test_pinning_with_format_json_prints_json(url):
    model = latest_id(url)
    r = run("models", "--pin", model, "--format", "json", "--db", url)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == [{"id": model, "pinned": True, "has_weights": True}]
    r = run("models", "--unpin", model, "--format", "csv", "--db", url)
    assert r.exit_code == 0 and r.stdout.splitlines() == ["id,pinned,has_weights", f"{model},False,True"], r.output


def test_a_configs_line_that_is_no_object_is_named(url, tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"x": 1, "y": 0}\n\n[1, 2]\n')
    r = run("predict", "--campaign", "fn", "--configs", path, "--db", url)
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert r.stderr.startswith(f"error: line 3 of --configs {str(path)!r} '[1, 2]' must be a JSON object")
    assert r.stderr.count("\n") == 1
    r = run("predict", "--campaign", "fn", "--configs", "-", "--db", url, input='{"x": 1, "y": 0}\n{bad\n')
    assert r.exit_code == 2 and r.stderr.startswith("error: line 2 of --configs '-' '{bad' is not valid JSON"), r.output
    r = run("predict", "--campaign", "fn", "--config", "null", "--db", url)
    assert r.exit_code == 2 and r.stderr.startswith("error: --config 'null' must be a JSON object"), r.output
