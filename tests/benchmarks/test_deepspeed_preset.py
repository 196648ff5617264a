"""The dgx-a100-deepspeed-xN preset's GEMM efficiency is what scripts/validate_simulator.py's calibration fits
on BLOOM's single-node check (bloom-single-node), as the A100 preset's is its fit on Megatron-LM's runs."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import validate_simulator as vs

from autotune.search_spaces.parallel.clusters import DEVICES, get_cluster


def test_the_deepspeed_preset_is_the_calibrations_fit_on_bloom_single_node():
    assert "bloom-single-node" in vs.DEFAULT_CALIBRATION  # the bare --calibrate fits the A100-DeepSpeed on it
    devices = vs.fresh_devices()
    fitted = vs.calibrate("bloom-single-node", devices)
    assert abs(fitted - DEVICES["A100-DeepSpeed"].gemm_efficiency) < 2e-3
    assert get_cluster("dgx-a100-deepspeed-x1").device.gemm_efficiency == DEVICES["A100-DeepSpeed"].gemm_efficiency
