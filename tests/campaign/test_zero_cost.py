"""A measured cost of 0 (an error metric at its optimum) is the best cost: searches reach it without a
crash or a RuntimeWarning, the models' labels rank it first, and best_config / export-configs answer a
task whose best is 0."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

import autotune
from autotune.cli.main import app
from autotune.cost_models.features import log_cost, positive_costs, throughput
from autotune.cost_models.pooled import speed
from autotune.dashboard.analysis import main_effects
from autotune.db import open_database
from autotune.testing.caches import NAMES
from autotune.transfer.dispatch import best_config
from autotune.transfer.export import c_header, export_configs
from autotune.types import Candidate, Device, Measurement, Status, Task


def error_metric(c):
    """0 at x=3, y=2 and on the knob values next to it: an error that a search reaches early."""
    return float(max(0, abs(c["x"] - 3) - 1) + abs(c["y"] - 2))


@pytest.mark.parametrize("algorithm, cost_model", [("mcmc", None), ("evolutionary", "xgb"), ("bandit", "xgb")])
def test_minimize_reaches_a_cost_of_zero_without_a_crash_or_a_warning(tmp_path, algorithm, cost_model):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # log(0), x/0 in numpy are warnings, not errors
        r = autotune.minimize(error_metric, {"x": list(range(12)), "y": list(range(6))}, trials=48,
                              algorithm=algorithm, cost_model=cost_model, db=f"sqlite:///{tmp_path / 'z.db'}",
                              progress=False)
    assert r.status == "finished" and r.errors == 0 and r.trials == 48
    assert r.best.cost == 0.0 and error_metric(r.best.candidate.payload) == 0.0


def test_positive_costs_puts_a_zero_below_the_smallest_positive_cost_of_its_group():
    y = np.array([0.0, 2.0, 4.0, math.inf, 0.0, 0.0, math.nan, 5.0, 6.0])
    g = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2])
    out = positive_costs(y, g)
    np.testing.assert_array_equal(out[:4], [1.0, 2.0, 4.0, math.inf])  # half of 2
    np.testing.assert_array_equal(out[4:6], [1.0, 1.0])  # zeros alone: equal
    assert math.isnan(out[6]) and list(out[7:]) == [5.0, 6.0]  # failures and positive costs as they were
    assert positive_costs([0.0, 3.0]).tolist() == [1.5, 3.0] and positive_costs(y).tolist()[0] == 1.0


def test_model_labels_rank_a_cost_of_zero_best_and_failures_last():
    y = np.array([2.0, 0.0, 4.0, math.inf, 0.0, 0.0, math.inf])
    g = np.array([0, 0, 0, 0, 1, 1, 1])
    lc = log_cost(y, g)
    assert lc[1] == 0.0 and 0 < lc[0] < lc[2] < lc[3]  # the 0 is the best, the failure the worst
    assert lc[4] == lc[5] == 0.0 and lc[6] == 1.0  # a group of zeros: equal bests, its failure above
    tp = throughput(y, g)
    assert tp[1] == 1.0 and tp[0] > tp[2] > tp[3] == 0.0 and tp[4] == tp[5] == 1.0 and tp[6] == 0.0
    fast = speed(np.array([1.0, 0.0, 2.0, math.inf]))
    assert fast[1] > fast[0] > fast[2] > fast[3]  # pooled transfer model: 0 the fastest


def test_parameter_importance_keeps_the_trials_that_cost_zero():
    trials = [{"cost": float(abs(x - 3)), "params": {"x": x, "z": x % 2}, "best": False} for x in range(12)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        effects = main_effects(trials)
    assert effects["n"] == 12 and effects["params"][0]["name"] == "x"


def _store(db, task: Task, device: str, costs: dict[int, float]) -> None:
    db.add_trials(task, Device(device, "cuda", {}),
                  [Measurement(Candidate({"k": k}), Status.OK, cost=c) for k, c in costs.items()])


def test_best_config_and_export_answer_a_task_whose_best_is_zero(tmp_path):
    url = f"sqlite:///{tmp_path / 'z.db'}"
    db = open_database(url)
    try:
        task = Task("function", "err", {"knobs": {"k": [0, 1, 2]}})
        _store(db, task, NAMES["turing"], {0: 0.0, 1: 1.0, 2: 2.0})
        _store(db, task, NAMES["ampere"], {0: 1.5, 1: 1.0, 2: 3.0})
        own = best_config(task, NAMES["turing"], db=db)
        assert (own.source, own.config, own.cost) == ("measured", {"k": 0}, 0.0)
        borrowed = best_config(task, NAMES["turing2"], db=db)  # never measured: from the TITAN RTX, whose best is 0
        assert borrowed.source == "transfer" and borrowed.config == {"k": 0}
        # the fallback: k=0 is at the 0 of one device and 1.5x the best of the other
        fb = export_configs(db, task)["fallback"]
        assert fb["config"] == {"k": 0} and fb["worst_ratio"] == 1.5 and fb["geomean_ratio"] == round(1.5 ** 0.5, 4)

        # a fallback above 0 where a device's best is 0 has no ratio to that best: none is reported
        other = Task("function", "err2", {"knobs": {"k": [0, 1, 2]}})
        _store(db, other, NAMES["turing"], {0: 0.0, 1: 1.0, 2: 2.0})
        _store(db, other, NAMES["ampere"], {0: 9.0, 1: 1.0, 2: 3.0})
        doc = export_configs(db, other)
        assert doc["fallback"]["config"] == {"k": 1} and doc["fallback"]["worst_ratio"] is None
        assert "costs more than 0 where a device's best is 0" in doc["fallback"]["basis"]
        assert "worst ratio" not in c_header(doc)
    finally:
        db.close()
    res = CliRunner().invoke(app, ["export-configs", "--task", "err2", "--db", url])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["fallback"]["geomean_ratio"] is None
