"""The dgx-a100-deepspeed-xN preset: the DGX A100 nodes of dgx-a100-xN running Megatron-DeepSpeed, whose
device is the A100 with that stack's GEMM efficiency (fitted on BLOOM's single-node check)."""

import dataclasses
import json

import pytest

from autotune.errors import UsageError
from autotune.search_spaces.parallel.clusters import DEVICES, get_cluster, hardware_name, preset_names

DEEPSPEED_GEMM_EFFICIENCY = 0.5838  # scripts/validate_simulator.py --calibrate bloom-single-node


def test_the_preset_is_the_dgx_a100_with_the_deepspeed_gemm_efficiency():
    assert "dgx-a100-deepspeed-xN" in preset_names()
    assert DEVICES["A100"].gemm_efficiency == 0.8192  # the Megatron-LM preset keeps its own figure
    for n in (1, 2, 8, 35):
        ds, a100 = get_cluster(f"dgx-a100-deepspeed-x{n}"), get_cluster(f"dgx-a100-x{n}")
        assert (ds.name, ds.nodes, ds.per_node, ds.devices) == (f"dgx-a100-deepspeed-x{n}", n, 8, 8 * n)
        assert ds.device.name == "A100-DeepSpeed" and ds.device.gemm_efficiency == DEEPSPEED_GEMM_EFFICIENCY
        # the A100's hardware figures: peaks, memory, bandwidth, multiprocessors, kernel cost
        assert dataclasses.replace(ds.device, name="A100", gemm_efficiency=0.8192) == DEVICES["A100"]
        assert ds.device.flops_fp16 == 312e12 and ds.device.memory_bytes == 80 * 2**30 and ds.device.sm_count == 108
        # the same nodes and network: links, latencies and NCCL's figures
        same = {k: v for k, v in a100.to_json().items() if k not in ("name", "device")}
        assert {k: v for k, v in ds.to_json().items() if k not in ("name", "device")} == same
    for bad in ("dgx-a100-deepspeed-x0", "dgx-a100-deepspeed", "dgx-a100-deepspeed-xN", "dgx-a100-deepspeed-x2x"):
        with pytest.raises(UsageError):
            get_cluster(bad)


def test_cluster_files_name_the_deepspeed_device_or_carry_its_figures(tmp_path):
    spec = get_cluster("dgx-a100-deepspeed-x2").to_json()
    (tmp_path / "full.json").write_text(json.dumps(spec))
    assert get_cluster(str(tmp_path / "full.json")).device == DEVICES["A100-DeepSpeed"]
    spec["device"] = "A100-DeepSpeed"
    (tmp_path / "named.json").write_text(json.dumps(spec))
    assert get_cluster(str(tmp_path / "named.json")).device == DEVICES["A100-DeepSpeed"]


def test_measured_times_of_an_a100_apply_to_the_deepspeed_preset(tmp_path):
    from autotune.db import open_database
    from autotune.db.calibration import record
    from autotune.drivers.parallel import calibrate
    from autotune.types import Device

    assert hardware_name("A100-DeepSpeed") == "A100" and hardware_name("H100") == "H100"
    db = open_database(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        record(db, Device("NVIDIA A100-SXM4-80GB", "cuda", {}), collectives=[("allreduce", 8, 1e3, 1e-4),
                                                                          ("allreduce", 8, 1e9, 0.01)])
        for preset in ("dgx-a100-x1", "dgx-a100-deepspeed-x1"):
            cluster, counts = calibrate(get_cluster(preset), db)
            assert counts == {"op_times": 0, "collectives": 2} and len(cluster.collectives) == 2
            assert cluster.device.name == get_cluster(preset).device.name
    finally:
        db.close()
