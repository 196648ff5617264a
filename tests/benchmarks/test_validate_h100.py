"""The H100's one published source (MosaicML's FSDP runs of MPT on H100s, scripts/published_rows.py): its rows are
simulated as they ran, the H100 preset's GEMM efficiency is that source's fit, and at the A100's share of peak every
row would be simulated faster than it ran."""

import published_results as tables
import pytest
import validate_simulator as vs
from published_rows import SOURCES
from published_runs import fresh_devices, h100

from autotune.search_spaces.parallel.clusters import DEVICES
from autotune.search_spaces.parallel.models import transformer


def test_the_h100_rows_are_the_tables_and_run_on_h100_nodes_at_the_h100_preset():
    """Every row of the table: the modelled MPT has the published parameters but its learned positions, the batch is
    micro-batch x accumulation x GPUs, and the throughput gives the MFU over the H100's 989 TFLOP/s; simulated at the
    preset, every row fits in 80 GB as it ran and the source is within 10% (MAPE: the fit's own rows)."""
    columns = zip(tables.MPT_FSDP_H100, tables.MPT_FSDP_H100_BATCH, tables.MPT_FSDP_H100_TOKENS_PER_GPU, strict=True)
    for (size, seq, gpus, mfu, micro, accumulation, _, params), batch, tokens_per_gpu in columns:
        layers, hidden, heads = tables.MPT_SHAPES[size]
        modelled = transformer(size, 1, layers, hidden, heads, seq, tables.MPT_VOCAB, kernels="flash").parameters
        assert modelled == pytest.approx(params - seq * hidden, rel=2e-3)
        assert micro * accumulation * gpus == batch
        assert 100 * (6 * params + 12 * layers * hidden * seq) * tokens_per_gpu / 989e12 == pytest.approx(mfu, rel=5e-3)
    assert SOURCES["mpt-fsdp-h100"][1] == "H100" and "mpt-fsdp-h100" in vs.DEFAULT_CALIBRATION
    devices = fresh_devices()
    assert devices["H100"].gemm_efficiency is None and h100(devices).gemm_efficiency == DEVICES["A100"].gemm_efficiency
    devices["H100"].gemm_efficiency = DEVICES["H100"].gemm_efficiency
    rows = vs.evaluate("mpt-fsdp-h100", devices, exact=True)
    assert len(rows) == 52 and all(r["fits"] for r in rows)
    assert sum(abs(r["error_pct"]) for r in rows) / len(rows) < 10.0


@pytest.mark.slow
def test_the_h100_preset_is_its_sources_fit_and_the_a100s_share_is_too_fast_on_every_row():
    devices = fresh_devices()
    at_a100_share = vs.evaluate("mpt-fsdp-h100", devices)
    assert all(r["error_pct"] > 0 for r in at_a100_share)
    fitted = vs.calibrate("mpt-fsdp-h100", devices)
    assert list(fitted) == ["gemm_efficiency"]
    assert abs(fitted["gemm_efficiency"] - DEVICES["H100"].gemm_efficiency) < 2e-3
    assert devices["A100"].gemm_efficiency == DEVICES["A100"].gemm_efficiency  # the A100's own figure does not move
