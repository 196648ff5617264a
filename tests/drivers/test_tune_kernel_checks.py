"""tune_kernel: how outputs are checked is part of the task, the best over reused trials, argument checks made
before anything is compiled or measured, and restrictions that raise (autotune/drivers/kernel_tuner.py,
search_spaces/kernels/user_kernel.py, user_arguments.py, restrictions.py). C only: runs here with gcc/g++."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_tuner_helpers import db_url

from autotune.drivers.kernel_tuner import tune_kernel
from autotune.errors import UsageError
from autotune.search_spaces.kernels.user_kernel import UserKernel, kernel_name_in_source

SCALE = "void scale(float *y, const float *x, int n) { for (int i = 0; i < n; i++) y[i] = 2.0f * x[i] * (u / u); }"
N = 256


def _args():
    x = np.random.default_rng(0).random(N).astype(np.float32)
    return [np.zeros(N, np.float32), x, np.int32(N)], x


def _tune(tmp_path, answer=None, **kw):
    args, _ = _args()
    kw.setdefault("db", db_url(tmp_path))
    return tune_kernel("scale", SCALE, N, args, {"u": [1, 2]}, answer=answer, lang="C", quiet=True, iterations=2,
                       **kw)


# -- the check is part of the task ---------------------------------------------------------------------
def _task(answer=None, atol=1e-6, verify=None):
    args, _ = _args()
    return UserKernel("scale", SCALE, "C", N, args, {"u": [1, 2]}, answer=answer, atol=atol, verify=verify).task


def _check_a(answer, results, atol=None):
    return np.allclose(answer[0], results[0], atol=atol)


def _check_b(answer, results, atol=None):
    return np.allclose(answer[0], results[0], atol=10 * atol)


def test_the_task_differs_when_the_check_differs_and_not_otherwise():
    _, x = _args()
    right, wrong = [2 * x, None, None], [3 * x, None, None]
    base = _task(right).key
    assert _task([2 * x, None, None]).key == base  # equal arrays, another object: the same task
    assert _task(wrong).key != base
    assert _task([(2 * x).reshape(16, 16), None, None]).key != base  # same bytes, another shape
    assert _task(right, atol=1e-3).key != base
    assert _task(right, verify=_check_a).key not in (base, _task(right, verify=_check_b).key)
    assert _task(right, verify=_check_a).key == _task(right, verify=_check_a).key
    same_body = [eval("lambda a, r, atol=None: True") for _ in range(2)]  # a rerun makes the lambda afresh
    assert _task(right, verify=same_body[0]).key == _task(right, verify=same_body[1]).key
    assert _task(right, verify=lambda a, r, atol=None: False).key != _task(right, verify=same_body[0]).key
    # nothing checked: the parameters (and the task) are those of a kernel with no answer, whatever atol says
    assert "check" not in _task().params and _task(atol=1e-3).key == _task().key


def test_a_corrected_answer_measures_again_and_the_same_answer_resumes(tmp_path):
    _, x = _args()
    results, env = _tune(tmp_path, answer=[3 * x, None, None])  # a wrong reference: every point fails
    assert results == [] and [f["status"] for f in env["failed"]] == ["WRONG_RESULT"] * 2
    fixed, env2 = _tune(tmp_path, answer=[2 * x, None, None])
    assert env2["task_key"] != env["task_key"] and env2["campaign"] != env["campaign"]
    assert len(fixed) == 2 and env2["failed"] == [] and env2["trials"] == 2
    again, env3 = _tune(tmp_path, answer=[2 * x, None, None])  # the same script rerun: its campaign resumes
    assert env3["resumed"] and env3["campaign"] == env2["campaign"] and len(again) == 2
    other, env4 = _tune(tmp_path, answer=[2 * x, None, None], campaign="another")  # reuses, measures nothing
    assert env4["task_key"] == env2["task_key"] and env4["trials"] == 0 and len(other) == 2


# -- the best over everything the campaign holds -----------------------------------------------------------
def test_best_config_of_a_campaign_that_reused_every_trial(tmp_path):
    _, x = _args()
    _, env = _tune(tmp_path, answer=[2 * x, None, None], campaign="first")
    second, env2 = _tune(tmp_path, answer=[2 * x, None, None], campaign="second")
    assert env2["trials"] == 0 and len(second) == 2  # everything looked up in the first campaign
    best = min(second, key=lambda r: r["time"])
    assert env2["best_config"] == {"u": best["u"]} == env["best_config"]


# -- arguments checked up front ------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [-1, 0, "abc", True, float("nan"), float("inf")])
def test_run_timeout_must_be_a_positive_number(tmp_path, value):
    with pytest.raises(UsageError, match=r"^run_timeout must be a positive number of seconds, not "):
        _tune(tmp_path, run_timeout=value)
    assert not (tmp_path / "kt.db").exists()


@pytest.mark.parametrize("value", [-1, -1e-9, "x", None, float("nan")])
def test_atol_must_be_a_non_negative_number(tmp_path, value):
    _, x = _args()
    with pytest.raises(UsageError, match=r"^atol must be a non-negative number"):
        _tune(tmp_path, answer=[2 * x, None, None], atol=value)
    assert not (tmp_path / "kt.db").exists()


def test_a_cache_in_a_missing_directory_is_refused_before_the_search(tmp_path):
    cache = tmp_path / "no_such_dir" / "cache.json"
    with pytest.raises(UsageError, match=r"cache .*cache\.json'?: the directory .*no_such_dir'? does not exist"):
        _tune(tmp_path, cache=str(cache))
    assert not (tmp_path / "kt.db").exists()  # refused before the database was opened: nothing measured
    with pytest.raises(UsageError, match="is a directory"):
        _tune(tmp_path, cache=tmp_path)


@pytest.mark.parametrize("lang", ["C", "CUDA"])
def test_a_kernel_name_not_in_the_source_is_refused_before_compiling(tmp_path, lang):
    args, _ = _args()
    src = SCALE if lang == "C" else SCALE.replace("void scale", "__global__ void scale")
    # CUDA: refused before the GPU is even looked for, so this runs on a machine without one
    with pytest.raises(UsageError, match=r"^kernel_name 'scal' does not occur in the kernel source \(did you mean "
                                         r"'scale'\?\)"):
        tune_kernel("scal", src, N, args, {"u": [1, 2]}, lang=lang, db=db_url(tmp_path), quiet=True)
    assert not (tmp_path / "kt.db").exists()


def test_kernel_names_from_includes_templates_and_defines_are_found(tmp_path):
    (tmp_path / "impl.h").write_text("void real_kernel(float *y) { y[0] = 1; }\n")
    kernel_name_in_source("real_kernel", '#include "impl.h"\n', [tmp_path])
    with pytest.raises(UsageError, match="does not occur"):
        kernel_name_in_source("real_kernel", '#include "impl.h"\n', [])  # not where the compiler looks
    kernel_name_in_source("vector_add<float>", "template <typename T> __global__ void vector_add(T *x) {}")
    kernel_name_in_source("k", "void KNAME(float *y) {}", extra=["-DKNAME=k"])
    with pytest.raises(UsageError, match="does not occur"):
        kernel_name_in_source("scale", "void scale_all(float *y) {}")  # a whole identifier, not a prefix
    with pytest.raises(UsageError, match="is not the name of a function"):
        kernel_name_in_source("two words", "void two(float *y) {}")


# -- restrictions that raise ------------------------------------------------------------------------------
def _divide_by_zero(u):
    return 1 / 0


@pytest.mark.parametrize("restrictions", [[lambda u: 1 / 0], lambda p: 1 / 0, [(lambda u: 1 / 0, ["u"])]],
                         ids=["keywords", "whole-dict", "tuple"])
def test_a_callable_restriction_that_raises_is_named(tmp_path, restrictions):
    with pytest.raises(UsageError, match=r"^restriction '<lambda>' \(test_tune_kernel_checks\.py line \d+\) cannot "
                                         r"be evaluated at u=1: ZeroDivisionError: division by zero$"):
        _tune(tmp_path, restrictions=restrictions)


def test_a_restriction_is_worded_as_an_expression_restriction_is(tmp_path):
    with pytest.raises(UsageError) as expr:
        _tune(tmp_path, restrictions=["u / (u - u) > 0"])
    with pytest.raises(UsageError) as named:
        _tune(tmp_path, restrictions=[_divide_by_zero])
    assert str(expr.value) == "constraint 'u / (u - u) > 0' cannot be evaluated at u=1: ZeroDivisionError: " \
                              "division by zero"
    assert str(named.value).startswith("restriction '_divide_by_zero' (test_tune_kernel_checks.py line ")
    assert str(named.value).endswith(") cannot be evaluated at u=1: ZeroDivisionError: division by zero")
