"""minimize and tune_command refuse a space whose constraints exclude every configuration before they open a
campaign: a campaign opened on it would stay behind as a failed one whose name the fixed space could not take
(autotune/drivers/function.py, autotune/drivers/command.py)."""

from __future__ import annotations

import os
import stat

import pytest

import autotune
from autotune.db import open_database, queries
from autotune.drivers.command import tune_command
from autotune.errors import UsageError


def _value(config):
    return float(config["x"])


def _campaigns(url):
    db = open_database(url)
    try:
        return list(queries.campaigns(db)["campaign"])
    finally:
        db.close()


def test_minimize_refuses_an_empty_space_and_the_name_stays_free(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    autotune.minimize(_value, {"x": [1]}, trials=1, db=url, campaign="other", progress=False)  # a database exists
    for constraint in ("x > 5", lambda c: False):
        with pytest.raises(UsageError, match="no valid point"):
            autotune.minimize(_value, autotune.KnobSpace({"x": [1, 2]}, [constraint]), trials=2, db=url,
                              campaign="mine", progress=False)
    assert _campaigns(url) == ["other"]
    result = autotune.minimize(_value, autotune.KnobSpace({"x": [1, 2, 6]}, ["x > 5"]), trials=2, db=url,
                               campaign="mine", progress=False)  # the space fixed, under the same name
    assert result.best_config == {"x": 6}


def test_minimize_refuses_a_space_too_large_to_count_with_no_valid_point_found(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    space = autotune.KnobSpace({"x": list(range(1000)), "y": list(range(1000))}, ["x * y == -1"], check_limit=10_000)
    with pytest.raises(UsageError, match=r"too many to check each .* none of 100,000 random combinations"):
        autotune.minimize(_value, space, trials=2, db=url, progress=False)
    assert not (tmp_path / "f.db").exists()


def test_tune_command_refuses_an_empty_space_before_opening_the_database(tmp_path):
    program = tmp_path / "bench.sh"
    program.write_text("#!/bin/sh\necho \"time: $1\"\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    space = tmp_path / "space.yaml"
    space.write_text('knobs: {x: [1, 2]}\nconstraints: ["x > 5"]\nobjective: {regex: "time: (\\\\S+)"}\n')
    url = f"sqlite:///{tmp_path / 'c.db'}"
    with pytest.raises(UsageError, match="no valid point"):
        tune_command([str(program), "{x}"], str(space), trials=2, db=url, campaign="mine", progress=False)
    assert not os.path.exists(tmp_path / "c.db")
    space.write_text('knobs: {x: [1, 2, 6]}\nconstraints: ["x > 5"]\nobjective: {regex: "time: (\\\\S+)"}\n')
    result = tune_command([str(program), "{x}"], str(space), trials=2, db=url, campaign="mine", progress=False)
    assert result.best_config == {"x": 6}


def test_a_script_catches_bad_input_as_autotune_usage_error():
    with pytest.raises(autotune.UsageError, match="no values"):
        autotune.minimize(_value, {"x": []}, trials=1, progress=False)
    assert "UsageError" in autotune.__all__
