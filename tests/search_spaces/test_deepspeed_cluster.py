"""The dgx-a100-deepspeed-xN preset: the DGX A100 nodes of dgx-a100-xN running Megatron-DeepSpeed, whose
device is the A100 with that stack's GEMM efficiency and fixed cost per kernel (fitted on BLOOM's single-node check)."""

import dataclasses
import json

import pytest

from autotune.errors import UsageError
from autotune.search_spaces.parallel.clusters import BUS_EFFICIENCY, DEVICES, get_cluster, preset_names

# scripts/validate_simulator.py --calibrate bloom-single-node
DEEPSPEED_GEMM_EFFICIENCY, DEEPSPEED_LAUNCH_S = 0.6518, 6.565e-05
# BLOOM's notes' CUDA context on the A100; validate_simulator.fit_allocator_slack
DEEPSPEED_CONTEXT, DEEPSPEED_SLACK = 1573 * 2**20, 0.1662


def test_the_preset_is_the_dgx_a100_with_the_deepspeed_gemm_efficiency():
    assert "dgx-a100-deepspeed-xN" in preset_names()
    assert DEVICES["A100"].gemm_efficiency != DEEPSPEED_GEMM_EFFICIENCY  # the Megatron-LM preset keeps its own figure
    for n in (1, 2, 8, 35):
        ds, a100 = get_cluster(f"dgx-a100-deepspeed-x{n}"), get_cluster(f"dgx-a100-x{n}")
        assert (ds.name, ds.nodes, ds.per_node, ds.devices) == (f"dgx-a100-deepspeed-x{n}", n, 8, 8 * n)
        assert ds.device.name == "A100-DeepSpeed" and ds.device.gemm_efficiency == DEEPSPEED_GEMM_EFFICIENCY
        assert ds.device.launch_s == DEEPSPEED_LAUNCH_S != DEVICES["A100"].launch_s  # the stack's, not the GPU's
        # the A100's hardware figures: peaks, memory, bandwidth, multiprocessors
        assert dataclasses.replace(ds.device, name="A100", gemm_efficiency=DEVICES["A100"].gemm_efficiency,
                                   launch_s=DEVICES["A100"].launch_s, context_bytes=0.0, allocator_slack=0.0,
                                   hardware="") == DEVICES["A100"]
        # what the stack's processes hold beyond their tensors: BLOOM's notes' CUDA context and the fitted slack
        assert (ds.device.context_bytes, ds.device.allocator_slack) == (DEEPSPEED_CONTEXT, DEEPSPEED_SLACK)
        assert ds.device.flops_fp16 == 312e12 and ds.device.memory_bytes == 80 * 2**30 and ds.device.sm_count == 108
        assert ds.device.hardware_name == "A100" and DEVICES["A100"].hardware_name == "A100"
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


def test_a_stack_device_in_a_cluster_file_finds_its_hardwares_measurements_and_nccl_figures(tmp_path):
    """A user's own stack figures for an H100 ("H100-mystack", hardware H100): measured H100 collectives apply
    to it and NCCL's H100 bus efficiency is its default, as on the dgx-h100 preset; without ``hardware`` the
    device is its own hardware and gets neither."""
    from autotune.db import open_database
    from autotune.db.calibration import record
    from autotune.drivers.parallel import calibrate
    from autotune.types import Device

    spec = get_cluster("dgx-h100-x1").to_json()
    del spec["bus_efficiency"]
    spec["device"] = dict(spec["device"], name="H100-mystack", gemm_efficiency=0.45, hardware="H100")
    (tmp_path / "stack.json").write_text(json.dumps(spec))
    stack = get_cluster(str(tmp_path / "stack.json"))
    assert stack.device.hardware_name == "H100" and stack.device.gemm_efficiency == 0.45
    assert stack.bus_efficiency == get_cluster("dgx-h100-x1").bus_efficiency > BUS_EFFICIENCY
    (tmp_path / "again.json").write_text(json.dumps(stack.to_json()))
    assert get_cluster(str(tmp_path / "again.json")).device == stack.device  # written and read back
    del spec["device"]["hardware"]
    (tmp_path / "own.json").write_text(json.dumps(spec))
    own = get_cluster(str(tmp_path / "own.json"))
    assert own.device.hardware_name == "H100-mystack" and own.bus_efficiency == BUS_EFFICIENCY

    db = open_database(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        record(db, Device("NVIDIA H100 80GB HBM3", "cuda", {}), collectives=[("allreduce", 8, 1e3, 1e-4),
                                                                          ("allreduce", 8, 1e9, 0.01)])
        assert calibrate(stack, db)[1] == {"op_times": 0, "collectives": 2}
        assert calibrate(own, db)[1] == {"op_times": 0, "collectives": 0}
    finally:
        db.close()


def test_a_cluster_files_device_hardware_must_be_a_name(tmp_path):
    spec = get_cluster("dgx-a100-x1").to_json()
    for bad in (7, 0, None, False, ["A100"]):  # only a name, or "" (its own hardware, as to_json writes it)
        spec["device"] = dict(spec["device"], hardware=bad)
        (tmp_path / "bad.json").write_text(json.dumps(spec))
        with pytest.raises(UsageError, match="device.hardware"):
            get_cluster(str(tmp_path / "bad.json"))


def test_a_cluster_files_device_may_give_its_context_and_allocator_slack_in_bytes_and_as_a_share(tmp_path):
    spec = get_cluster("dgx-a100-x1").to_json()
    spec["device"] = dict(spec["device"], context_bytes=2e9, allocator_slack=0.2)
    (tmp_path / "c.json").write_text(json.dumps(spec))
    dev = get_cluster(str(tmp_path / "c.json")).device
    assert (dev.context_bytes, dev.allocator_slack) == (2e9, 0.2)
    for field, bad, says in (("context_bytes", 1.5, "give it in bytes"), ("context_bytes", -1, "non-negative"),
                             ("allocator_slack", 1.5, "at most 1"), ("allocator_slack", "some", "must be a finite"),
                             ("context_bytes", 90 * 2**30, "leaves nothing of device.memory_bytes")):
        spec["device"] = dict(get_cluster("dgx-a100-x1").to_json()["device"], **{field: bad})
        (tmp_path / "bad.json").write_text(json.dumps(spec))
        with pytest.raises(UsageError, match=says):
            get_cluster(str(tmp_path / "bad.json"))


def test_clusters_that_differ_in_hardware_or_nccl_figures_log_their_trials_on_different_devices():
    from autotune.runners.simulator import cluster_device

    a100, ds = cluster_device(get_cluster("dgx-a100-x1")), cluster_device(get_cluster("dgx-a100-deepspeed-x1"))
    assert ds.properties["hardware"] == "A100" and ds.properties["device"] == "A100-DeepSpeed" and ds.key != a100.key
    slower = dataclasses.replace(get_cluster("dgx-a100-x1"), bus_efficiency=0.5)
    assert cluster_device(slower).properties["bus_efficiency"] == 0.5 and cluster_device(slower).key != a100.key
    assert cluster_device(get_cluster("dgx-a100-x1")).key == a100.key  # the same cluster, the same device
    # what fits depends on the context and the allocator's slack: the stack's preset without them is another device
    assert (ds.properties["context_bytes"], ds.properties["allocator_slack"]) == (DEEPSPEED_CONTEXT, DEEPSPEED_SLACK)
    assert "allocator_slack" not in a100.properties
    # two clusters that differ in them alone (neither a preset) log apart; the digest of a cluster's figures
    # leaves them out (a cluster without them keeps the key it had before they existed)
    roomy = dataclasses.replace(get_cluster("dgx-a100-x1"), bus_efficiency=0.5)
    tight = dataclasses.replace(roomy, device=dataclasses.replace(roomy.device, context_bytes=2e9, allocator_slack=0.2))
    assert "context_bytes" not in repr(roomy) and cluster_device(roomy).properties["figures"] == \
        cluster_device(tight).properties["figures"]
    assert cluster_device(tight).key != cluster_device(roomy).key
    assert cluster_device(tight).properties["allocator_slack"] == 0.2
    # and on its cost per kernel: a stack's calibrated one is part of the key, the default is not
    assert ds.properties["launch_s"] == DEEPSPEED_LAUNCH_S and "launch_s" not in a100.properties
    quicker = get_cluster("dgx-a100-deepspeed-x1")
    quicker.device = dataclasses.replace(quicker.device, launch_s=1e-5)
    assert cluster_device(quicker).key != ds.key
