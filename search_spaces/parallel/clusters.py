"""Clusters: nodes of identical devices, an intra-node link per device and a network port per node.

Presets (``get_cluster``): ``p100-4x4``, ``k80-16x4``, ``p3.16xlarge-xN``, ``dgx-a100-xN``,
``dgx-a100-deepspeed-xN`` (the same DGX A100 running Megatron-DeepSpeed), ``dgx-h100-xN``; a
``.json``/``.yaml`` file gives a custom one with the same fields.
Measured figures override the analytic estimates: ``op_times`` maps an op signature
(see ``Cluster.op_key``) to measured forward seconds, and ``collectives`` holds
measured (collective, group size, bytes, seconds) points, interpolated log-log in bytes.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import re
from dataclasses import asdict, dataclass, field, replace

from autotune.errors import MissingDependencyError, UsageError, did_you_mean


@dataclass
class DeviceSpec:
    name: str
    flops_fp32: float  # peak FLOP/s
    flops_fp16: float
    memory_bytes: float
    mem_bandwidth: float  # bytes/s
    gemm_efficiency: float = 0.6  # achieved share of peak on large, well-shaped matmuls (calibrated)
    launch_s: float = 5e-6  # fixed cost per kernel
    sm_count: int = 0  # multiprocessors, for wave quantization of GEMM tiles (0: not modelled)
    gemm_k_half: float = 0.0  # reduction length at which a GEMM reaches half its efficiency (0: not modelled)
    # the hardware this device is a software stack's figures for (A100 for A100-DeepSpeed); empty: the device is
    # its own hardware. NCCL's figures and measured op and collective times are the hardware's.
    hardware: str = ""
    # what a process holds beyond the model's tensors, as nvidia-smi counts it: a fixed part (the CUDA context and
    # kernels) and the caching allocator's share on top of the tensors' peak (blocks cached, rounded and split); 0
    # where no published peak calibrated them (the tensors alone). Out of the repr, whose digest keys a cluster's
    # trials (runners/simulator/runner.py): a cluster without them keeps the key it had before they existed
    context_bytes: float = field(default=0.0, repr=False)
    allocator_slack: float = field(default=0.0, repr=False)

    def held(self, tensor_bytes):
        """What a process holding ``tensor_bytes`` of tensors (a number or an array) holds, as nvidia-smi counts
        it: the tensors with the allocator's slack on them, and the context."""
        return tensor_bytes * (1.0 + self.allocator_slack) + self.context_bytes

    @property
    def hardware_name(self) -> str:
        """The name of the hardware the device runs on: ``hardware``, else the device's own name."""
        return self.hardware or self.name


# Collectives (runners/simulator/nccl.py), fitted to the all_reduce_perf curve of 8 A100s on NVSwitch published in
# Microsoft's Azure AI benchmarking guide (ND A100 v4, NCCL 2.18): scripts/validate_simulator.py --sources nccl-a100-azure
BUS_EFFICIENCY = 0.76
LATENCY_SCALE = 2.5
# across nodes the ring runs at about 24 of each NIC's 25 GB/s (NCCL's maintainers, NVIDIA/nccl-tests#160)
NET_EFFICIENCY = 0.96


@dataclass
class Cluster:
    name: str
    nodes: int
    per_node: int
    device: DeviceSpec
    intra_bw: float  # bytes/s per device port inside a node (NVLink, NVSwitch, PCIe)
    intra_latency: float
    inter_bw: float  # bytes/s per node network port (all NICs of the node together)
    inter_latency: float
    op_times: dict[str, float] = field(default_factory=dict)
    collectives: list[tuple[str, int, float, float]] = field(default_factory=list)
    link: str = "nvlink"  # the intra-node link kind NCCL sees: nvlink (NVLink, NVSwitch) or pcie
    bus_efficiency: float = BUS_EFFICIENCY  # NCCL's large-message bus bandwidth over the link rate
    latency_scale: float = LATENCY_SCALE  # measured collective latencies over NCCL's own latency model
    net_efficiency: float = NET_EFFICIENCY  # NCCL's bus bandwidth across nodes over the network port's rate

    @property
    def devices(self) -> int:
        return self.nodes * self.per_node

    def peak(self, dtype_bytes: int) -> float:
        return self.device.flops_fp16 if dtype_bytes <= 2 else self.device.flops_fp32

    @staticmethod
    def op_key(op_type: str, part_dims: dict[str, int]) -> str:
        """The signature under which measured op times are stored: type and per-partition dim sizes."""
        return op_type + ":" + ",".join(f"{d}={n}" for d, n in part_dims.items())

    def measured_collective(self, kind: str, n: int, nbytes: float) -> float | None:
        """Interpolated time from measured points of the same collective and group size, else None."""
        pts = sorted((b, t) for k, g, b, t in self.collectives if k == kind and g == n and b > 0 and t > 0)
        if not pts:
            return None
        xs = [math.log(b) for b, _ in pts]
        x = math.log(max(nbytes, 1.0))
        i = bisect.bisect_left(xs, x)
        if len(pts) == 1:
            return pts[0][1] * nbytes / pts[0][0]
        i = min(max(i, 1), len(pts) - 1)
        (b0, t0), (b1, t1) = pts[i - 1], pts[i]
        w = (x - math.log(b0)) / (math.log(b1) - math.log(b0))
        return math.exp(math.log(t0) + w * (math.log(t1) - math.log(t0)))

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Cluster:
        """A cluster from its JSON/YAML description; every physical quantity is checked (positive and
        finite where it must be), so a typo cannot silently give a faster or impossible machine."""
        if not isinstance(d, dict):
            raise UsageError("a cluster description must be a mapping with name, nodes, per_node, device, "
                             f"intra_bw and inter_bw, not a {type(d).__name__}")
        missing = [k for k in ("name", "nodes", "per_node", "device", "intra_bw", "inter_bw") if k not in d]
        if missing:
            raise UsageError(f"the cluster description lacks {', '.join(missing)}")
        if unknown := sorted(map(str, set(d) - CLUSTER_KEYS)):  # a misspelt key would silently keep the default
            raise UsageError(f"unknown key(s) {', '.join(map(repr, unknown))} in the cluster description"
                             f"{did_you_mean(unknown[0], sorted(CLUSTER_KEYS))}; valid: {', '.join(sorted(CLUSTER_KEYS))}")
        dev = d["device"]
        if isinstance(dev, str):
            if dev not in DEVICES:
                raise UsageError(f"unknown device {dev!r} in the cluster description; known: {', '.join(DEVICES)}, "
                                 "or give the device's fields")
            dev = DEVICES[dev]
        elif isinstance(dev, dict):
            fields = set(DeviceSpec.__dataclass_fields__)
            unknown = sorted(set(dev) - fields)
            lacks = [k for k in ("name", "flops_fp32", "flops_fp16", "memory_bytes", "mem_bandwidth") if k not in dev]
            if unknown or lacks:
                raise UsageError(f"the cluster's device needs name, flops_fp32, flops_fp16, memory_bytes and "
                                 f"mem_bandwidth{'; it lacks ' + ', '.join(lacks) if lacks else ''}"
                                 f"{'; unknown field(s) ' + ', '.join(map(str, unknown)) if unknown else ''}"
                                 f"{did_you_mean(str(unknown[0]), sorted(fields)) if unknown else ''}")
            dev = DeviceSpec(
                _name(dev["name"], "device.name"), _quantity(dev["flops_fp32"], "device.flops_fp32"),
                _quantity(dev["flops_fp16"], "device.flops_fp16"), _quantity(dev["memory_bytes"], "device.memory_bytes"),
                _quantity(dev["mem_bandwidth"], "device.mem_bandwidth"),
                _quantity(dev.get("gemm_efficiency", 0.6), "device.gemm_efficiency", most=1.0),
                _quantity(dev.get("launch_s", 5e-6), "device.launch_s", zero=True),
                _count(dev.get("sm_count", 0), "device.sm_count", zero=True),
                _quantity(dev.get("gemm_k_half", 0.0), "device.gemm_k_half", zero=True),
                _name(dev["hardware"], "device.hardware") if dev.get("hardware", "") != "" else "",
                _quantity(dev.get("context_bytes", 0.0), "device.context_bytes", zero=True),
                _quantity(dev.get("allocator_slack", 0.0), "device.allocator_slack", zero=True, most=1.0))
            if dev.context_bytes >= dev.memory_bytes:
                raise UsageError(f"cluster device.context_bytes ({dev.context_bytes:g}) leaves nothing of "
                                 f"device.memory_bytes ({dev.memory_bytes:g}): give the CUDA context's bytes")
        else:
            raise UsageError("the cluster's device must be a known device name or a mapping of its fields")
        nodes, per_node = _count(d["nodes"], "nodes"), _count(d["per_node"], "per_node")
        if nodes * per_node > MAX_DEVICES:
            raise UsageError(f"the cluster has {nodes * per_node:,} devices; at most {MAX_DEVICES:,} are modelled")
        op_times = d.get("op_times") or {}
        collectives = d.get("collectives") or []
        if not isinstance(op_times, dict) or not isinstance(collectives, list):
            raise UsageError("op_times must map op keys to seconds and collectives be a list of "
                             "[kind, group, bytes, seconds]")
        try:
            points = [(_name(k, "collective kind"), _count(g, "collective group"), _quantity(b, "collective bytes"),
                       _quantity(t, "collective seconds")) for k, g, b, t in collectives]
        except (TypeError, ValueError):
            raise UsageError("each collective must be [kind, group size, bytes, seconds]") from None
        return cls(_name(d["name"], "name"), nodes, per_node, dev, _quantity(d["intra_bw"], "intra_bw"),
                   _quantity(d.get("intra_latency", 5e-6), "intra_latency", zero=True),
                   _quantity(d["inter_bw"], "inter_bw"),
                   _quantity(d.get("inter_latency", 1e-5), "inter_latency", zero=True),
                   {_name(k, "op_times key"): _quantity(v, f"op_times[{k!r}]") for k, v in op_times.items()}, points,
                   _link(d.get("link", "nvlink")),
                   _quantity(d.get("bus_efficiency", bus_efficiency(dev)), "bus_efficiency", most=1.0),
                   _quantity(d.get("latency_scale", LATENCY_SCALE), "latency_scale"),
                   _quantity(d.get("net_efficiency", NET_EFFICIENCY), "net_efficiency", most=1.0))


#: the most devices a cluster may have: the simulator sizes a transfer between two ops by the overlap of every
#: producer partition with every consumer partition, a matrix that grows with the square of the devices: GPT-350M
#: data-parallel over 4,096 devices takes 0.7 GB and 8 s to simulate, over 8,192 2.6 GB and 42 s (2 cores), so
#: 16,384 take about 10 GB; beyond that a run would only run out of memory
MAX_DEVICES = 1 << 14
#: every key a cluster description may have
CLUSTER_KEYS = frozenset({"name", "nodes", "per_node", "device", "intra_bw", "intra_latency", "inter_bw",
                          "inter_latency", "op_times", "collectives", "link", "bus_efficiency", "latency_scale",
                          "net_efficiency"})


def _quantity(v, what: str, zero: bool = False, most: float | None = None) -> float:
    """A finite number, positive (or zero when allowed), at most ``most``; UsageError naming it otherwise.
    Numeric text is read as a number: YAML 1.1 (PyYAML) reads ``300e9`` as a string."""
    if isinstance(v, str):
        try:
            v = float(v.replace("_", ""))
        except ValueError:
            pass
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and (v >= 0 if zero else v > 0)
    if not ok or (most is not None and v > most):
        bound = f" and at most {most:g}" if most is not None else ""
        unit = f" of {UNITS[what][0]} ({UNITS[what][3]})" if what in UNITS else ""
        raise UsageError(f"cluster {what} must be a finite {'non-negative' if zero else 'positive'} number{unit}{bound}, "
                         f"not {str(v)[:40]!r}")
    if what in UNITS:
        unit, least, largest, example = UNITS[what]
        if not (v == 0 and zero) and not least <= v <= largest:
            raise UsageError(f"cluster {what} is {v:g} {unit}, no real device's: give it in {unit} ({example})")
    return float(v)


_LINK_EXAMPLE = "300e9 for 300 GB/s"
#: a figure's unit, the range of any real device's (far wider than today's), and an example: a figure given in
#: another unit (GB/s, GB, TFLOP/s, microseconds) falls outside it rather than describing an impossible machine
UNITS = {
    "intra_bw": ("bytes/s", 1e6, 1e15, _LINK_EXAMPLE), "inter_bw": ("bytes/s", 1e6, 1e15, _LINK_EXAMPLE),
    "device.mem_bandwidth": ("bytes/s", 1e6, 1e15, "2039e9 for 2,039 GB/s"),
    "device.memory_bytes": ("bytes", 1e6, 1e15, "80e9 for 80 GB"),
    "device.flops_fp32": ("FLOP/s", 1e9, 1e18, "19.5e12 for 19.5 TFLOP/s"),
    "device.flops_fp16": ("FLOP/s", 1e9, 1e18, "312e12 for 312 TFLOP/s"),
    "intra_latency": ("seconds", 0.0, 1.0, "3e-6 for 3 us"), "inter_latency": ("seconds", 0.0, 1.0, "5e-6 for 5 us"),
    "device.launch_s": ("seconds", 0.0, 1.0, "5e-6 for 5 us"),
    "device.context_bytes": ("bytes", 1e6, 1e13, "1.65e9 for 1.65 GB"),
}


def _count(v, what: str, zero: bool = False) -> int:
    if not (isinstance(v, int) and not isinstance(v, bool) and (v >= 0 if zero else v >= 1)):
        raise UsageError(f"cluster {what} must be a whole number {'>= 0' if zero else '>= 1'}, not {str(v)[:40]!r}")
    return v


LINKS = ("nvlink", "pcie")  # intra-node link kinds: their per-step latencies differ in NCCL


def _link(v) -> str:
    if v not in LINKS:
        raise UsageError(f"cluster link must be one of {', '.join(LINKS)}, not {str(v)[:40]!r}")
    return v


def _name(v, what: str) -> str:
    if not isinstance(v, str) or not v or len(v) > 200:
        raise UsageError(f"cluster {what} must be a non-empty string of at most 200 characters")
    return v


G = 1e9
K_HALF = 64.0
DEVICES = {
    "P100": DeviceSpec("P100", 10.6e12, 21.2e12, 16 * 2**30, 732 * G, 0.65, sm_count=56, gemm_k_half=K_HALF),
    "K80": DeviceSpec("K80", 4.37e12, 4.37e12, 12 * 2**30, 240 * G, 0.6, sm_count=13, gemm_k_half=K_HALF),
    "V100": DeviceSpec("V100", 15.7e12, 125e12, 16 * 2**30, 900 * G, 0.6, sm_count=80, gemm_k_half=K_HALF),
    "A100": DeviceSpec("A100", 19.5e12, 312e12, 80 * 2**30, 2039 * G, 0.7864, sm_count=108, gemm_k_half=K_HALF),
}
# The H100's GEMM efficiency is fitted (scripts/validate_simulator.py --calibrate mpt-fsdp-h100) on MosaicML's FSDP runs
# of MPT on H100s (52 rows, 8.5% in-sample), the protocol's choice of the two H100 sources, and holds out the other,
# Meta's Llama 3 405B on 8,192 and 16,384 H100s (7.4% slow). At the A100's share of peak (0.7864) every run of both was
# simulated fast (MAPE 44% and 33%): the H100 reaches a smaller share of its peak than the A100 in the same stack.
DEVICES["H100"] = DeviceSpec("H100", 67e12, 989e12, 80 * 2**30, 3350 * G, 0.512, sm_count=132, gemm_k_half=K_HALF)
# The A100 as the published Megatron-DeepSpeed runs (BLOOM 176B, MT-NLG 530B) used it: the A100's hardware, and
# the GEMM efficiency and fixed cost per kernel that scripts/validate_simulator.py --calibrate fits on BLOOM's
# single-node check (one node, no pipeline, no network: the stack's per-GPU speed alone). The stack pays a host cost
# per kernel that its GPU does not hide (BLOOM launched every kernel synchronously), which larger micro-batches
# amortise. At the A100's own figures, fitted on Megatron-LM's runs (0.8192 then), those published sources
# simulated 17-28% fast.
# Its memory as nvidia-smi shows it: the CUDA context BLOOM's notes measured on the A100 (1,573 MiB) and the
# allocator slack on the tensors' peak that scripts/validate_simulator.py fits on the same check's peaks
# (fit_allocator_slack); held out, the BLOOM layouts' fits in 80 GB (docs/benchmarks.md).
DEVICES["A100-DeepSpeed"] = replace(DEVICES["A100"], name="A100-DeepSpeed", gemm_efficiency=0.6518, launch_s=6.565e-05,
                                    hardware="A100", context_bytes=1573 * 2**20, allocator_slack=0.1662)


# name pattern -> (device, devices per node, intra bw, intra latency, inter bw per node, inter latency, fixed nodes,
# intra-node link kind)
PRESETS = {
    "p100-4x4": ("P100", 4, 40 * G, 5e-6, 12.5 * G, 5e-6, 4, "nvlink"),  # NVLink, 100 Gb/s EDR InfiniBand
    "k80-16x4": ("K80", 4, 8 * G, 1e-5, 7 * G, 1e-5, 16, "pcie"),  # PCIe 3 switch, 56 Gb/s FDR InfiniBand
    "p3.16xlarge-xN": ("V100", 8, 130 * G, 5e-6, 3.125 * G, 3e-5, None, "nvlink"),  # NVLink, 25 Gb/s Ethernet
    "dgx-a100-xN": ("A100", 8, 300 * G, 3e-6, 200 * G, 5e-6, None, "nvlink"),  # NVSwitch, 8 x 200 Gb/s HDR
    "dgx-a100-deepspeed-xN": ("A100-DeepSpeed", 8, 300 * G, 3e-6, 200 * G, 5e-6, None, "nvlink"),  # the same nodes
    "dgx-h100-xN": ("H100", 8, 450 * G, 3e-6, 400 * G, 5e-6, None, "nvlink"),  # NVSwitch, 8 x 400 Gb/s NDR
}


# NCCL's ring bus bandwidth over the NVLink rate where published for the device (H100: about 370 GB/s of 450,
# NCCL's maintainers in NVIDIA/nccl-tests#212 and NVIDIA/nccl#1455); BUS_EFFICIENCY elsewhere
DEVICE_BUS_EFFICIENCY = {"H100": 370 / 450}


def bus_efficiency(device: DeviceSpec) -> float:
    """NCCL's bus efficiency on the device's hardware: published where known, else BUS_EFFICIENCY."""
    return DEVICE_BUS_EFFICIENCY.get(device.hardware_name, BUS_EFFICIENCY)


def is_cluster_file(spec: str) -> bool:
    """Whether ``spec`` names a cluster file by its extension (.json, .yaml or .yml, in any case)."""
    return os.path.splitext(spec)[1].lower() in (".json", ".yaml", ".yml")


def preset_names() -> list[str]:
    return list(PRESETS)


def get_cluster(spec: str) -> Cluster:
    """A preset name (``dgx-a100-x4``; ``-xN`` presets take any N >= 1) or a JSON/YAML file."""
    if is_cluster_file(spec):
        if not os.path.exists(spec):
            raise UsageError(f"cluster file {spec!r} does not exist")
        try:
            with open(spec, encoding="utf-8") as f:
                text = f.read(1 << 20)
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read cluster file {spec!r}: {exc.__class__.__name__}") from None
        empty = UsageError(f"cluster file {spec!r} is empty; it describes the cluster's name, nodes, per_node, "
                           "device, intra_bw and inter_bw")
        if not text.strip():
            raise empty
        if spec.lower().endswith(".json"):
            try:
                doc = json.loads(text)
            except (ValueError, RecursionError) as exc:
                raise UsageError(f"cluster file {spec!r} is not valid JSON ({str(exc)[:80]})") from None
        else:
            try:
                import yaml
            except ImportError:
                raise MissingDependencyError("YAML cluster files need PyYAML; pip install pyyaml "
                                             "(or pip install 'autotune[dev]'), or use a .json file") from None
            try:
                doc = yaml.safe_load(text)
            except (yaml.YAMLError, RecursionError) as exc:
                raise UsageError(f"cluster file {spec!r} is not valid YAML ({str(exc).splitlines()[0][:80]})") from None
            if doc is None:  # nothing but comments
                raise empty
        try:
            return Cluster.from_json(doc)
        except UsageError as exc:  # the file's fault, named with the file
            raise UsageError(f"cluster file {spec!r}: {exc}") from None
    cluster = preset(spec)
    if cluster is None:
        raise UsageError(f"unknown cluster {spec!r}; valid: {', '.join(PRESETS)} (N = number of nodes) "
                         "or a .json/.yaml file")
    return cluster


def preset(name: str) -> Cluster | None:
    """The preset cluster of that name (``dgx-a100-x4``; ``-xN`` presets take any N >= 1), or None."""
    for pattern, (dev, per, ibw, ilat, nbw, nlat, fixed, link) in PRESETS.items():
        nccl = {"link": link, "bus_efficiency": bus_efficiency(DEVICES[dev])}
        if fixed is not None and name == pattern:
            return Cluster(name, fixed, per, DEVICES[dev], ibw, ilat, nbw, nlat, **nccl)
        m = re.fullmatch(re.escape(pattern[:-1]) + r"(\d+)", name) if fixed is None else None
        if m and int(m.group(1)) >= 1:
            if int(m.group(1)) * per > MAX_DEVICES:
                raise UsageError(f"cluster {name!r} has {int(m.group(1)) * per:,} devices; at most "
                                 f"{MAX_DEVICES:,} are modelled")
            return Cluster(name, int(m.group(1)), per, DEVICES[dev], ibw, ilat, nbw, nlat, **nccl)
    return None
