"""CRunner: real gcc builds, isolated runs, timing protocol, checks; planted crashing and hanging kernels."""

import math

import numpy as np
import pytest

from autotune.errors import UsageError
from autotune.runners.c import CRunner
from autotune.runners.timing import Protocol
from autotune.search_spaces.kernels import Softmax, kernel_problem
from autotune.types import Candidate, Status

FAST = Protocol(warmup=1, min_repeats=3, max_repeats=20, min_time_s=0.01, budget_s=2.0)

CRASH = "void kernel(const float *x, float *y) { volatile float *p = (float *)0; *p = 1.0f; y[0] = x[0]; }\n"
HANG = "void kernel(const float *x, float *y) { volatile int k = 1; while (k) { } y[0] = x[0]; }\n"
WRONG = "void kernel(const float *x, float *y) { for (long i = 0; i < ROWS * COLS; ++i) y[i] = 0.5f; }\n"


class PlantedSoftmax(Softmax):
    """Softmax whose ACC knob plants faults: 2 segfaults, 4 hangs, 8 does not compile, 16 gives wrong results."""

    def c_source(self, cfg):
        acc = cfg["ACC"]
        if acc == 2:
            return CRASH
        if acc == 4:
            return HANG
        if acc == 8:
            return "void kernel(const float *x, float *y) { this is not C; }\n"
        if acc == 16:
            return f"#define ROWS {self.shape['rows']}L\n#define COLS {self.shape['cols']}L\n" + WRONG
        return super().c_source(cfg)


def planted(**kw):
    t = PlantedSoftmax("16,40", "cpu", threads=1)
    return t, CRunner(t, protocol=FAST, run_timeout_s=kw.pop("run_timeout_s", 3.0), **kw)


def cfg(t, acc):
    return Candidate({**t.default_config(), "ACC": acc})


def test_planted_faults_are_classified_and_the_batch_goes_on():
    t, runner = planted()
    try:
        batch = [cfg(t, 2), cfg(t, 1), cfg(t, 4), cfg(t, 8), cfg(t, 16), cfg(t, 32)]
        ms = runner.measure(t.task, batch)
        assert [m.status for m in ms] == [Status.RUNTIME_ERROR, Status.OK, Status.TIMEOUT, Status.COMPILE_ERROR,
                                          Status.WRONG_RESULT, Status.OK]
        assert "SIGSEGV" in ms[0].error
        assert "3 s" in ms[2].error and ms[2].run_s >= 3.0
        assert "error" in ms[3].error.lower()
        assert "differ" in ms[4].error and ms[4].cost is None
        # the runner keeps working after a crash and a hang
        again = runner.measure(t.task, [cfg(t, 1)])[0]
        assert again.ok and again.build_s == 0.0  # the shared object was cached
    finally:
        runner.close()


def test_measurement_carries_protocol_times_and_device():
    t, runner = planted()
    try:
        m = runner.measure(t.task, [cfg(t, 1)])[0]
        assert m.ok and 3 <= len(m.times) <= 20 and m.cost == float(np.median(m.times))
        assert m.meta["protocol"]["min_repeats"] == 3 and m.meta["protocol"]["statistic"] == "median"
        assert m.meta["gflops"] > 0 and m.meta["repeats"] == len(m.times)
        assert m.build_s > 0 and m.run_s > 0
        props = runner.device.properties
        assert runner.device.kind == "cpu" and props["cores"] >= 1 and props["compiler"] and "flags" in props
        invalid = runner.measure(t.task, [Candidate({"ACC": 3})])[0]
        assert invalid.status is Status.INVALID and invalid.error
        with pytest.raises(UsageError):
            runner.measure(Softmax("4,4", "cpu").task, [cfg(t, 1)])
    finally:
        runner.close()


@pytest.mark.parametrize("name,shape", [("gemm", "37,70,29"), ("conv2d", "2,3,9,10,5,3,2,stride=2,pad=1"),
                                        ("softmax", "9,77")])
def test_random_candidates_are_correct_or_classified(name, shape):
    space, t = kernel_problem(name, shape, "cpu")
    runner = CRunner(t, protocol=FAST, run_timeout_s=20)
    try:
        rng = np.random.default_rng(11)
        cands = [space.initial()] + [space.sample(rng) for _ in range(5)]
        ms = runner.measure(t.task, cands)
        for m in ms:
            assert m.status in (Status.OK, Status.TIMEOUT), (m.candidate.payload, m.status, m.error)
            if m.ok:
                assert math.isfinite(m.cost) and m.cost > 0
        assert sum(m.ok for m in ms) >= 5
    finally:
        runner.close()


@pytest.mark.slow
@pytest.mark.parametrize("name,shape", [("gemm", "129,257,65"), ("gemm", "1,300,7"), ("conv2d", "1,16,30,30,24,5,5,pad=2"),
                                        ("conv2d", "3,4,8,8,2,1,1"), ("softmax", "33,1000"), ("softmax", "1,3")])
def test_many_random_candidates_are_correct(name, shape):
    space, t = kernel_problem(name, shape, "cpu")
    runner = CRunner(t, protocol=FAST, run_timeout_s=30)
    try:
        rng = np.random.default_rng(3)
        ms = runner.measure(t.task, [space.sample(rng) for _ in range(24)])
        bad = [(m.candidate.payload, m.status, m.error[:200]) for m in ms if not m.ok]
        assert not bad
    finally:
        runner.close()


def test_gemm_blis_like_point_runs_and_is_correct():
    """The register-blocked micro-kernel at the machine's widest vector (what tuning converges to) compiles,
    runs and matches the reference beside the default. Not a timing test: how much faster it is, is
    measured by scripts/bench_kernels.py (a comparison of two timings fails on a loaded 2-core machine)."""
    space, t = kernel_problem("gemm", "192,192,192", "cpu", threads=1)
    runner = CRunner(t, protocol=FAST)
    try:
        vw = max(space.values[space.names.index("VW")])
        mr = 6 if vw < 16 else 12
        good = {**t.default_config(), "VW": vw, "NV": 2, "MR": mr, "KC": 192, "MC": 96, "unroll": 4}
        d, g = runner.measure(t.task, [space.initial(), space.candidate(good)])
        assert d.ok and g.ok, (d.error, g.error)
        assert g.candidate.payload["VW"] == vw and g.cost > 0
    finally:
        runner.close()
