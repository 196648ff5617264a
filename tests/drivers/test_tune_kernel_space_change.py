"""tune_kernel run again over other tunable parameter values or restrictions: the task (the kernel and its
inputs) is the same, so what was measured is looked up, but the space searched is another campaign's, since a
campaign's search state and history belong to its space (autotune/drivers/kernel_tuner.py); and the size and
divisor expressions, which may name only tunable parameters, checked before anything is compiled
(search_spaces/kernels/user_kernel.py); and a Kernel Tuner cache file extended by a run over other values
(search_spaces/replay.py). C only: runs here with gcc/g++."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_tuner_helpers import db_url

from autotune.drivers.kernel_tuner import tune_kernel
from autotune.errors import UsageError
from autotune.search_spaces.replay import KTCache

SCALE = "void scale(float *y, const float *x, int n) { for (int i = 0; i < n; i++) y[i] = 2.0f * x[i] * (u / u); }"
N = 256


def _tune(tmp_path, params, size=N, **kw):
    x = np.random.default_rng(0).random(size).astype(np.float32)
    args = [np.zeros(size, np.float32), x, np.int32(size)]
    return tune_kernel("scale", SCALE, size, args, params, answer=[2 * x, None, None], lang="C", quiet=True,
                       iterations=1, db=db_url(tmp_path), **kw)


def test_a_loosened_restriction_measures_the_points_it_lets_in(tmp_path):
    first, env = _tune(tmp_path, {"u": [1, 2]}, restrictions=["u == 2"])
    assert [r["u"] for r in first] == [2] and env["trials"] == 1
    # the grid search of the restricted space ended past its one point; the whole space starts from its first
    both, env2 = _tune(tmp_path, {"u": [1, 2]})
    assert sorted(r["u"] for r in both) == [1, 2] and env2["trials"] == 1  # u=1 measured, u=2 looked up
    assert env2["campaign"] != env["campaign"] and env2["task_key"] == env["task_key"]
    again, env3 = _tune(tmp_path, {"u": [1, 2]}, restrictions=["u == 2"])  # the first space again: resumed
    assert env3["resumed"] and env3["campaign"] == env["campaign"] and [r["u"] for r in again] == [2]


def test_a_parameter_added_gives_results_with_every_parameter(tmp_path):
    _tune(tmp_path, {"u": [1, 2]})
    results, env = _tune(tmp_path, {"u": [1, 2], "v": [3]})
    assert not env["resumed"] and sorted((r["u"], r["v"]) for r in results) == [(1, 3), (2, 3)]


def test_a_named_campaign_run_over_another_space_is_refused(tmp_path):
    _tune(tmp_path, {"u": [1, 2]}, restrictions=["u == 1"], campaign="mine")
    with pytest.raises(UsageError, match=r"^campaign 'mine' searched other tune_params or restrictions; .*fresh=True"):
        _tune(tmp_path, {"u": [1, 2]}, campaign="mine")
    results, env = _tune(tmp_path, {"u": [1, 2]}, campaign="mine", fresh=True)
    assert sorted(r["u"] for r in results) == [1, 2] and env["trials"] == 1  # u=1 looked up
    resumed, env2 = _tune(tmp_path, {"u": [1, 2]}, campaign="mine")
    assert env2["resumed"] and len(resumed) == 2


# -- size and divisor expressions name only tunable parameters ----------------------------------------------
@pytest.mark.parametrize("where, expected", [
    ({"problem_size": "n"}, r"^problem_size 'n' uses unknown name\(s\) n; .*tunable parameters \(u\)"),
    ({"problem_size": (256, "rows * 2")}, r"^problem_size 'rows \* 2' uses unknown name\(s\) rows;"),
    ({"grid_div_x": ["u", "tile"]}, r"^grid_div_x 'tile' uses unknown name\(s\) tile;"),
    ({"grid_div_y": "blk"}, r"^grid_div_y 'blk' uses unknown name\(s\) blk;"),
])
def test_an_expression_naming_no_tunable_parameter_is_refused_before_compiling(tmp_path, where, expected):
    x = np.random.default_rng(0).random(N).astype(np.float32)
    args = [np.zeros(N, np.float32), x, np.int32(N)]
    where = dict(where)
    size = where.pop("problem_size", N)
    with pytest.raises(UsageError, match=expected):
        tune_kernel("scale", SCALE, size, args, {"u": [1, 2]}, lang="C", quiet=True, db=db_url(tmp_path), **where)
    assert not (tmp_path / "kt.db").exists()


# -- a cache file extended by a run over other values ------------------------------------------------------
def test_a_cache_extended_over_other_values_stays_readable_and_another_size_is_refused_first(tmp_path):
    cache = tmp_path / "scale.json"
    _tune(tmp_path, {"u": [1, 2]}, cache=str(cache))
    _, env = _tune(tmp_path, {"u": [4]}, cache=str(cache))
    kt = KTCache.load(cache)  # every record's values among the header's tune_params
    assert kt.param_values == {"u": [1, 2, 4]} and sorted(r["u"] for r in kt.records.values()) == [1, 2, 4]
    with pytest.raises(UsageError, match=r"^cache file .* holds results for another problem size \(256, not 512\)"):
        _tune(tmp_path, {"u": [8]}, size=2 * N, cache=str(cache))
    assert len(KTCache.load(cache).records) == 3
    x = np.random.default_rng(0).random(2 * N).astype(np.float32)  # nothing of that size was measured either
    _, env = tune_kernel("scale", SCALE, 2 * N, [np.zeros(2 * N, np.float32), x, np.int32(2 * N)], {"u": [8]},
                         answer=[2 * x, None, None], lang="C", quiet=True, iterations=1, db=db_url(tmp_path))
    assert env["trials"] == 1 and not env["resumed"]
