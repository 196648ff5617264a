"""CRunner: measure C kernel candidates on the host CPU.

Build: gcc (or $CC) -O3 -march=native -fopenmp -shared, one compiler process per
candidate, ``build_workers`` at a time, each with a compile timeout (past it the compiler's
whole process group is killed; its temporary files are in the build folder); shared objects
are cached by a hash of source and flags. Run: one candidate at a time, each in a fresh
worker process that loads the shared object through ctypes (runners/workers.py), so a
segfault is a RUNTIME_ERROR and a hang a TIMEOUT. Timing follows runners/timing.py;
every output is checked against the template's numpy reference (WRONG_RESULT).
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shlex
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from autotune.errors import MissingDependencyError, UsageError
from autotune.runners.base import BatchRunner, Built
from autotune.runners.child import run_shared_object, run_user_function
from autotune.runners.processes import Compilers, private_workdir, run_compiler
from autotune.runners.timing import Protocol
from autotune.runners.workers import IsolatedWorker
from autotune.search_spaces.kernels.base import KernelTemplate, cpu_props, physical_memory
from autotune.search_spaces.kernels.user_arguments import verify_outputs
from autotune.search_spaces.kernels.user_kernel import detect_c_timing
from autotune.types import Candidate, Device, Measurement, Status, Task

DEFAULT_FLAGS = ("-O3", "-march=native", "-fopenmp", "-std=gnu11", "-shared", "-fPIC")
CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "amx_tile", "neon")


def compiler_command() -> list[str]:
    """$CC (default gcc) as words: the compiler and any options it carries."""
    text = os.environ.get("CC", "gcc")
    try:
        cc = shlex.split(text)
    except ValueError as exc:  # an unclosed quote
        raise UsageError(f"$CC {text!r} is not a command line ({exc}); set CC to a C compiler, e.g. gcc") from None
    if not cc or shutil.which(cc[0]) is None:
        raise MissingDependencyError(f"the C compiler {cc[0] if cc else '(empty $CC)'!r} was not found; "
                                     "install gcc or set CC")
    return cc


def compiler_version(cc: list[str]) -> str:
    try:
        out = subprocess.run([*cc, "--version"], capture_output=True, text=True, timeout=10, check=False).stdout
        return out.splitlines()[0].strip() if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def cpu_device(cc: list[str], flags: tuple[str, ...]) -> Device:
    """The host CPU: model, cores, vector flags, caches, compiler and flags (the options $CC carries first:
    CC="gcc -O0" builds other code than gcc, so its trials are another device's)."""
    model, cpu_flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model in ("", platform.machine(), platform.processor()):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith(("flags", "Features")) and not cpu_flags:
                    cpu_flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    props = cpu_props()
    return Device(model or "cpu", "cpu", {
        "model": model, "machine": platform.machine(), "cores": props["cores"],
        "flags": sorted(f for f in CPU_FLAGS if f in cpu_flags),
        "l1d_bytes": props["l1d_bytes"], "l2_bytes": props["l2_bytes"],
        "compiler": compiler_version(cc), "cflags": [*cc[1:], *flags],
    })


def _build(cc: list[str], flags: tuple[str, ...], source: str, workdir: Path, timeout_s: float,
           running: Compilers | None = None) -> tuple[str | None, str, float]:
    """(shared object path or None, error text, seconds spent); the compiler is in ``running`` while it runs."""
    digest = hashlib.sha1((" ".join([*cc, *flags]) + "\n" + source).encode()).hexdigest()[:20]
    so = workdir / f"k_{digest}.so"
    if so.exists():
        return str(so), "", 0.0
    src = workdir / f"k_{digest}.c"
    src.write_text(source)
    tmp = workdir / f"k_{digest}.{os.getpid()}.{threading.get_ident()}.tmp.so"
    t0 = time.perf_counter()
    try:
        r = run_compiler([*cc, *flags, "-o", str(tmp), str(src)], timeout_s, tmpdir=workdir, running=running)
    except subprocess.TimeoutExpired:
        return None, f"compilation did not finish within {timeout_s:g} s", time.perf_counter() - t0
    except OSError as exc:
        return None, f"could not run the compiler: {exc}", time.perf_counter() - t0
    spent = time.perf_counter() - t0
    if r.returncode != 0:
        return None, (r.stderr or r.stdout).strip()[-2000:] or f"compiler exit status {r.returncode}", spent
    if not tmp.exists():  # e.g. CC=true: success without a shared object is a failed build, not a crash
        said = (r.stderr or r.stdout).strip()[-2000:]
        return None, f"the compiler {cc[0]!r} exited with status 0 but wrote no shared object{': ' + said if said else ''}", spent
    os.replace(tmp, so)  # atomic: a cached .so is always complete
    return str(so), "", spent


def resolve_native(cc: list[str], flags: tuple[str, ...]) -> tuple[str, ...]:
    """``flags`` with -march=native / -mtune=native replaced by what they mean on this CPU, so that
    a build made on another machine targets this one."""
    if not any(f in ("-march=native", "-mtune=native") for f in flags):
        return tuple(flags)
    try:
        out = subprocess.run([*cc, "-march=native", "-Q", "--help=target"], capture_output=True, text=True,
                             timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return tuple(flags)
    found = dict(re.findall(r"^\s*-m(arch|tune)=\s+(\S+)", out, flags=re.MULTILINE))
    return tuple(f"-m{k}={found[k]}" if f == f"-m{k}=native" and found.get(k) else f
                 for f in flags for k in [f[2:6]])


def first_error_line(error: str | None) -> str:
    """The line of a build's or a run's error text that says most: a compiler's first ``error`` line, else
    the first line (at most 300 characters)."""
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    line = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "")
    return line if len(line) <= 300 else line[:297] + "..."


#: a trivial kernel with an OpenMP loop, built once per compiler and flags before a run measures anything
_PROBE_SOURCE = """void autotune_probe(float *x, int n) {
    #pragma omp parallel for
    for (int i = 0; i < n; i++) x[i] += 1.0f;
}
"""
_working_compilers: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()


def check_compiler(cc: list[str], flags: tuple[str, ...] = DEFAULT_FLAGS, timeout_s: float = 60.0) -> None:
    """UsageError, with the compiler's own words, when ``cc`` cannot build a trivial OpenMP shared object with
    ``flags``: a missing or broken compiler, or options it rejects, fail every configuration alike, and are
    said once, before a campaign starts, instead of as one failed trial each."""
    if (tuple(cc), tuple(flags)) in _working_compilers:
        return
    so, err, _ = _build(cc, flags, _PROBE_SOURCE, _stage_dir(), timeout_s)
    if so is None:
        raise UsageError(f"the C compiler {shlex.join(cc)!r} cannot build a shared object with "
                         f"{' '.join(flags)}: {first_error_line(err)}; set CC to a working C compiler with OpenMP "
                         "(e.g. gcc)")
    _working_compilers.add((tuple(cc), tuple(flags)))


@cache
def _stage_dir() -> Path:
    return private_workdir("autotune-cbuild-")


@dataclass(frozen=True)
class CBuildStage:
    """Compile one candidate of a C template anywhere (CRunner.build_stage): the shared object's bytes."""

    template: KernelTemplate
    cc: tuple[str, ...]
    flags: tuple[str, ...]
    timeout_s: float

    def __call__(self, task: Task, cand: Candidate) -> Built:
        if not self.template.space().contains(cand):
            return Built(None, "not a valid point of the kernel's knob space", invalid=True)
        try:
            source = self.template.source(dict(cand.payload))
        except (UsageError, KeyError, ValueError) as exc:
            return Built(None, f"invalid configuration: {exc}")
        so, err, spent = _build(list(self.cc), self.flags, source, _stage_dir(), self.timeout_s)
        return Built(Path(so).read_bytes() if so else None, err, spent)


class CRunner(BatchRunner):
    """Compile and time C candidates of one kernel template on this CPU."""

    def __init__(self, template: KernelTemplate, protocol: Protocol | None = None, build_workers: int = 2,
                 compile_timeout_s: float = 60.0, run_timeout_s: float = 20.0, flags: tuple[str, ...] = DEFAULT_FLAGS,
                 workdir: str | Path | None = None, seed: int = 0, check: bool = True,
                 memory_limit: int | None = None):
        if template.target != "cpu":
            raise UsageError(f"CRunner runs cpu templates; {template.name} targets {template.target!r}")
        self.template = template
        self.protocol = protocol or Protocol()
        self.cc = compiler_command()
        self.flags = tuple(flags)
        self.compile_timeout_s = compile_timeout_s
        self.run_timeout_s = run_timeout_s
        self.check = check
        self._own_dir = workdir is None
        self.workdir = Path(workdir) if workdir else private_workdir("autotune-c-")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._pool = ThreadPoolExecutor(max_workers=max(1, build_workers), thread_name_prefix="cbuild")
        self._compiling = Compilers()  # the compilers running now (close() kills them)
        self.device = cpu_device(self.cc, self.flags)
        self.inputs = template.make_inputs(seed)
        self._reference: np.ndarray | None = None
        # a candidate may use at most the machine's physical memory (RLIMIT_AS)
        self._worker = IsolatedWorker(memory_limit=memory_limit if memory_limit is not None else physical_memory())

    @property
    def reference(self) -> np.ndarray:
        if self._reference is None:
            self._reference = self.template.reference(self.inputs)
        return self._reference

    def build(self, config: dict) -> tuple[str | None, str, float]:
        """Compile one configuration: (shared object or None, error, seconds)."""
        try:
            source = self.template.source(config)
        except (UsageError, KeyError, ValueError) as exc:
            return None, f"invalid configuration: {exc}", 0.0
        return _build(self.cc, self.flags, source, self.workdir, self.compile_timeout_s, self._compiling)

    def _prepare(self, task: Task, candidates: list[Candidate]) -> list:
        if task.key != self.template.task.key:
            raise UsageError(f"this runner measures {self.template.task.name} {self.template.task.params}, "
                             f"not {task.name} {task.params}")
        space = self.template.space()
        valid = [space.contains(c) for c in candidates]
        futures = [self._pool.submit(self.build, dict(c.payload)) if ok else None
                   for c, ok in zip(candidates, valid)]
        builds = [f.result() if f is not None else None for f in futures]  # build all, then time: quiet cores
        return builds

    def build_stage(self) -> CBuildStage:
        return CBuildStage(self.template, tuple(self.cc), resolve_native(self.cc, self.flags), self.compile_timeout_s)

    def run_built(self, task: Task, cand: Candidate, built: Built) -> Measurement:
        if built.invalid:
            return self._run(cand, None)
        if built.artifact is None:
            return self._run(cand, (None, built.error, built.build_s))
        so = self.workdir / f"b_{hashlib.sha1(built.artifact).hexdigest()[:20]}.so"
        if not so.exists():
            tmp = so.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_bytes(built.artifact)
            os.replace(tmp, so)
        return self._run(cand, (str(so), "", built.build_s))

    def _meta(self) -> dict:
        return {"protocol": self.protocol.to_json(), "backend": "ctypes", "runner": "c",
                "compiler": self.device.properties["compiler"], "cflags": list(self.flags)}

    def _run(self, cand: Candidate, build: tuple | None) -> Measurement:
        meta = self._meta()
        if build is None:
            return Measurement(cand, Status.INVALID, error="not a valid point of the kernel's knob space", meta=meta)
        so, err, build_s = build
        if so is None:
            return Measurement(cand, Status.COMPILE_ERROR, error=err, build_s=build_s, meta=meta)
        out = self._worker.call(run_shared_object, (so, "kernel", self.inputs, self.template.output_shape(),
                                               self.protocol), self.run_timeout_s)
        if failed := out.failure(cand, build_s=build_s, meta=meta):
            return failed
        times, result = out.payload
        meta["repeats"] = len(times)
        if self.check:
            why = self.template.check(result, self.reference)
            if why:
                return Measurement(cand, Status.WRONG_RESULT, times=list(times), error=why, build_s=build_s,
                                   run_s=out.wall_s, meta=meta)
        m = Measurement(cand, Status.OK, times=list(times), build_s=build_s, run_s=out.wall_s, meta=meta)
        meta["gflops"] = self.template.flops / m.cost / 1e9
        meta["gbytes_s"] = self.template.bytes / m.cost / 1e9
        return m

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)  # an interrupted batch builds no more...
        self._compiling.stop()  # ...and waits for none of its running builds, nor for one starting
        self._pool.shutdown(wait=True)
        self._worker.close()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)


class UserCRunner(BatchRunner):
    """Compile and time a user's own C function (Kernel Tuner's C backend convention) on this CPU.

    Each configuration is the user's source with its defines (search_spaces/kernels/user_kernel.py), built as a
    shared object by ``compiler`` (g++ by default, as Kernel Tuner) with DEFAULT_FLAGS and the user's
    options after them; it is called through ctypes in a fresh worker process (a segfault is a
    RUNTIME_ERROR, a hang a TIMEOUT) with the user's arguments, copied afresh for every configuration.
    The first call's outputs are checked against ``answer`` (WRONG_RESULT), then the function is timed:
    by what it returns (its own time in ms, ``kernel.timing == "kernel"``) or by the wall clock."""

    def __init__(self, kernel, arguments: list, answer: list | None = None, atol: float = 1e-6, verify=None,
                 protocol: Protocol | None = None, compiler_options: list[str] | tuple[str, ...] = (),
                 build_workers: int = 2, compile_timeout_s: float = 60.0, run_timeout_s: float = 20.0,
                 memory_limit: int | None = None):
        if kernel.lang != "C":
            raise UsageError(f"UserCRunner runs C kernels; {kernel.kernel_name} is {kernel.lang}")
        self.kernel, self.arguments, self.answer, self.atol, self.verify = kernel, list(arguments), answer, atol, verify
        self.protocol = protocol or Protocol()
        cc = shlex.split(kernel.compiler)
        if not cc or shutil.which(cc[0]) is None:
            raise MissingDependencyError(f"the compiler {kernel.compiler!r} was not found; install it or pass "
                                         "compiler='gcc' (or another C compiler on the PATH)")
        self.cc = cc
        base = tuple(f for f in DEFAULT_FLAGS if not (kernel.compiler_is_cxx and f.startswith("-std=")))
        self.flags = (*base, *map(str, compiler_options))
        self.timing, self.restype = detect_c_timing(kernel.source_text, kernel.kernel_name, kernel.timing)
        self.compile_timeout_s, self.run_timeout_s = compile_timeout_s, run_timeout_s
        self.workdir = private_workdir("autotune-userc-")
        self._pool = ThreadPoolExecutor(max_workers=max(1, build_workers), thread_name_prefix="cbuild")
        self._compiling = Compilers()  # the compilers running now (close() kills them)
        self.device = cpu_device(self.cc, self.flags)
        self.outputs = [i for i, a in enumerate(answer or []) if a is not None]
        self._worker = IsolatedWorker(memory_limit=memory_limit if memory_limit is not None else physical_memory())

    def build(self, config: dict) -> tuple[str | None, str, float]:
        try:
            source = self.kernel.source(config)
        except (UsageError, KeyError, ValueError, TypeError) as exc:
            return None, f"invalid configuration: {exc}", 0.0
        return _build(self.cc, self.flags, source, self.workdir, self.compile_timeout_s, self._compiling)

    def _prepare(self, task: Task, candidates: list[Candidate]) -> list:
        if task.key != self.kernel.task.key:
            raise UsageError(f"this runner measures {self.kernel.task.name}, not {task.name} {task.params}")
        space = self.kernel.space()
        futures = [self._pool.submit(self.build, dict(c.payload)) if space.contains(c) else None for c in candidates]
        builds = [f.result() if f is not None else None for f in futures]  # build all, then time: quiet cores
        return builds

    def _run(self, cand: Candidate, build: tuple | None) -> Measurement:
        meta = {"protocol": self.protocol.to_json(), "backend": "ctypes", "runner": "user-c", "timing": self.timing,
                "compiler": self.device.properties["compiler"], "cflags": list(self.flags)}
        if build is None:
            return Measurement(cand, Status.INVALID, error="not a valid point of the kernel's parameter space", meta=meta)
        so, err, build_s = build
        if so is None:
            return Measurement(cand, Status.COMPILE_ERROR, error=err, build_s=build_s, meta=meta)
        out = self._worker.call(run_user_function, (so, self.kernel.kernel_name, self.arguments, self.restype,
                                                    self.timing, self.protocol, self.outputs), self.run_timeout_s)
        if failed := out.failure(cand, build_s=build_s, meta=meta):
            return failed
        times, outputs = out.payload
        meta["repeats"] = len(times)
        why = verify_outputs(self.answer, outputs, self.atol, self.verify)
        if why:
            return Measurement(cand, Status.WRONG_RESULT, times=list(times), error=why, build_s=build_s,
                               run_s=out.wall_s, meta=meta)
        return Measurement(cand, Status.OK, times=list(times), build_s=build_s, run_s=out.wall_s, meta=meta)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)  # an interrupted batch builds no more...
        self._compiling.stop()  # ...and waits for none of its running builds, nor for one starting
        self._pool.shutdown(wait=True)
        self._worker.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
