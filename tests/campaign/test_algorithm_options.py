"""`--option KEY=VALUE`: algorithm options (and the cost-model guidance's) from the command line and
the Python drivers: parsed as JSON when they parse, checked against the declared options and their
defaults' types, and stored with the campaign."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import autotune
from autotune.algorithms.model_guided import ModelGuided, make_search
from autotune.algorithms.registry import check_options, make_algorithm, parse_options, valid_options
from autotune.cli.main import app
from autotune.db import open_database, queries
from autotune.errors import UsageError

CACHE = "example:pnpoly-rtx3090"
cli = CliRunner()


def test_values_are_json_when_they_parse_else_text():
    got = parse_options(["population=16", "c=0.5", "flag=true", "xs=[1, 2]", "algorithms=random,mcmc", "s=\"7\"",
                         "empty=", "population=20"])
    assert got == {"population": 20, "c": 0.5, "flag": True, "xs": [1, 2], "algorithms": "random,mcmc", "s": "7",
                   "empty": ""}
    for bad in ("population", "=3"):
        with pytest.raises(UsageError, match="KEY=VALUE"):
            parse_options([bad])


def test_keys_and_types_are_checked_against_the_declared_options():
    assert check_options("evolutionary", {"population": 16, "mutation_rate": 1}) == {"population": 16,
                                                                                     "mutation_rate": 1.0}
    assert check_options("mcmc", {"restart_after": 30.0}) == {"restart_after": 30}
    # the cost-model guidance's options are valid when a cost model guides the search, and only then
    assert set(valid_options("evolutionary", "xgb")) == set(make_algorithm("evolutionary").options) | set(
        ModelGuided.options)
    assert check_options("evolutionary", {"epsilon": 0.3}, "xgb") == {"epsilon": 0.3}
    with pytest.raises(UsageError, match=r"has no option 'epsilon'.*valid: crossover_rate, init, mutation_rate"):
        check_options("evolutionary", {"epsilon": 0.3}, None)
    with pytest.raises(UsageError, match="did you mean 'population'"):
        check_options("evolutionary", {"populaton": 3}, "xgb")
    for key, value, want in (("population", "many", "an integer"), ("population", True, "an integer"),
                             ("crossover_rate", [1], "a number"), ("init", 2.5, "an integer")):
        with pytest.raises(UsageError, match=f"{key} must be {want}"):
            check_options("evolutionary", {key: value})
    with pytest.raises(UsageError, match="must be a string"):
        check_options("bandit", {"algorithms": 3})
    guided = make_search("evolutionary", "xgb", **check_options("evolutionary", {"epsilon": 0.3, "population": 12},
                                                                "xgb"))
    assert guided.config["epsilon"] == 0.3 and guided.inner.config["population"] == 12
    assert make_algorithm("mcmc", {"t0": 1}).config["t0"] == 1.0
    for name, bad in (("taso-queue", {"alpha": 0.5}), ("backtracking", {"beam": 0}), ("mcmc", {"cooling": 1.5}),
                      ("mcmc", {"t0": float("nan")}), ("evolutionary", {"tournament": 0})):
        with pytest.raises(UsageError, match=f"option {next(iter(bad))} must be"):
            make_algorithm(name, bad)


def test_tune_replay_option_is_stored_with_the_campaign(tmp_path):
    url = f"sqlite:///{tmp_path / 'o.db'}"
    r = cli.invoke(app, ["tune", "replay", "--cache", CACHE, "--db", url, "--campaign", "o", "--trials", "20",
                         "-a", "evolutionary", "--cost-model", "none", "--option", "population=8",
                         "--option", "mutation_rate=0.25", "--no-progress", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.strip().splitlines()[-1])["trials"] == 20
    options = open_database(url).campaign("o").options
    assert options["algorithm_options"]["population"] == 8 and options["algorithm_options"]["mutation_rate"] == 0.25
    assert options["recipe"]["args"]["options"] == {"population": 8, "mutation_rate": 0.25}


@pytest.mark.parametrize("option,cost_model,needle", [
    ("populaton=8", "none", "did you mean 'population'?) (valid: crossover_rate, init, mutation_rate"),
    ("population=lots", "none", "population must be an integer"),
    ("epsilon=0.2", "none", "has no option 'epsilon'"),
    ("nothing", "xgb", "KEY=VALUE"),
    ("large=every", "xgb", "large must be one of inner, sample, both"),
    ("population=-4", "none", "option population must be a whole number >= 1, not -4"),
    ("mutation_rate=5", "none", "option mutation_rate must be a number in [0, 1], not 5.0"),
    ("epsilon=1.5", "xgb", "option epsilon must be a number in [0, 1]"),
    ("init=0", "xgb", "option init must be a whole number >= 1, not 0"),  # a model fitted on nothing
])
def test_a_bad_option_exits_2_before_anything_is_written(tmp_path, option, cost_model, needle):
    url = f"sqlite:///{tmp_path / 'bad.db'}"
    r = cli.invoke(app, ["tune", "replay", "--cache", CACHE, "--db", url, "--trials", "5", "-a", "evolutionary",
                         "--cost-model", cost_model, "--option", option, "--no-progress"])
    assert r.exit_code == 2 and needle in r.stderr and "Traceback" not in r.output, r.output
    assert "valid:" in r.stderr or "no option" not in needle
    assert not (tmp_path / "bad.db").exists() or queries.campaigns(open_database(url)).empty


def test_guided_options_reach_the_model_guided_search(tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    res = autotune.tune_replay(CACHE, "evolutionary", "xgb", trials=12, campaign="g", db=url,
                               options={"init": 4, "epsilon": 0.5, "population": 6})
    assert res.trials == 12
    stored = open_database(url).campaign("g").options["algorithm_options"]
    assert (stored["init"], stored["epsilon"], stored["population"]) == (4, 0.5, 6)


def test_python_drivers_take_options(sqlite_url):
    res = autotune.minimize(lambda c: c["x"] + 1.0, {"x": list(range(10))}, trials=5, algorithm="mcmc",
                            cost_model=None, db=sqlite_url, campaign="fn", options={"t0": 0.5})
    assert res.trials == 5
    assert open_database(sqlite_url).campaign("fn").options["algorithm_options"]["t0"] == 0.5
    with pytest.raises(UsageError, match="did you mean 't0'"):
        autotune.minimize(lambda c: 1.0, {"x": [1, 2]}, trials=2, algorithm="mcmc", cost_model=None, db=sqlite_url,
                          options={"t": 0.5})
