"""tune_kernel: Kernel Tuner's interface for the user's own C and CUDA kernels (autotune/drivers/kernel_tuner.py).

C runs here (gcc/g++); the CUDA tests are in test_tune_kernel_cuda.py."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from kernel_tuner_helpers import EXAMPLES, REPO, db_url, trials_of

import autotune
from autotune.drivers.kernel_tuner import tune_kernel
from autotune.drivers.kernel_tuner_args import choose_search, read_source
from autotune.errors import UsageError
from autotune.runners.child import run_user_function
from autotune.runners.timing import Protocol
from autotune.search_spaces.kernels.user_arguments import check_answer, verify_outputs
from autotune.search_spaces.kernels.user_kernel import UserKernel, detect_c_timing
from autotune.search_spaces.replay import KTCache

# A 1D stencil whose three parameters change the amount of work by fixed factors, so the optimum is
# unambiguous on a busy machine: passes (1, 4, 16 sweeps for 1, 2, 4), block (256 sweeps once, the others
# four times) and variant (0: once; 1: four times; 2: a planted bug that skips every other point: fastest,
# and wrong). Best: passes=1, block=256, variant=0; every other correct point does at least four times the
# work (a median of 5 repeats keeps that order when another process takes the core for part of the runs).
STENCIL = """
void stencil(float *out, const float *in, int n) {
  const int sweeps = passes * passes * (block == 256 ? 1 : 4) * (variant == 1 ? 4 : 1);  // the optimum by 4x
  for (int s = 0; s < sweeps; s++)
    for (int i0 = 1; i0 < n - 1; i0 += block) {
      const int end = i0 + block < n - 1 ? i0 + block : n - 1;
      for (int i = i0; i < end; i += (variant == 2 ? 2 : 1))
        out[i] = 0.25f * in[i - 1] + 0.5f * in[i] + 0.25f * in[i + 1];
    }
}
"""
STENCIL_PARAMS = {"passes": [1, 2, 4], "block": [64, 256, 1024], "variant": [0, 1, 2]}
STENCIL_RESTRICTIONS = ["passes * block <= 2048", "variant != 1 or passes <= 2"]
BEST = {"passes": 1, "block": 256, "variant": 0}


def stencil_args(n=300_000):
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    out = np.zeros(n, dtype=np.float32)
    ref = out.copy()
    ref[1:-1] = 0.25 * x[:-2] + 0.5 * x[1:-1] + 0.25 * x[2:]
    return [out, x, np.int32(n)], [ref, None, None]


# -- the example scripts -------------------------------------------------------------------------
@pytest.mark.parametrize("script", ["vector_add_c.py", "matmul_c.py"])
def test_c_example_scripts_run_and_land_in_the_database(tmp_path, script):
    url = db_url(tmp_path, "autotune.db")  # the scripts, as Kernel Tuner's, name no database: the default
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, str(EXAMPLES / script)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300, env=env, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "best performing configuration" in r.stdout
    campaign = r.stdout.strip().splitlines()[-1].rsplit("campaign ", 1)[1]
    df = trials_of(url, campaign)
    assert len(df) > 0 and (df["status"] == "OK").all(), df[["status", "error"]]
    assert "from autotune import tune_kernel" in (EXAMPLES / script).read_text()


# -- the stencil: three parameters, restrictions, a planted wrong result, the optimum ----------------
def test_stencil_wrong_result_and_budgeted_search_finds_the_exhaustive_best(tmp_path):
    args, answer = stencil_args()
    common = {"restrictions": STENCIL_RESTRICTIONS, "answer": answer, "lang": "C", "quiet": True, "iterations": 5,
              "compiler_options": ["-O1"]}
    url = db_url(tmp_path)
    results, env = tune_kernel("stencil", STENCIL, args[2].item(), args, STENCIL_PARAMS, db=url, campaign="all",
                               **common)
    space = UserKernel("stencil", STENCIL, "C", 1, args, STENCIL_PARAMS, restrictions=STENCIL_RESTRICTIONS).space()
    size = space.size()
    assert env["status"] == "exhausted" and env["trials"] == size  # no budget: every valid point measured
    assert all(r["variant"] != 2 for r in results)
    wrong = [f for f in env["failed"] if f["status"] == "WRONG_RESULT"]
    assert wrong and all(f["variant"] == 2 for f in wrong) and len(wrong) == sum(
        1 for c in space.enumerate() if c.payload["variant"] == 2)
    best = min(results, key=lambda r: r["time"])
    assert {k: best[k] for k in STENCIL_PARAMS} == BEST
    assert env["best_config"] == BEST
    df = trials_of(url, "all")
    assert len(df) == size and set(df["status"]) == {"OK", "WRONG_RESULT"}
    # a budget of about two thirds of the space, the model-guided genetic algorithm: same optimum
    budget = (2 * size) // 3
    _, env2 = tune_kernel("stencil", STENCIL, args[2].item(), args, STENCIL_PARAMS, db=db_url(tmp_path, "b.db"),
                                 strategy="genetic_algorithm", strategy_options={"max_fevals": budget},
                                 campaign="budget", seed=1, **common)
    assert env2["trials"] == budget and env2["algorithm"].startswith("evolutionary+")
    assert env2["best_config"] == BEST


def test_resume_measures_nothing_again(tmp_path):
    args, answer = stencil_args(20_000)
    kw = {"restrictions": STENCIL_RESTRICTIONS, "answer": answer, "lang": "C", "quiet": True, "iterations": 3,
          "db": db_url(tmp_path), "campaign": "again"}
    results, env = tune_kernel("stencil", STENCIL, 20_000, args, STENCIL_PARAMS, trials=6, **kw)
    assert env["trials"] == 6 and not env["resumed"]
    results2, env2 = tune_kernel("stencil", STENCIL, 20_000, args, STENCIL_PARAMS, trials=6, **kw)
    assert env2["resumed"] and env2["trials"] == 6 and len(results2) == len(results)


# -- the cache file --------------------------------------------------------------------------------
def test_cache_file_reads_back_and_replays(tmp_path):
    args, answer = stencil_args(20_000)
    cache = tmp_path / "stencil.json"
    results, env = tune_kernel("stencil", STENCIL, 20_000, args, STENCIL_PARAMS, restrictions=STENCIL_RESTRICTIONS,
                               answer=answer, lang="C", quiet=True, iterations=3, db=db_url(tmp_path), cache=str(cache))
    kt = KTCache.load(cache)
    assert kt.param_names == list(STENCIL_PARAMS) and kt.kernel_name == "stencil"
    assert kt.device_name == env["device_name"] and len(kt.records) == env["trials"]
    ok = [r for r in kt.records.values() if not isinstance(r["time"], str)]
    assert len(ok) == len(results) and all(r["times"] for r in ok)
    assert {r["time"] for r in kt.records.values() if isinstance(r["time"], str)} == {"RuntimeFailedConfig"}
    replay = autotune.tune_replay(str(cache), trials=5, db=db_url(tmp_path, "replay.db"), cost_model="none",
                                  algorithm="random")
    assert replay.trials == 5 and replay.best is not None


# -- bad input: one clear sentence ------------------------------------------------------------------
VADD = "void vadd(float *c, const float *a, int n) { for (int i = 0; i < n; i++) c[i] = a[i] * k; }"


def _vadd_args():
    a = np.ones(16, dtype=np.float32)
    return [np.zeros(16, dtype=np.float32), a, np.int32(16)]


def test_unknown_parameter_in_a_restriction(tmp_path):
    with pytest.raises(UsageError, match=r"restriction 'k \* blk <= 8' uses unknown name\(s\) blk; the tunable "
                                         r"parameters are k"):
        tune_kernel("vadd", VADD, 16, _vadd_args(), {"k": [1, 2]}, restrictions=["k * blk <= 8"], db=db_url(tmp_path))


@pytest.mark.parametrize("bad, why", [(16, "argument 2 is a int"), ([1, 2], "argument 2 is a list"),
                                      (np.complex64(1), "argument 2 is a numpy scalar of dtype complex64"),
                                      (np.array(["a"]), "argument 2 is an array of dtype str")])
def test_unsupported_argument_types(tmp_path, bad, why):
    args = _vadd_args()
    args[2] = bad
    with pytest.raises(UsageError, match=why):
        tune_kernel("vadd", VADD, 16, args, {"k": [1, 2]}, db=db_url(tmp_path))


def test_answer_of_the_wrong_length_or_shape(tmp_path):
    args = _vadd_args()
    with pytest.raises(UsageError, match="answer has 2 entries but there are 3 arguments"):
        tune_kernel("vadd", VADD, 16, args, {"k": [1, 2]}, answer=[args[1], None], db=db_url(tmp_path))
    with pytest.raises(UsageError, match=r"answer\[0\] has 8 elements"):
        check_answer([np.zeros(8, np.float32), None, None], args)
    with pytest.raises(UsageError, match=r"answer\[0\] has dtype float64"):
        check_answer([np.zeros(16), None, None], args)


def test_a_source_that_never_compiles(tmp_path):
    with pytest.raises(UsageError, match=r"(?s)the kernel does not compile .*first error: .*<kernel_string>:1:\d+: error: .*undeclared_thing"):
        tune_kernel("vadd", VADD.replace("c[i] =", "c[i] = undeclared_thing +"), 16, _vadd_args(), {"k": [1, 2]},
                    db=db_url(tmp_path), quiet=True)


def test_one_configuration_that_fails_to_compile_is_a_trial(tmp_path):
    src = VADD.replace("{ for", "{\n#if k == 2\n#error k=2 is broken\n#endif\n for")
    results, env = tune_kernel("vadd", src, 16, _vadd_args(), {"k": [1, 2, 3]}, db=db_url(tmp_path), quiet=True,
                               c_timing="runner")
    assert sorted(r["k"] for r in results) == [1, 3]
    assert [(f["k"], f["status"]) for f in env["failed"]] == [(2, "COMPILE_ERROR")]
    assert "k=2 is broken" in env["failed"][0]["error"]


def test_unknown_strategy_and_language_and_options(tmp_path):
    with pytest.raises(UsageError, match="unknown strategy 'pso'; valid: brute_force, random_sample"):
        tune_kernel("vadd", VADD, 16, _vadd_args(), {"k": [1]}, strategy="pso", db=db_url(tmp_path))
    with pytest.raises(UsageError, match="unsupported lang 'OpenCL'"):
        tune_kernel("vadd", VADD, 16, _vadd_args(), {"k": [1]}, lang="OpenCL", db=db_url(tmp_path))
    with pytest.raises(UsageError, match="observers"):
        tune_kernel("vadd", VADD, 16, _vadd_args(), {"k": [1]}, observers=[object()], db=db_url(tmp_path))
    with pytest.raises(UsageError, match="unknown option"):
        tune_kernel("vadd", VADD, 16, _vadd_args(), {"k": [1]}, no_such_option=1, db=db_url(tmp_path))


def test_missing_source_file(tmp_path):
    with pytest.raises(UsageError, match="kernel source file 'no_such_kernel.c' does not exist"):
        tune_kernel("vadd", "no_such_kernel.c", 16, _vadd_args(), {"k": [1]}, db=db_url(tmp_path))


def test_source_from_a_file_with_a_local_include(tmp_path):
    (tmp_path / "scale.h").write_text("#define SCALE 2.0f\n")
    (tmp_path / "k.c").write_text('#include "scale.h"\n' + VADD.replace("* k;", "* k * SCALE;"))
    a = _vadd_args()
    results, env = tune_kernel("vadd", str(tmp_path / "k.c"), 16, a, {"k": [1, 3]}, db=db_url(tmp_path), quiet=True,
                               answer=[a[1] * 6, None, None], strategy="brute_force")
    assert [r["k"] for r in results] == [3] and env["failed"][0]["status"] == "WRONG_RESULT"


# -- units: defines, grid, timing convention, marshalling, verification --------------------------------
def test_defines_grid_and_extern_c_wrapping():
    args = _vadd_args()
    k = UserKernel("vadd", VADD, "CUDA", (1000, "rows"), args, {"block_size_x": [128], "rows": [3], "u": [2]},
                   grid_div=(None, ["u"], None))
    cfg = {"block_size_x": 128, "rows": 3, "u": 2}
    assert k.grid(cfg) == (8, 2, 1) and k.block(cfg) == (128, 1, 1)
    src = k.source(cfg)
    assert src.startswith("#define grid_size_x 8\n#define grid_size_y 2\n#define grid_size_z 1\n"
                          "#define block_size_x 128\n#define block_size_y 1\n#define block_size_z 1\n")
    assert '#define rows 3\n#define u 2\n#define kernel_tuner 1\n#line 1 "<kernel_string>"\n' in src
    c = UserKernel("vadd", VADD, "C", 16, args, {"k": [1]})
    assert c.source({"k": 1}).count('extern "C" {') == 1
    assert 'extern "C"' not in UserKernel("vadd", VADD, "C", 16, args, {"k": [1]}, compiler="gcc").source({"k": 1})
    only = UserKernel("vadd", VADD, "C", 16, args, {"k": [1, 2]}, defines={"K2": "k * 2"}, compiler="gcc")
    assert only.source({"k": 2}).startswith('#define K2 2 * 2\n#line 1 "<kernel_string>"\n')


def test_block_limit_and_callable_restrictions():
    args = _vadd_args()
    k = UserKernel("vadd", VADD, "CUDA", 64, args, {"block_size_x": [256, 512], "block_size_y": [1, 2, 4]},
                   restrictions=[lambda block_size_x, block_size_y: block_size_y != 2], max_threads=1024)
    assert sorted((c.payload["block_size_x"], c.payload["block_size_y"]) for c in k.space().enumerate()) == \
        [(256, 1), (256, 4), (512, 1)]
    whole = UserKernel("vadd", VADD, "C", 64, args, {"a": [1, 2, 3]}, restrictions=lambda p: p["a"] != 2)
    assert [c.payload["a"] for c in whole.space().enumerate()] == [1, 3]


def test_c_timing_convention_is_read_from_the_declaration():
    assert detect_c_timing("float f(int *x) {}", "f", None) == ("kernel", "float")
    assert detect_c_timing("double\nf (int *x) {}", "f", None) == ("kernel", "double")
    assert detect_c_timing("void f(int *x) {}", "f", None) == ("runner", "void")
    assert detect_c_timing("MACRO(f)", "f", None) == ("kernel", "float")
    assert detect_c_timing("float f(int *x) {}", "f", "runner") == ("runner", "void")
    with pytest.raises(UsageError, match="unknown timing 'wall'"):
        detect_c_timing("void f() {}", "f", "wall")


def test_scalars_are_passed_by_value_with_their_c_types(tmp_path):
    from autotune.runners.c import _build

    src = """
#include <stdint.h>
void f(double *out, int8_t a, uint16_t b, int64_t c, float d, double e, uint64_t g) {
  out[0] = a; out[1] = b; out[2] = (double)c; out[3] = d; out[4] = e; out[5] = (double)g;
}
"""
    so, err, _ = _build(["gcc"], ("-O1", "-shared", "-fPIC"), src, tmp_path, 60)
    assert so, err
    args = [np.zeros(6), np.int8(-5), np.uint16(65000), np.int64(-(2**40)), np.float32(1.5), np.float64(2.25),
            np.uint64(2**63)]
    times, out = run_user_function(so, "f", args, "void", "runner", Protocol(warmup=0, min_repeats=2, max_repeats=2,
                                                                              min_time_s=0), [0])
    assert len(times) == 2
    assert out[0].tolist() == [-5, 65000, -(2**40), 1.5, 2.25, 2.0**63]


def test_a_function_returning_its_time_must_return_a_time(tmp_path):
    from autotune.runners.c import _build

    so, err, _ = _build(["gcc"], ("-O1", "-shared", "-fPIC"), "float f(void) { return -1.0f; }\n"
                        "float g(void) { return 0.5f; }\n", tmp_path, 60)
    assert so, err
    fast = Protocol(warmup=0, min_repeats=3, max_repeats=3, min_time_s=0)
    times, _ = run_user_function(so, "g", [], "float", "kernel", fast, [])
    assert times == [0.0005] * 3
    with pytest.raises(ValueError, match="must return its own time in milliseconds"):
        run_user_function(so, "f", [], "float", "kernel", fast, [])


def test_verification_matches_kernel_tuner():
    ans = [np.array([1.0, 2.0], dtype=np.float32), None]
    assert verify_outputs(ans, {0: np.array([1.0, 2.0 + 1e-7], dtype=np.float32)}, 1e-6) == ""
    assert "1 of 2 values differ" in verify_outputs(ans, {0: np.array([1.0, 2.5], dtype=np.float32)}, 1e-6)
    assert verify_outputs(ans, {0: np.zeros(2, np.float32)}, 1e-6, verify=lambda a, r, atol: True) == ""
    assert "rejected" in verify_outputs(ans, {0: np.zeros(2, np.float32)}, 1e-6, verify=lambda a, r: False)


def test_strategy_mapping_and_exhaustive_default():
    assert choose_search(None, "xgb", False) == ("grid", None)
    assert choose_search(None, "xgb", True) == ("evolutionary", "xgb")
    assert choose_search("brute_force", "xgb", True) == ("grid", None)
    assert choose_search("random_sample", "xgb", True) == ("random", None)
    assert choose_search("genetic_algorithm", "xgb", True) == ("evolutionary", "xgb")
    assert choose_search("simulated_annealing", "xgb", True) == ("mcmc", "xgb")
    assert read_source("void f() {}") == ("void f() {}", None)
