"""`autotune predict --untried`: given configurations that are all measured are said to be, and a model stored
without a device (from Python) refuses --untried rather than ranking measured configurations as untried."""

from __future__ import annotations

import json

from sqlalchemy import select
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import Database, open_database
from autotune.db.models import CostModelRow
from autotune.db.queries import trials
from autotune.drivers.function import minimize

cli = CliRunner()
KNOBS = {"x": list(range(12)), "y": [1, 2, 4, 8, 16]}


def bowl(config: dict) -> float:
    return (config["x"] - 6) ** 2 + abs(config["y"] - 4) + 0.5


def run(*args):
    return cli.invoke(app, [str(a) for a in args])


def measured_and_not(url: str) -> tuple[list[dict], dict]:
    """Two configurations the campaign measured, and one it did not."""
    database = open_database(url)
    tried = list(trials(database, campaign="bowl", limit=None)["config"])
    database.close()
    keys = {json.dumps(c, sort_keys=True) for c in tried}
    fresh = next(c for c in ({"x": x, "y": y} for x in KNOBS["x"] for y in KNOBS["y"])
                 if json.dumps(c, sort_keys=True) not in keys)
    return tried[:2], fresh


def test_given_configurations_all_measured_are_said_to_be(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    minimize(bowl, KNOBS, trials=24, db=url, campaign="bowl")
    tried, fresh = measured_and_not(url)
    configs = [a for c in tried for a in ("--config", json.dumps(c))]
    r = run("predict", "--campaign", "bowl", *configs, "--untried", "--db", url)
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == [r.stdout.splitlines()[0]]  # no table
    assert r.stdout.rstrip().endswith(": none of the given configurations is untried, every one is measured")
    r = run("predict", "--campaign", "bowl", *configs, "--untried", "--db", url, "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout) == []
    mixed = ("predict", "--campaign", "bowl", *configs, "--config", json.dumps(fresh), "--untried", "--db", url)
    r = run(*mixed)
    assert r.exit_code == 0 and r.stdout.splitlines()[0].endswith(": 1 untried of the 3 given configurations")
    assert [row["config"] for row in json.loads(run(*mixed, "--format", "json").stdout)] == [fresh]


def test_a_model_stored_without_a_device_refuses_untried(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    minimize(bowl, KNOBS, trials=24, db=url, campaign="bowl")
    database = open_database(url)
    _, task, info = database.load_cost_model(campaign="bowl")
    with database.session() as s:
        row = s.get(CostModelRow, info["id"])
        data, fmt = Database.cost_model_bytes(row.data, row.format), row.format.split("+")[0]
    # as a script stores a model it trained itself, for the task alone
    model_id = database.save_cost_model(row.name, data, row.metrics, row.n_samples, task=task, device=None, fmt=fmt)
    with database.session() as s:
        assert s.scalar(select(CostModelRow.device_id).where(CostModelRow.id == model_id)) is None
    database.close()
    r = run("predict", "--model", model_id, "--untried", "--db", url)
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert r.stderr == (f"error: model {model_id} was stored without a device: --untried leaves out the configurations "
                        "measured on the model's device, and it has none\n")
    r = run("predict", "--model", model_id, "--db", url, "--format", "json")  # without --untried it ranks
    assert r.exit_code == 0 and len(json.loads(r.stdout)) == 10
