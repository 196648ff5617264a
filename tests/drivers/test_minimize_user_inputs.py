"""autotune.minimize as a user scripts it: what the objective may be and return, the arguments it refuses,
what it says when every call fails, and the result it hands back."""

from __future__ import annotations

import decimal
import functools
import inspect
import re

import numpy as np
import pytest

import autotune
from autotune.db import open_database, queries
from autotune.errors import UsageError

SPACE = {"x": [0, 1, 2, 3]}
GRID = {"algorithm": "grid", "cost_model": None}


def scaled_distance(config: dict, target: int = 0) -> float:
    return abs(config["x"] - target) + 0.5


class Distance:
    def __init__(self, target: int):
        self.target = target

    def run(self, config: dict) -> float:
        return scaled_distance(config, self.target)

    def __call__(self, config: dict) -> float:
        return scaled_distance(config, self.target)


@pytest.mark.parametrize("make", [
    lambda t: functools.partial(scaled_distance, target=t),
    lambda t: Distance(t).run,
    lambda t: Distance(t),
], ids=["partial", "bound method", "callable object"])
def test_objectives_that_differ_only_by_what_they_bind_are_two_tasks(tmp_path, make):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    first = autotune.minimize(make(0), SPACE, db=url, **GRID)
    second = autotune.minimize(make(3), SPACE, db=url, **GRID)
    assert second.task.key != first.task.key and second.measured_here == 4  # measured, not looked up
    assert first.best_config == {"x": 0} and second.best_config == {"x": 3}
    again = autotune.minimize(make(3), SPACE, db=url, **GRID)
    assert again.resumed and again.campaign == second.campaign and again.measured_here == 0
    assert "scaled_distance" in first.task.name or "Distance" in first.task.name  # not "functools.partial"


@pytest.mark.parametrize("value", [np.array(1.25), np.float32(1.25), decimal.Decimal("1.25")],
                         ids=["0-d array", "numpy scalar", "Decimal"])
def test_a_one_number_value_is_a_cost(tmp_path, value):
    res = autotune.minimize(lambda c: value, {"x": [0]}, db=f"sqlite:///{tmp_path / 'f.db'}", **GRID)
    assert res.errors == 0 and res.best_cost == 1.25


def test_an_objective_that_fails_everywhere_is_said_once_with_the_way_to_maximise(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    res = autotune.minimize(lambda c: -float(c["x"]) - 1, SPACE, db=url, **GRID)
    assert res.errors == 4 and res.best is None
    err = capsys.readouterr().err
    assert err.count("autotune:") == 1 and "-1.0" in err and "a cost must be a finite number >= 0" in err
    assert "to maximise a score" in err
    df = queries.trials(open_database(url), campaign=res.campaign)
    assert df["error"].str.contains("to maximise a score").all()  # and each trial says it too

    def broken(config):
        return config["typo"]

    autotune.minimize(broken, SPACE, db=url, **GRID)
    err = capsys.readouterr().err
    assert err.count("autotune:") == 1 and "KeyError: 'typo'" in err and "{'x': 0}" in err


@pytest.mark.parametrize("kwargs,message", [
    ({"trials": True}, "trial budget must be a positive number, a whole one, not True"),
    ({"trials": 2.5}, "trial budget must be a positive number, a whole one, not 2.5"),
    ({"batch": True}, "batch size must be a positive number, a whole one, not True"),
    ({"campaign": 3}, "campaign name must be a non-empty string, not 3"),
    ({"campaign": " "}, "campaign name must be a non-empty string"),
    ({"options": 3}, "options must be a dict of option name -> value, not 3"),
    ({"isolate": True, "memory_limit": "1G"}, "memory limit must be a positive whole number of bytes, not '1G'"),
    ({"isolate": True, "memory_limit": -5}, "memory limit must be a positive whole number of bytes, not -5"),
])
def test_bad_arguments_are_one_sentence_before_anything_is_written(tmp_path, kwargs, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        autotune.minimize(scaled_distance, SPACE, db=f"sqlite:///{tmp_path / 'f.db'}", **kwargs)
    assert not (tmp_path / "f.db").exists()


def test_the_result_shows_its_best_config_and_figures(tmp_path):
    res = autotune.minimize(scaled_distance, SPACE, db=f"sqlite:///{tmp_path / 'f.db'}", campaign="c", **GRID)
    assert res.best_config == {"x": 0} == res.summary()["best_config"]
    assert repr(res) == ("CampaignResult(campaign='c', status='exhausted', trials=4, errors=0, best_cost=0.5, "
                         "best_config={'x': 0})")  # not the task's knobs nor the host's properties


def test_help_explains_every_argument():
    doc = inspect.getdoc(autotune.minimize)
    for name in inspect.signature(autotune.minimize).parameters:
        assert f"``{name}``" in doc, name
    assert "sqlite:///autotune.db" in doc  # where the trials go when db is left out


def test_tuple_values_are_the_lists_a_resumed_campaign_reads_back(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    seen = []

    def tile_cost(config):
        seen.append(config["tile"])
        return float(config["tile"][0] * config["tile"][1] + config["k"])

    knobs = {"tile": [(8, 8), (4, 16), (2, 2)], "k": list(range(6))}
    first = autotune.minimize(tile_cost, knobs, trials=8, db=url, campaign="t", seed=1)
    again = autotune.minimize(tile_cost, knobs, trials=18, db=url, campaign="t", seed=1)
    assert again.resumed and again.trials == 18 and first.best_config["tile"] in ([2, 2], [4, 16], [8, 8])
    assert all(isinstance(t, list) for t in seen)  # the objective always gets what the database holds
    space = autotune.KnobSpace(knobs)
    assert all(space.contains(autotune.Candidate(c)) for c in queries.trials(open_database(url), campaign="t")["config"])


def test_numpy_numbers_are_budgets_and_a_refused_budget_names_its_argument(tmp_path):
    url = f"sqlite:///{tmp_path / 'n.db'}"
    r = autotune.minimize(lambda c: c["x"], {"x": [1, 2, 3, 4]}, trials=np.int64(3), batch=np.int32(2), db=url,
                          cost_model=None, algorithm="random", progress=False)
    assert r.trials == 3
    with pytest.raises(UsageError, match=r"the trial budget must be a positive number, a whole one, not 0 \(trials\)"):
        autotune.minimize(lambda c: c["x"], {"x": [1, 2]}, trials=0, db=url, progress=False)
