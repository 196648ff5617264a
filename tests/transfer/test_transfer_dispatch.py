"""Device similarity and best_config on small recorded caches built in the test (and the bundled pnpoly cache)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import autotune
from autotune.db import open_database
from autotune.db.logs import import_kt
from autotune.errors import UsageError
from autotune.gpus import gpu_properties
from autotune.search_spaces.replay import KTCache
from autotune.testing.caches import NAMES, ampere_time, turing_time, write_cache
from autotune.transfer.dispatch import best_config
from autotune.transfer.similarity import measured_similarity, property_similarity, rank_similar
from autotune.types import Candidate, Device, Measurement, Status


@pytest.fixture
def db(tmp_path):
    database = open_database(f"sqlite:///{tmp_path / 'a.db'}")
    yield database
    database.close()


def test_gpu_table_names_and_replay_devices_carry_properties():
    assert gpu_properties("NVIDIA TITAN RTX")["architecture"] == "Turing"
    assert gpu_properties("RTX_Titan")["model"] == "TITAN RTX"
    assert gpu_properties("NVIDIA GeForce RTX 3060 Laptop GPU")["sm_count"] == 30
    assert gpu_properties("Some Unknown Accelerator") == {}
    assert gpu_properties("NVIDIA A100-PCIE-40GB")["model"] == "A100"
    assert gpu_properties("A100-SXM4-80GB")["model"] == "A100 80GB"
    assert gpu_properties("NVIDIA A1000") == {"vendor": "NVIDIA"}  # a name containing another's is not that GPU
    # not in the table: what the name still tells
    assert gpu_properties("gfx90a:sramecc+:xnack-") == {"vendor": "AMD", "architecture": "CDNA2", "gfx": "gfx90a"}
    assert gpu_properties("AMD Radeon PRO W9999") == {"vendor": "AMD"}
    assert gpu_properties("AMD Instinct MI250X")["vendor"] == "AMD"
    assert gpu_properties("W7800")["architecture"] == "RDNA3" and gpu_properties("RTX_A4000")["sm_count"] == 48
    runner = autotune.ReplayRunner("example:pnpoly-rtx3090")
    assert runner.device.properties["compute_capability"] == "8.6"
    assert runner.device.properties["sm_count"] == 82


def test_property_similarity_prefers_same_architecture_and_separates_vendors():
    titan, ti, r3090 = (Device(NAMES[k], "cuda", gpu_properties(NAMES[k])) for k in ("turing", "turing2", "ampere"))
    same, _ = property_similarity(ti, titan)
    other, why = property_similarity(ti, r3090)
    assert same > other
    amd = Device("AMD Instinct MI100", "cuda", {"vendor": "AMD", "architecture": "CDNA"})
    assert property_similarity(ti, amd)[0] < 0.1
    assert property_similarity(ti, Device("x86", "cpu", {}))[0] == 0.0
    assert any("architectures" in w for w in why)


def test_measured_similarity_is_spearman_on_common_configs():
    cs = [Candidate({"i": i}) for i in range(10)]
    a = [Measurement(c, Status.OK, cost=float(i + 1)) for i, c in enumerate(cs)]
    b = [Measurement(c, Status.OK, cost=float(10 - i)) for i, c in enumerate(cs)]
    assert measured_similarity(a, a)[0] == pytest.approx(1.0)
    assert measured_similarity(a, b)[0] == pytest.approx(-1.0)
    assert measured_similarity(a[:3], a[:3]) == (None, 3)


def test_best_config_measured_transfer_and_default(tmp_path, db):
    task, *_ = import_kt(db, write_cache(tmp_path / "titan.json.gz", NAMES["turing"], turing_time))
    import_kt(db, write_cache(tmp_path / "r3090.json.gz", NAMES["ampere"], ampere_time))
    own = best_config(task, NAMES["turing"], db=db)
    assert own.source == "measured" and own.config == {"a": 4, "b": 64, "c": 1}
    # the 2080 Ti never measured it: the most similar device (Turing, like the TITAN RTX) is the source
    ti = best_config(task.name, NAMES["turing2"], db=db)
    assert ti.source == "transfer" and ti.from_devices[0]["device"] == NAMES["turing"]
    assert ti.config == {"a": 4, "b": 64, "c": 1}
    # a 3060 Laptop (Ampere) borrows from the RTX 3090
    lap = best_config(task, NAMES["ampere_laptop"], db=db)
    assert lap.from_devices[0]["device"] == NAMES["ampere"] and lap.config == {"a": 1, "b": 128, "c": 0}
    assert best_config(task, NAMES["turing"], db=db).to_json()["cost"] == pytest.approx(1.0e-3, rel=0.02)


def test_best_config_default_and_errors(tmp_path, db):
    with pytest.raises(UsageError, match="unknown task"):
        best_config("nothing", "x", db=db)
    task, *_ = import_kt(db, write_cache(tmp_path / "titan.json.gz", NAMES["turing"], turing_time))
    for bad in ({"margin": -1}, {"margin": float("nan")}, {"sources": 0}, {"sources": 1.5}):
        with pytest.raises(UsageError, match=f"^{next(iter(bad))} must be"):
            best_config(task, NAMES["turing2"], db=db, **bad)
    # a CPU never answers for the GPU's task (similarity 0): the default, or an error that says why
    cpu = Device("my laptop", "cpu", {})
    assert best_config(task, cpu, db=db, default={"a": 1, "b": 16, "c": 0}).source == "default"
    with pytest.raises(UsageError, match=r"no device like 'my laptop' \(cpu\).*only devices of kind cuda"):
        best_config(task, cpu, db=db)
    # a name of no known kind is compared with every device alike
    assert best_config(task, "Some Unknown Accelerator", db=db).source == "transfer"
    with pytest.raises(UsageError, match="no database file"):  # a query creates no database
        best_config(task, cpu, db=f"sqlite:///{tmp_path / 'missing.db'}")
    assert not (tmp_path / "missing.db").exists()


def test_measurements_of_the_target_override_properties(tmp_path, db):
    """A target with a few measurements of its own is matched by rank correlation, not properties."""
    task, *_ = import_kt(db, write_cache(tmp_path / "titan.json.gz", NAMES["turing"], turing_time))
    import_kt(db, write_cache(tmp_path / "r3090.json.gz", NAMES["ampere"], ampere_time))
    # an unknown GPU whose first (poor) measurements rank like the RTX 3090's
    dev = Device("Mystery GPU", "cuda", {})
    cache = KTCache.load(write_cache(tmp_path / "m.json.gz", "Mystery GPU", lambda a, b, c: 3 * ampere_time(a, b, c)))
    from autotune.runners.replay import record_measurement

    worst = sorted(cache.records.items(), key=lambda kv: -kv[1]["time"])[:8]
    db.add_trials(task, dev, [record_measurement(cache, Candidate(cache.config(v)), r) for v, r in worst])
    res = best_config(task, dev, db=db)
    assert res.source == "measured"  # it has measurements: its own best
    from autotune.db import transfer as store

    trials = store.task_trials(db, task)
    others = [d for d, _ in trials.values() if d.key != dev.key]
    ranked = rank_similar(dev, others, {k: ms for k, (_, ms) in trials.items()}, trials[dev.key][1])
    assert ranked[0].device.name == NAMES["ampere"] and ranked[0].rank_correlation > 0.9
    assert ranked[1].rank_correlation < ranked[0].rank_correlation


def test_pnpoly_recorded_data_picks_the_correlated_source(tmp_path, db):
    """Bundled pnpoly (RTX 3090) plus a perturbed copy as a TITAN RTX: an RTX 3060 Laptop borrows from the 3090,
    a 2080 Ti from the TITAN RTX, each getting that source's best configuration."""
    src = KTCache.load("example:pnpoly-rtx3090")
    rng = np.random.default_rng(0)
    doc = {"device_name": NAMES["turing"], "kernel_name": src.kernel_name, "problem_size": src.problem_size,
           "tune_params_keys": src.param_names, "tune_params": src.param_values, "cache": {}}
    for values, rec in src.records.items():
        rec = dict(rec)
        if not isinstance(rec["time"], str):
            rec["time"] = float(rec["time"]) * float(rng.uniform(0.7, 1.3))
            rec["times"] = [rec["time"]]
        doc["cache"][",".join(map(str, values))] = rec
    path = tmp_path / "pnpoly_titan.json"
    path.write_text(json.dumps(doc))
    task, *_ = import_kt(db, "example:pnpoly-rtx3090")
    import_kt(db, path)
    best_3090 = autotune.best_config(task, "NVIDIA GeForce RTX 3090", db=db)
    best_titan = autotune.best_config(task, NAMES["turing"], db=db)
    assert best_3090.config != best_titan.config
    lap = autotune.best_config(task, NAMES["ampere_laptop"], db=db)
    assert lap.from_devices[0]["device"] == "NVIDIA GeForce RTX 3090" and lap.config == best_3090.config
    ti = autotune.best_config(task, NAMES["turing2"], db=db)
    assert ti.from_devices[0]["device"] == NAMES["turing"] and ti.config == best_titan.config


def test_probed_cuda_properties_are_understood():
    """Devices from runners/cuda.py carry sms/cc/clock_khz: same-architecture GPUs come out closest."""
    a = Device("Probed A", "cuda", {"cc": [8, 6], "sms": 80, "clock_khz": 1700000})
    b = Device("Probed B", "cuda", {"cc": [8, 6], "sms": 84, "clock_khz": 1650000})
    c = Device("Probed C", "cuda", {"cc": [7, 5], "sms": 30, "clock_khz": 1200000})
    assert property_similarity(a, b)[0] > property_similarity(a, c)[0]
