"""scripts/nccl_fill_experiment.py: its fill term is zero where it is off, and otherwise adds one slice of
at most C per ring step but the first."""

import nccl_fill_experiment as fx
import pytest

from autotune.runners.simulator import nccl


@pytest.fixture
def fill():
    before = fx.FILL_S[0]
    yield fx.FILL_S
    fx.FILL_S[0] = before


def test_no_fill_is_the_simulators_ring(fill):
    fill[0] = 0.0
    for seconds in (1e-6, 1e-3):
        assert fx.ring_time_with_fill(14, 0, seconds, "nvlink", 0.8, 1.0) == nccl.ring_time(14, 0, seconds, "nvlink", 0.8, 1.0)


def test_fill_is_a_slice_per_step_capped_at_c(fill):
    fill[0] = 10e-6
    base = nccl.ring_time(14, 0, 14e-3, "nvlink", 0.8, 1.0)  # 1 ms per step: the slice is capped at C
    assert fx.ring_time_with_fill(14, 0, 14e-3, "nvlink", 0.8, 1.0) == pytest.approx(base + 13 * 10e-6 / 0.8)
    small = nccl.ring_time(14, 0, 14e-6, "nvlink", 0.8, 1.0)  # 1 us per step: the whole step is one slice
    assert fx.ring_time_with_fill(14, 0, 14e-6, "nvlink", 0.8, 1.0) == pytest.approx(small + 13 * 1e-6 / 0.8)
