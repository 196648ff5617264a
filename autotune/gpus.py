"""A small table of known GPU properties, looked up by (a part of) the device's name.

Values from the vendors' specification sheets: architecture, compute capability, SM count,
memory bandwidth (GB/s), base and boost clocks (MHz), L2 size (KiB), memory (GiB), FP32
peak (TFLOP/s). Laptop parts vary with the power limit; the table holds the top bin.
"""

from __future__ import annotations

import re

from autotune.types import Device

KNOWN_GPUS: dict[str, dict] = {
    "RTX 2080 Ti": {"vendor": "NVIDIA", "architecture": "Turing", "compute_capability": "7.5", "sm_count": 68,
                    "memory_bandwidth_gbs": 616.0, "base_clock_mhz": 1350, "boost_clock_mhz": 1545,
                    "l2_kib": 5632, "memory_gib": 11, "fp32_tflops": 13.4},
    "TITAN RTX": {"vendor": "NVIDIA", "architecture": "Turing", "compute_capability": "7.5", "sm_count": 72,
                  "memory_bandwidth_gbs": 672.0, "base_clock_mhz": 1350, "boost_clock_mhz": 1770,
                  "l2_kib": 6144, "memory_gib": 24, "fp32_tflops": 16.3},
    "RTX 3060 Laptop": {"vendor": "NVIDIA", "architecture": "Ampere", "compute_capability": "8.6", "sm_count": 30,
                        "memory_bandwidth_gbs": 336.0, "base_clock_mhz": 1283, "boost_clock_mhz": 1703,
                        "l2_kib": 3072, "memory_gib": 6, "fp32_tflops": 13.1},
    "RTX 3090": {"vendor": "NVIDIA", "architecture": "Ampere", "compute_capability": "8.6", "sm_count": 82,
                 "memory_bandwidth_gbs": 936.0, "base_clock_mhz": 1395, "boost_clock_mhz": 1695,
                 "l2_kib": 6144, "memory_gib": 24, "fp32_tflops": 35.6},
}


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def gpu_properties(name: str) -> dict:
    """The known properties of the GPU named ``name`` ("NVIDIA GeForce RTX 3090", "RTX_3090"...),
    the longest matching table entry winning; {} for an unknown GPU."""
    n = _norm(name)
    tokens = set(n.split())
    for key in sorted(KNOWN_GPUS, key=len, reverse=True):
        if set(_norm(key).split()) <= tokens:  # word order free: "RTX_Titan" is the TITAN RTX
            return {"model": key, **KNOWN_GPUS[key]}
    # labels written without spaces (RTX3090)
    squashed = n.replace(" ", "")
    for key in sorted(KNOWN_GPUS, key=len, reverse=True):
        if _norm(key).replace(" ", "") in squashed:
            return {"model": key, **KNOWN_GPUS[key]}
    return {}


def device_properties(d: Device) -> dict:
    """A device's properties under the names of this table, filled from it for GPUs probed without them."""
    props = dict(d.properties or {})
    # the keys runners/cuda.py probes (sms, cc, clock_khz) in this module's names
    if "sms" in props and "sm_count" not in props:
        props["sm_count"] = props["sms"]
    cc = props.get("cc")
    if isinstance(cc, (list, tuple)) and len(cc) == 2 and "compute_capability" not in props:
        props["compute_capability"] = f"{cc[0]}.{cc[1]}"
    if isinstance(props.get("clock_khz"), (int, float)) and "boost_clock_mhz" not in props:
        props["boost_clock_mhz"] = props["clock_khz"] / 1000.0
    if isinstance(props.get("l2_bytes"), (int, float)) and "l2_kib" not in props:
        props["l2_kib"] = props["l2_bytes"] / 1024.0
    if "architecture" not in props and d.kind == "cuda":  # a device row from before the GPU table
        props = {**gpu_properties(d.name), **props}
    return props
