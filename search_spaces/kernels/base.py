"""KernelTemplate: the common part of every kernel template (gemm, conv2d, softmax).

A template is one kernel for one problem shape and one target ("cpu" or "cuda").
It offers a knob space (``space()``), code generation from validated knob values
(``source(config)``: plain C or CUDA C text), a numpy reference with its tolerance,
FLOP and byte counts and a default configuration (the untuned baseline). Its inputs
(``make_inputs``) are made only for a shape that fits in memory (``check_memory``): a
larger one is a UsageError giving the memory it needs.

Generated code only ever receives validated integers or enumerated choices: every
configuration goes through ``self.validate`` (the knob space) before any text is made.

The calling convention, shared with the runners:
- C: ``void kernel(const float *in0, ..., float *out)`` exported from a shared object.
- CUDA: ``extern "C" __global__ void kernel(const float *in0, ..., float *out)``;
  ``launch(config)`` gives ``(grid, block, shared_bytes)``.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from autotune.errors import UsageError
from autotune.progress import format_bytes
from autotune.search_spaces.knobs import KnobSpace
from autotune.types import Task

TARGETS = ("cpu", "cuda")


def parse_shape(shape: Mapping | str, names: tuple[str, ...], optional: Mapping[str, int] | None = None) -> dict:
    """A shape from a dict or from text "1024,1024,1024" / "M=1024,N=512,K=256" (names in order)."""
    optional = dict(optional or {})
    if isinstance(shape, str):
        parts = [p.strip() for p in shape.replace("x", ",").split(",")]
        if not any(parts):
            raise UsageError(f"the shape is empty; expected {','.join(names)}")
        out: dict = {}
        for i, p in enumerate(parts):
            if not p or p[0] == "=" or p[-1] == "=":
                raise UsageError(f"shape {shape!r} has an empty name or value; expected {','.join(names)}")
            if "=" in p:
                k, _, v = (t.strip() for t in p.partition("="))
            elif i < len(names):
                k, v = names[i], p
            else:
                raise UsageError(f"shape {shape!r} has too many values; expected {','.join(names)}")
            if k in out:  # a typo, not a choice: neither value is taken
                raise UsageError(f"shape {shape!r} gives {k} twice")
            out[k] = v
        shape = out
    if not isinstance(shape, Mapping):
        raise UsageError(f"a shape is a dict or text like {','.join(names)}, not {type(shape).__name__}")
    unknown = set(shape) - set(names) - set(optional)
    if unknown:
        raise UsageError(f"unknown shape name(s) {sorted(unknown)}; accepted: {', '.join([*names, *optional])}")
    result = {}
    for n in (*names, *optional):
        if n not in shape:
            if n in optional:
                result[n] = int(optional[n])
                continue
            raise UsageError(f"shape is missing {n!r}; expected {','.join(names)}")
        try:
            v = int(str(shape[n]))
        except ValueError:
            spaced = len(str(shape[n]).split()) > 1  # "64 64 64": sizes separated by spaces, not commas
            raise UsageError(f"shape value {n}={shape[n]!r} is not an integer"
                             + (f"; separate the sizes with commas: {','.join(names)}" if spaced else "")) from None
        if v < (0 if n == "pad" else 1):
            raise UsageError(f"shape value {n}={v} must be {'0 or more' if n == 'pad' else 'positive'}")
        result[n] = v
    return result


def physical_memory() -> int | None:
    """This machine's physical memory in bytes (None where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def cgroup_memory_limit(root: str = "/sys/fs/cgroup", proc_cgroup: str = "/proc/self/cgroup") -> int | None:
    """The memory limit of this process's control group (a container's, a batch job's) in bytes, the smallest
    of those set on its cgroup and the ones above it (cgroup v2's memory.max, v1's memory.limit_in_bytes, as
    mounted under ``root``); None where none is set or the system does not say."""
    try:
        with open(proc_cgroup) as f:
            entries = [line.rstrip("\n").split(":", 2) for line in f if line.count(":") >= 2]
    except OSError:
        entries = []
    files = [os.path.join(root, "memory.max"), os.path.join(root, "memory", "memory.limit_in_bytes")]
    for _, controllers, path in entries:
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), 0, -1):  # the cgroup and every one above it
            sub = "/".join(parts[:depth])
            if controllers == "":  # v2: one hierarchy
                files.append(os.path.join(root, sub, "memory.max"))
            elif "memory" in controllers.split(","):
                files.append(os.path.join(root, "memory", sub, "memory.limit_in_bytes"))
    limits = []
    for file in files:
        try:
            text = _read(file)
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # "max" (v2), or v1's "unlimited": a number near 2**63
            limits.append(int(text))
    return min(limits) if limits else None


def usable_memory() -> tuple[int | None, bool]:
    """(bytes, whether they are a control group's limit): the memory this process may use, the smaller of the
    machine's physical memory and its control group's limit (a container started with a memory limit is
    killed past it, whatever the machine has)."""
    physical, limit = physical_memory(), cgroup_memory_limit()
    if limit is not None and (physical is None or limit < physical):
        return limit, True
    return physical, False


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (taskset, a container's or a batch job's cpuset),
    not every core of the machine, where the system says."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


def cpu_props_from(cores: int, flags, l1d_bytes: int | None = None, l2_bytes: int | None = None) -> dict:
    """A CPU's knob-range properties from its core count, its flags (/proc/cpuinfo's) and cache sizes (32 KiB
    and 512 KiB where unknown)."""
    flags = set(flags or ())
    return {"cores": cores, "avx2": {"avx2", "fma"} <= flags, "avx512": "avx512f" in flags,
            "l1d_bytes": l1d_bytes or 32 * 1024, "l2_bytes": l2_bytes or 512 * 1024}


def cpu_props() -> dict:
    """Enough of the host CPU for knob ranges: usable cores, vector flags, cache sizes."""
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    props = cpu_props_from(usable_cores(), flags)
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = [e for e in os.listdir(base) if e.startswith("index")]
    except OSError:
        entries = []
    for idx in entries:
        try:
            d = os.path.join(base, idx)
            level, kind, size = (_read(os.path.join(d, f)) for f in ("level", "type", "size"))
            mult = 1024 * 1024 if size.endswith("M") else 1024 if size.endswith("K") else 1
            val = int(size.rstrip("KM")) * mult
        except (OSError, ValueError):
            continue
        if level == "1" and kind == "Data":
            props["l1d_bytes"] = val
        elif level == "2":
            props["l2_bytes"] = val
    return props


# a device with no properties given: an sm_80-class GPU (A100)
DEFAULT_CUDA_PROPS = {"max_threads_per_block": 1024, "max_shared_per_block": 48 * 1024,
                      "max_registers_per_thread": 255, "cc": [8, 0]}


class KernelTemplate:
    name = "kernel"
    shape_names: tuple[str, ...] = ()
    shape_optional: ClassVar[dict[str, int]] = {}
    rtol = 1e-4
    atol = 1e-4
    memory_also = ""  # what else memory_needed() counts, for its message: "; also ..."

    def __init__(self, shape: Mapping | str, target: str = "cpu", device_props: Mapping | None = None,
                 threads: int | None = None):
        if target not in TARGETS:
            raise UsageError(f"unknown target {target!r}; valid: {', '.join(TARGETS)}")
        self.shape = parse_shape(shape, self.shape_names, self.shape_optional)
        self.target = target
        if device_props is None:
            device_props = cpu_props() if target == "cpu" else dict(DEFAULT_CUDA_PROPS)
        self.props = dict(device_props)
        if threads is not None:  # a whole number: 1.5 would be generated as 1 thread, yet named another task
            if isinstance(threads, bool) or not isinstance(threads, numbers.Integral):
                raise UsageError(f"threads must be a whole number of threads, not {threads!r}")
            threads = int(threads)
        if threads is not None and (threads < 1 or threads > int(self.props.get("cores", threads))):
            raise UsageError(f"threads={threads} must be between 1 and the core count {self.props.get('cores')}")
        self.threads = threads
        self.check_shape()
        self.task = Task("kernel", self.name, {"shape": self.shape, "target": target, "dtype": "float32",
                                              **({"threads": threads} if threads else {})})
        self._space: KnobSpace | None = None

    # -- to override -------------------------------------------------------------------
    def check_shape(self) -> None:
        pass

    def knobs(self) -> tuple[dict, list, dict]:
        """(knobs, constraints, default config) for this target."""
        raise NotImplementedError

    def input_shapes(self) -> list[tuple[int, ...]]:
        raise NotImplementedError

    def output_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    def reference(self, inputs: list[np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    @property
    def flops(self) -> int:
        raise NotImplementedError

    def c_source(self, cfg: dict) -> str:
        raise NotImplementedError

    def cuda_source(self, cfg: dict) -> str:
        raise NotImplementedError

    def launch(self, cfg: dict) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------
    @property
    def bytes(self) -> int:
        """Compulsory traffic: every input read once and the output written once (fp32)."""
        n = sum(int(np.prod(s)) for s in self.input_shapes()) + int(np.prod(self.output_shape()))
        return 4 * n

    def space(self) -> KnobSpace:
        if self._space is None:
            knobs, constraints, default = self.knobs()
            self._space = KnobSpace(knobs, constraints, task=self.task, default=default)
        return self._space

    def default_config(self) -> dict:
        return dict(self.space().initial().payload)

    def validate(self, config: Mapping) -> dict:
        """The configuration as a dict of knob values, or UsageError when it is not a valid point."""
        return dict(self.space().candidate(config).payload)

    def source(self, config: Mapping) -> str:
        cfg = self.validate(config)
        return self.c_source(cfg) if self.target == "cpu" else self.cuda_source(cfg)

    def memory_needed(self) -> dict[str, int]:
        """Bytes a measurement of this shape holds at once: ``host`` (the float32 inputs and output, and
        the float64 reference numpy computes from float64 copies of the inputs) and ``device`` (on a
        GPU: the float32 inputs and output)."""
        elements = sum(math.prod(s) for s in self.input_shapes()) + math.prod(self.output_shape())
        return {"host": 4 * elements + 8 * elements, "device": 4 * elements}

    def check_memory(self, host_bytes: int | None = None) -> None:
        """UsageError, giving the memory the shape needs, when it is more than this machine's memory
        (``host_bytes``, default: its physical memory, or its control group's memory limit where smaller) or,
        for CUDA, the GPU's (``memory_bytes`` of the device properties)."""
        need = self.memory_needed()
        shape = ",".join(f"{k}={v}" for k, v in self.shape.items())
        have, limited = (host_bytes, False) if host_bytes is not None else usable_memory()
        if have and need["host"] > have:
            have_text = (f"the {format_bytes(have)} this process may use (its control group's memory limit: a "
                         "container's or a job's)" if limited else f"this machine's {format_bytes(have)}")
            raise UsageError(f"the {self.name} shape {shape} needs {format_bytes(need['host'])} of memory (its float32 "
                             f"inputs and output, {format_bytes(need['device'])}, and their float64 reference"
                             f"{self.memory_also}), more than {have_text}; choose a smaller shape")
        gpu = self.props.get("memory_bytes") if self.target == "cuda" else None
        if gpu and need["device"] > int(gpu):
            raise UsageError(f"the {self.name} shape {shape} needs {format_bytes(need['device'])} of GPU memory for its "
                             f"float32 inputs and output, more than the GPU's {format_bytes(int(gpu))}; choose a "
                             "smaller shape")

    def make_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """The random float32 inputs (UsageError first when the shape does not fit in memory: check_memory)."""
        self.check_memory()
        rng = np.random.default_rng(seed)
        return [rng.standard_normal(s, dtype=np.float32) for s in self.input_shapes()]

    def check(self, out: np.ndarray, ref: np.ndarray) -> str:
        """'' when ``out`` matches the reference within tolerance, else why not."""
        if out.shape != ref.shape:
            return f"output shape {out.shape} differs from the reference {ref.shape}"
        if not np.isfinite(out).all():
            return f"{int((~np.isfinite(out)).sum())} output values are not finite (unwritten or overflow)"
        err = np.abs(out.astype(np.float64) - ref)
        bound = self.atol + self.rtol * np.abs(ref)
        bad = err > bound
        if bad.any():
            i = np.unravel_index(int(np.argmax(err - bound)), err.shape)
            return (f"{int(bad.sum())} of {bad.size} values differ from the reference beyond "
                    f"rtol={self.rtol}, atol={self.atol}; worst at {tuple(map(int, i))}: "
                    f"{float(out[i]):.6g} vs {float(ref[i]):.6g}")
        return ""
