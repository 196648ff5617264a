"""A campaign name is one line of text: one with a line break, a tab or another control character is refused with
one line wherever a campaign is named into being (a tuning command's --campaign, `campaigns rename`, `tune many`,
the Python API), before anything is stored."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.errors import UsageError

EXAMPLE = "example:pnpoly-rtx3090"
BAD = ["two\nlines", "tab\there", "cr\rhere", "esc\x1b[31m", "sep\u2028here"]


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("name", BAD)
def test_a_tuning_command_refuses_a_control_character_in_the_campaign_name_before_storing(tmp_path, name):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    r = run("tune", "replay", "--cache", EXAMPLE, "--trials", 2, "--campaign", name, "--no-progress", "--db", url)
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert "control character" in r.stderr and repr(name) in r.stderr
    assert not (tmp_path / "c.db").exists()  # refused before the database is opened


def test_rename_tune_many_and_the_python_api_refuse_it_too(tmp_path):
    from autotune import minimize
    from autotune.campaign import Campaign
    from autotune.drivers.scale import load_many
    from autotune.runners.replay import ReplayRunner
    from autotune.search_spaces.replay import ReplaySpace

    url = f"sqlite:///{tmp_path / 'c.db'}"
    r = run("tune", "replay", "--cache", EXAMPLE, "--trials", 2, "--algorithm", "random", "--cost-model", "none",
            "--campaign", "good", "--no-progress", "--db", url)
    assert r.exit_code == 0, r.output
    r = run("campaigns", "rename", "good", "bad\nname", "--db", url)
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "control character" in r.stderr, r.output
    assert run("campaigns", "--format", "csv", "--db", url).stdout.splitlines()[1].startswith("good,")
    many = tmp_path / "many.yaml"
    many.write_text(f"- {{kind: replay, cache: '{EXAMPLE}', trials: 2}}\n"
                    f"- {{kind: replay, cache: '{EXAMPLE}', trials: 2, campaign: \"a\\nb\"}}\n")
    with pytest.raises(UsageError, match=r"campaign 2: .*control character"):
        load_many(many)  # before the first campaign runs
    with pytest.raises(UsageError, match="control character"):
        minimize(lambda c: c["x"], {"x": [1, 2]}, trials=2, db=url, campaign="a\tb")
    space = ReplaySpace(EXAMPLE)
    with pytest.raises(UsageError, match="control character"):
        Campaign("a\x00b", space, "random", ReplayRunner(space.cache), None, trials=2)
    from autotune.db import open_database

    db = open_database(url)
    try:
        with pytest.raises(UsageError, match="control character"):  # the database refuses it whoever asks
            db.open_campaign("x\ny", space.task, ReplayRunner(space.cache).device, "random", {})
        assert [line.split(",")[0] for line in run("campaigns", "--format", "csv", "--db", url).stdout.splitlines()[1:]
                ] == ["good"]  # nothing else was stored
    finally:
        db.close()
