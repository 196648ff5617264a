"""A campaign checks its algorithm against its space before it opens anything in the database
(SearchAlgorithm.check_space, the one check every algorithm and kind of space goes through): a search
that cannot work there exits with status 2, naming the spaces it searches, and no campaign is stored."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from autotune.campaign import Campaign
from autotune.cli.main import app
from autotune.db import open_database
from autotune.db.queries import campaigns
from autotune.errors import UsageError
from autotune.testing.fakes import FakeRunner, small_knob_space


@pytest.mark.parametrize("cost_model", ["none", "xgb"])
def test_a_graph_search_on_a_knob_space_exits_2_before_anything_is_stored(sqlite_url, cost_model):
    """taso-queue on a recorded knob space ended 'exhausted' with 0 trials and exit status 0 (guided, it
    ran an ordinary model-guided search under its name); now both are refused."""
    r = CliRunner().invoke(app, ["tune", "replay", "--cache", "example:pnpoly-rtx3090", "--algorithm", "taso-queue",
                                 "--cost-model", cost_model, "--trials", "20", "--db", sqlite_url, "--no-progress"])
    assert r.exit_code == 2, r.output
    assert "searches graph spaces only (tune graph)" in r.output and "ReplaySpace offers" in r.output
    assert campaigns(open_database(sqlite_url)).empty


def test_the_campaign_refuses_before_it_opens_the_campaign(sqlite_url):
    space, db = small_knob_space(), open_database(sqlite_url)
    with pytest.raises(UsageError, match="'equality-saturation' searches graph spaces only"):
        Campaign("e", space, "equality-saturation", FakeRunner(space), db, trials=4)
    assert campaigns(db).empty
