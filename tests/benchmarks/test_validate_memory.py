"""The memory sources of scripts/validate_simulator.py: BLOOM's peaks per GPU as nvidia-smi showed them, the
A100-DeepSpeed's allocator slack fitted on the single-node check's peaks alone, and the layouts of two days
of BLOOM's notes that ran or ran out of memory, held out."""

import published_results as tables
import validate_simulator as vs
from published_rows import SOURCES
from published_runs import fresh_devices

from autotune.search_spaces.parallel.clusters import DEVICES


def test_the_deepspeed_allocator_slack_is_the_least_mape_fit_on_the_single_node_peaks_alone():
    """Refitted from no slack, the fit is the preset's; the MAPE is least there (convex in the slack); the fit
    reads only the single-node source, whose rows the report marks as calibration rows."""
    devices = fresh_devices()
    devices["A100-DeepSpeed"].allocator_slack = 0.0
    assert vs.fit_allocator_slack(devices) == DEVICES["A100-DeepSpeed"].allocator_slack == 0.1662
    assert devices["A100-DeepSpeed"].context_bytes == tables.A100_CONTEXT_MIB * 2**20
    assert vs.MEMORY_FITTED_ON == "bloom-single-node-memory" and vs.MEMORY_FITTED_ON in vs.REPORT_ONLY
    rows = vs.evaluate(vs.MEMORY_FITTED_ON, devices, exact=True)
    assert [r["published"] for r in rows] == tables.BLOOM_SINGLE_NODE_MEM == [54, 54, 80]
    at = vs.fitted_mape(vs.MEMORY_FITTED_ON, devices)
    for off in (-0.01, 0.01):
        devices["A100-DeepSpeed"].allocator_slack = 0.1662 + off
        assert vs.fitted_mape(vs.MEMORY_FITTED_ON, devices) > at
    # the whole card (80 GiB) held the ten-layer row: it fits at the fit
    assert all(r["fits"] for r in rows) and rows[2]["simulated"] <= 80


def test_blooms_memory_rows_say_which_fit_and_rank_the_peaks_as_published():
    """Three of the 20 layouts ran out of memory; for the 176B shape the simulated peaks order as the published
    ones do: t8 below t4, micro-batches of 4 above 2."""
    rows = SOURCES["bloom-memory"][3](fresh_devices())
    assert len(rows) == 20 and sum(pub == 0 for _, pub, _ in rows) == 3
    peak = {label: fn()[1] for label, _, fn in rows if label.startswith("h14336 L70 a64")}
    t8, t4, t4_mb4 = (peak[f"h14336 L70 a64 {k}"] for k in ("t8 p12 mb2", "t4 p12 mb2", "t4 p12 mb4"))
    assert [d["published_gib"] for d in (t8, t4, t4_mb4)] == [40, 59, 73]
    assert t8["peak_memory_gib"] < t4["peak_memory_gib"] < t4_mb4["peak_memory_gib"]


def test_the_fp16_layouts_that_ran_fit_and_those_that_ran_out_of_memory_do_not():
    """The 21 timed layouts of 2022-02-25 ran (17 with a noted peak), three more ran out of memory; without the
    stack's context and slack the two t2 p6 d32 layouts would fit (their tensors alone under 80 GiB)."""
    devices = fresh_devices()
    rows = SOURCES["bloom-memory-fp16"][3](devices)
    assert len(rows) == 24 and [pub for _, pub, _ in rows] == [1] * 21 + [0] * 3
    results = [fn() for _, _, fn in rows]
    assert sum(d["published_gib"] is not None for _, d in results) == 17
    assert [fits for fits, _ in results] == [1.0] * 21 + [0.0] * 3
    devices["A100-DeepSpeed"].context_bytes = devices["A100-DeepSpeed"].allocator_slack = 0.0
    bare = [fn()[0] for label, _, fn in SOURCES["bloom-memory-fp16"][3](devices) if label.startswith("t2 p6 d32")]
    assert bare == [1.0, 1.0]
