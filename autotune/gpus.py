"""A small table of known GPU properties, looked up by (a part of) the device's name.

Values from the vendors' specification sheets: vendor, architecture, compute capability
(NVIDIA) or gfx target (AMD), SM count (compute units on AMD), memory bandwidth (GB/s), base and
boost clocks (MHz), L2 size (KiB), memory (GiB), FP32 vector peak (TFLOP/s). Laptop parts vary
with the power limit; the table holds the top bin. An MI250X or MI250 is two dies that HIP
shows as two devices: the table holds one die (what a kernel runs on). A bare name (A100,
V100) is the smallest memory variant.
"""

from __future__ import annotations

import re

from autotune.types import Device

KNOWN_GPUS: dict[str, dict] = {
    "GTX 1080 Ti":
    {"vendor": "NVIDIA", "architecture": "Pascal", "compute_capability": "6.1", "sm_count": 28,
        "memory_bandwidth_gbs": 484.0, "base_clock_mhz": 1480, "boost_clock_mhz": 1582, "l2_kib": 2816, "memory_gib": 11, "fp32_tflops": 11.3},
    "V100":
    {"vendor": "NVIDIA", "architecture": "Volta", "compute_capability": "7.0", "sm_count": 80,
        "memory_bandwidth_gbs": 900.0, "base_clock_mhz": 1290, "boost_clock_mhz": 1530, "l2_kib": 6144, "memory_gib": 32, "fp32_tflops": 15.7},
    "Tesla T4":
    {"vendor": "NVIDIA", "architecture": "Turing", "compute_capability": "7.5", "sm_count": 40,
        "memory_bandwidth_gbs": 320.0, "base_clock_mhz": 585, "boost_clock_mhz": 1590, "l2_kib": 4096, "memory_gib": 16, "fp32_tflops": 8.1},
    "RTX 2080 Ti":
    {"vendor": "NVIDIA", "architecture": "Turing", "compute_capability": "7.5", "sm_count": 68,
        "memory_bandwidth_gbs": 616.0, "base_clock_mhz": 1350, "boost_clock_mhz": 1545, "l2_kib": 5632, "memory_gib": 11, "fp32_tflops": 13.4},
    "TITAN RTX":
    {"vendor": "NVIDIA", "architecture": "Turing", "compute_capability": "7.5", "sm_count": 72,
        "memory_bandwidth_gbs": 672.0, "base_clock_mhz": 1350, "boost_clock_mhz": 1770, "l2_kib": 6144, "memory_gib": 24, "fp32_tflops": 16.3},
    "A100":
    {"vendor": "NVIDIA", "architecture": "Ampere", "compute_capability": "8.0", "sm_count": 108,
        "memory_bandwidth_gbs": 1555.0, "base_clock_mhz": 765, "boost_clock_mhz": 1410, "l2_kib": 40960, "memory_gib": 40, "fp32_tflops": 19.5},
    "A100 80GB":
    {"vendor": "NVIDIA", "architecture": "Ampere", "compute_capability": "8.0", "sm_count": 108,
        "memory_bandwidth_gbs": 2039.0, "base_clock_mhz": 1065, "boost_clock_mhz": 1410, "l2_kib": 40960, "memory_gib": 80, "fp32_tflops": 19.5},
    "A30":
    {"vendor": "NVIDIA", "architecture": "Ampere", "compute_capability": "8.0", "sm_count": 56,
        "memory_bandwidth_gbs": 933.0, "base_clock_mhz": 930, "boost_clock_mhz": 1440, "l2_kib": 24576, "memory_gib": 24, "fp32_tflops": 10.3},
    "A4000":
    {"vendor": "NVIDIA", "architecture": "Ampere", "compute_capability": "8.6", "sm_count": 48,
        "memory_bandwidth_gbs": 448.0, "base_clock_mhz": 735, "boost_clock_mhz": 1560, "l2_kib": 4096, "memory_gib": 16, "fp32_tflops": 19.2},
    "A6000":
    {"vendor": "NVIDIA", "architecture": "Ampere", "compute_capability": "8.6", "sm_count": 84,
        "memory_bandwidth_gbs": 768.0, "base_clock_mhz": 1455, "boost_clock_mhz": 1860, "l2_kib": 6144, "memory_gib": 48, "fp32_tflops": 38.7},
    "A40":
    {"vendor": "NVIDIA", "architecture": "Ampere", "compute_capability": "8.6", "sm_count": 84,
        "memory_bandwidth_gbs": 696.0, "base_clock_mhz": 1305, "boost_clock_mhz": 1740, "l2_kib": 6144, "memory_gib": 48, "fp32_tflops": 37.4},
    "RTX 3060 Laptop":
    {"vendor": "NVIDIA", "architecture": "Ampere", "compute_capability": "8.6", "sm_count": 30,
        "memory_bandwidth_gbs": 336.0, "base_clock_mhz": 1283, "boost_clock_mhz": 1703, "l2_kib": 3072, "memory_gib": 6, "fp32_tflops": 13.1},
    "RTX 3070":
    {"vendor": "NVIDIA", "architecture": "Ampere", "compute_capability": "8.6", "sm_count": 46,
        "memory_bandwidth_gbs": 448.0, "base_clock_mhz": 1500, "boost_clock_mhz": 1725, "l2_kib": 4096, "memory_gib": 8, "fp32_tflops": 20.3},
    "RTX 3080":
    {"vendor": "NVIDIA", "architecture": "Ampere", "compute_capability": "8.6", "sm_count": 68,
        "memory_bandwidth_gbs": 760.0, "base_clock_mhz": 1440, "boost_clock_mhz": 1710, "l2_kib": 5120, "memory_gib": 10, "fp32_tflops": 29.8},
    "RTX 3090":
    {"vendor": "NVIDIA", "architecture": "Ampere", "compute_capability": "8.6", "sm_count": 82,
        "memory_bandwidth_gbs": 936.0, "base_clock_mhz": 1395, "boost_clock_mhz": 1695, "l2_kib": 6144, "memory_gib": 24, "fp32_tflops": 35.6},
    "RTX 4090":
    {"vendor": "NVIDIA", "architecture": "Ada", "compute_capability": "8.9", "sm_count": 128,
        "memory_bandwidth_gbs": 1008.0, "base_clock_mhz": 2235, "boost_clock_mhz": 2520, "l2_kib": 73728, "memory_gib": 24, "fp32_tflops": 82.6},
    "L40S":
    {"vendor": "NVIDIA", "architecture": "Ada", "compute_capability": "8.9", "sm_count": 142,
        "memory_bandwidth_gbs": 864.0, "base_clock_mhz": 1110, "boost_clock_mhz": 2520, "l2_kib": 98304, "memory_gib": 48, "fp32_tflops": 91.6},
    "H100 PCIe":
    {"vendor": "NVIDIA", "architecture": "Hopper", "compute_capability": "9.0", "sm_count": 114,
        "memory_bandwidth_gbs": 2000.0, "base_clock_mhz": 1125, "boost_clock_mhz": 1755, "l2_kib": 51200, "memory_gib": 80, "fp32_tflops": 51.2},
    "H100":
    {"vendor": "NVIDIA", "architecture": "Hopper", "compute_capability": "9.0", "sm_count": 132,
        "memory_bandwidth_gbs": 3350.0, "base_clock_mhz": 1590, "boost_clock_mhz": 1980, "l2_kib": 51200, "memory_gib": 80, "fp32_tflops": 66.9},
    "H200":
    {"vendor": "NVIDIA", "architecture": "Hopper", "compute_capability": "9.0", "sm_count": 132,
        "memory_bandwidth_gbs": 4800.0, "base_clock_mhz": 1590, "boost_clock_mhz": 1980, "l2_kib": 51200, "memory_gib": 141, "fp32_tflops": 66.9},
    "MI50":
    {"vendor": "AMD", "architecture": "GCN5", "gfx": "gfx906", "sm_count": 60,
        "memory_bandwidth_gbs": 1024.0, "base_clock_mhz": 1450, "boost_clock_mhz": 1725, "l2_kib": 4096, "memory_gib": 16, "fp32_tflops": 13.4},
    "MI100":
    {"vendor": "AMD", "architecture": "CDNA", "gfx": "gfx908", "sm_count": 120,
        "memory_bandwidth_gbs": 1229.0, "base_clock_mhz": 1000, "boost_clock_mhz": 1502, "l2_kib": 8192, "memory_gib": 32, "fp32_tflops": 23.1},
    "MI210":
    {"vendor": "AMD", "architecture": "CDNA2", "gfx": "gfx90a", "sm_count": 104,
        "memory_bandwidth_gbs": 1638.0, "base_clock_mhz": 800, "boost_clock_mhz": 1700, "l2_kib": 8192, "memory_gib": 64, "fp32_tflops": 22.6},
    "MI250X":
    {"vendor": "AMD", "architecture": "CDNA2", "gfx": "gfx90a", "sm_count": 110,
        "memory_bandwidth_gbs": 1638.0, "base_clock_mhz": 800, "boost_clock_mhz": 1700, "l2_kib": 8192, "memory_gib": 64, "fp32_tflops": 23.9},
    "MI250":
    {"vendor": "AMD", "architecture": "CDNA2", "gfx": "gfx90a", "sm_count": 104,
        "memory_bandwidth_gbs": 1638.0, "base_clock_mhz": 800, "boost_clock_mhz": 1700, "l2_kib": 8192, "memory_gib": 64, "fp32_tflops": 22.6},
    "MI300X":
    {"vendor": "AMD", "architecture": "CDNA3", "gfx": "gfx942", "sm_count": 304,
        "memory_bandwidth_gbs": 5300.0, "base_clock_mhz": 1000, "boost_clock_mhz": 2100, "l2_kib": 32768, "memory_gib": 192, "fp32_tflops": 81.7},
    "W6600":
    {"vendor": "AMD", "architecture": "RDNA2", "gfx": "gfx1032", "sm_count": 28,
        "memory_bandwidth_gbs": 224.0, "base_clock_mhz": 2331, "boost_clock_mhz": 2903, "l2_kib": 2048, "memory_gib": 8, "fp32_tflops": 10.4},
    "W6800":
    {"vendor": "AMD", "architecture": "RDNA2", "gfx": "gfx1030", "sm_count": 60,
        "memory_bandwidth_gbs": 512.0, "base_clock_mhz": 2075, "boost_clock_mhz": 2320, "l2_kib": 4096, "memory_gib": 32, "fp32_tflops": 17.8},
    "RX 6900 XT":
    {"vendor": "AMD", "architecture": "RDNA2", "gfx": "gfx1030", "sm_count": 80,
        "memory_bandwidth_gbs": 512.0, "base_clock_mhz": 1825, "boost_clock_mhz": 2250, "l2_kib": 4096, "memory_gib": 16, "fp32_tflops": 23.0},
    "W7800":
    {"vendor": "AMD", "architecture": "RDNA3", "gfx": "gfx1100", "sm_count": 70,
        "memory_bandwidth_gbs": 576.0, "base_clock_mhz": 1500, "boost_clock_mhz": 2499, "l2_kib": 6144, "memory_gib": 32, "fp32_tflops": 45.2},
    "W7900":
    {"vendor": "AMD", "architecture": "RDNA3", "gfx": "gfx1100", "sm_count": 96,
        "memory_bandwidth_gbs": 864.0, "base_clock_mhz": 1500, "boost_clock_mhz": 2495, "l2_kib": 6144, "memory_gib": 48, "fp32_tflops": 61.3},
    "RX 7900 XTX":
    {"vendor": "AMD", "architecture": "RDNA3", "gfx": "gfx1100", "sm_count": 96,
        "memory_bandwidth_gbs": 960.0, "base_clock_mhz": 1855, "boost_clock_mhz": 2500, "l2_kib": 6144, "memory_gib": 24, "fp32_tflops": 61.4},
}


VENDOR_WORDS = {"NVIDIA": {"nvidia", "geforce", "quadro", "tesla"}, "AMD": {"amd", "radeon", "instinct"}}


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def gpu_properties(name: str) -> dict:
    """The known properties of the GPU named ``name`` ("NVIDIA GeForce RTX 3090", "RTX_3090"...),
    the longest matching table entry winning. A GPU not in the table gets what its name still tells: the
    architecture of its gfx target (AMD runtimes may name a device "gfx90a:sramecc+:xnack-"), else its vendor
    from a brand word; {} when the name tells nothing."""
    n = _norm(name)
    tokens = set(n.split())
    for key in sorted(KNOWN_GPUS, key=len, reverse=True):
        if set(_norm(key).split()) <= tokens:  # word order free: "RTX_Titan" is the TITAN RTX
            return {"model": key, **KNOWN_GPUS[key]}
    # labels written without spaces (RTX3090)
    squashed = n.replace(" ", "")
    for key in sorted(KNOWN_GPUS, key=len, reverse=True):
        if re.search(re.escape(_norm(key).replace(" ", "")) + r"(?!\d)", squashed):  # A100 is not an A1000
            return {"model": key, **KNOWN_GPUS[key]}
    gfx = re.search(r"\bgfx[0-9a-f]{3,4}", n)
    arch = gfx and next((p["architecture"] for p in KNOWN_GPUS.values() if p.get("gfx") == gfx.group()), None)
    if arch:
        return {"vendor": "AMD", "architecture": arch, "gfx": gfx.group()}
    for vendor, words in VENDOR_WORDS.items():
        if tokens & words:
            return {"vendor": vendor}
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
