"""CRunner's check against the numpy reference catches kernels that are wrong in small ways: one output
value off (an edge-tile bug), or right only on the first call (a kernel that accumulates into its output
instead of overwriting it; the output checked is the last timed call's). The wrong kernels are fakes."""

from autotune.runners.c import CRunner
from autotune.runners.timing import Protocol
from autotune.search_spaces.kernels import Gemm
from autotune.types import Status

FAST = Protocol(warmup=1, min_repeats=3, max_repeats=5, min_time_s=0.0, budget_s=2.0)


class FakeWrongGemm(Gemm):
    """The generated gemm, then ``tail`` (C statements on the output C) after it (a fake: for tests only)."""

    tail = ""

    def c_source(self, cfg):
        src = super().c_source(cfg).replace("void kernel(", "static void kernel_inner(")
        return src + ("void kernel(const float *restrict A, const float *restrict B, float *restrict C) {\n"
                      f"  kernel_inner(A, B, C);\n  {self.tail}\n}}\n")


class FakeLastValueOffGemm(FakeWrongGemm):
    tail = "C[M * N - 1] += 0.01f;"  # one value of 1,600, ten times the tolerance


class FakeAccumulatingGemm(FakeWrongGemm):
    """Right on the first call, then C = A.B + the last call's C."""

    tail = "static float prev[M * N]; for (long i = 0; i < M * N; ++i) { C[i] += prev[i]; prev[i] = C[i]; }"


def measure(template_class):
    t = template_class("40,40,64", "cpu", threads=1)
    runner = CRunner(t, protocol=FAST)
    try:
        return t, runner.measure(t.task, [t.space().initial()])[0]
    finally:
        runner.close()


def test_the_generated_gemm_passes_and_a_wrapped_one_too():
    _, m = measure(FakeWrongGemm)  # the wrapper alone changes nothing
    assert m.status is Status.OK, m.error


def test_one_value_off_is_a_wrong_result_naming_it():
    t, m = measure(FakeLastValueOffGemm)
    assert m.status is Status.WRONG_RESULT and m.cost is None
    assert m.error.startswith("1 of 1600 values differ") and "worst at (39, 39)" in m.error
    assert m.times  # it was timed: the check is on the timed calls' output


def test_a_kernel_right_only_on_its_first_call_is_a_wrong_result():
    _, m = measure(FakeAccumulatingGemm)
    assert m.status is Status.WRONG_RESULT and "values differ" in m.error
