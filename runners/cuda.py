"""CudaRunner: measure CUDA kernel candidates on one GPU.

Build: nvcc compiles each candidate to a cubin for the device's architecture, one nvcc
process per candidate, ``build_workers`` at a time (this half needs no GPU: see
``CudaBuilder``). Run: one isolated worker process per GPU (runners/cuda_worker.py) owns
the context, loads each cubin through pycuda (CuPy where pycuda is missing) and times
launches with CUDA events; it is restarted after a fatal CUDA error or a timeout.
Every output is checked against the template's numpy reference.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from autotune.errors import MissingDependencyError, UsageError
from autotune.runners.base import BatchRunner, Built
from autotune.runners.processes import private_workdir
from autotune.runners.timing import Protocol
from autotune.runners.workers import read_frame, write_frame
from autotune.search_spaces.kernels.base import KernelTemplate
from autotune.types import Candidate, Device, Measurement, Status, Task

NVCC_FLAGS = ("-O3", "-std=c++17", "--resource-usage")
CUDA_BACKENDS = ("auto", "pycuda", "cupy")  # how kernels are loaded and launched: pycuda, CuPy, or the one installed


def nvcc_path() -> str:
    nvcc = os.environ.get("NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc) and shutil.which(nvcc) is None:
        raise MissingDependencyError("nvcc was not found; install the CUDA toolkit or set NVCC")
    return nvcc


class CudaBuilder:
    """Compile CUDA sources to cubins with nvcc in parallel; works without a GPU."""

    def __init__(self, arch: str = "sm_80", workers: int = 2, timeout_s: float = 120.0,
                 workdir: str | Path | None = None, flags: tuple[str, ...] = NVCC_FLAGS):
        if not re.fullmatch(r"sm_\d+[af]?", arch):
            raise UsageError(f"CUDA architecture {arch!r} is not of the form sm_80, sm_90a")
        self.nvcc, self.arch, self.timeout_s, self.flags = nvcc_path(), arch, timeout_s, tuple(flags)
        self._own = workdir is None
        self.workdir = Path(workdir) if workdir else private_workdir("autotune-cuda-")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="nvcc")

    def build(self, source: str) -> tuple[str | None, str, float, dict]:
        """(cubin path or None, error, seconds, resource usage such as registers and spills)."""
        digest = hashlib.sha1(f"{self.nvcc} {self.arch} {self.flags}\n{source}".encode()).hexdigest()[:20]
        cubin, src = self.workdir / f"k_{digest}.cubin", self.workdir / f"k_{digest}.cu"
        log = self.workdir / f"k_{digest}.log"
        if cubin.exists():
            return str(cubin), "", 0.0, _resources(log.read_text() if log.exists() else "")
        src.write_text(source)
        tmp = self.workdir / f"k_{digest}.{os.getpid()}.{threading.get_ident()}.tmp.cubin"
        t0 = time.perf_counter()
        try:
            r = subprocess.run([self.nvcc, "-cubin", f"-arch={self.arch}", *self.flags, "-o", str(tmp), str(src)],
                               capture_output=True, text=True, timeout=self.timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return None, f"nvcc did not finish within {self.timeout_s:g} s", time.perf_counter() - t0, {}
        spent = time.perf_counter() - t0
        text = (r.stdout or "") + (r.stderr or "")
        if r.returncode != 0:
            return None, text.strip()[-2000:] or f"nvcc exit status {r.returncode}", spent, {}
        log.write_text(text)
        os.replace(tmp, cubin)
        return str(cubin), "", spent, _resources(text)

    def build_many(self, sources: list[str | None]) -> list[tuple | None]:
        futures = [self.pool.submit(self.build, s) if s is not None else None for s in sources]
        return [f.result() if f is not None else None for f in futures]

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        if self._own:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _resources(text: str) -> dict:
    out = {}
    if m := re.search(r"REG:(\d+)", text) or re.search(r"Used (\d+) registers", text):
        out["registers"] = int(m.group(1))
    if m := re.search(r"SHARED:(\d+)", text):
        out["shared_bytes"] = int(m.group(1))
    if m := re.search(r"(\d+) bytes spill stores", text):
        out["spill_store_bytes"] = int(m.group(1))
    return out


class GpuWorker:
    """The isolated worker process of one GPU; restarted on demand."""

    def __init__(self, index: int = 0, backend: str = "auto"):
        if backend not in CUDA_BACKENDS:
            raise UsageError(f"unknown CUDA backend {backend!r}; valid: {', '.join(CUDA_BACKENDS)}")
        self.index, self.backend, self.proc, self.props = index, backend, None, None
        self.restarts = -1
        self._setup = None

    def start(self) -> dict:
        if self.proc is not None and self.proc.poll() is None:
            return self.props
        self.proc = subprocess.Popen([sys.executable, "-m", "autotune.runners.cuda_worker", str(self.index),
                                      self.backend], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.restarts += 1
        frame = read_frame(self.proc.stdout.fileno(), time.perf_counter() + 120)
        kind, payload = pickle.loads(frame) if frame else ("fatal", "the CUDA worker exited at start-up")
        if kind != "ready":
            self.kill()
            if "not installed" in str(payload):
                raise MissingDependencyError(f"the CUDA runner needs pycuda or cupy: {payload}; "
                                             "install it with pip install 'autotune[cuda]'")
            raise UsageError(f"no usable CUDA device {self.index}: {payload}")
        self.props = payload
        if self._setup is not None:
            self.request(self._setup, 600)
        return self.props

    def setup(self, inputs, out_shape) -> None:
        self._setup = ("setup", inputs, tuple(out_shape))
        self.start()
        self.request(self._setup, 600)

    def setup_args(self, arguments: list) -> None:
        """Copy a user kernel's arguments (numpy arrays and scalars) to the GPU, again after each restart."""
        self._setup = ("setup_args", list(arguments))
        self.start()
        reply = self.request(self._setup, 600)
        if reply[0] != "ok":
            raise UsageError(f"could not copy the kernel arguments to GPU {self.index}: {reply[1]}")

    def request(self, req: tuple, timeout_s: float) -> tuple:
        """A reply, ("timeout", text) or ("died", text); the worker is killed after the latter two."""
        try:
            write_frame(self.proc.stdin.fileno(), pickle.dumps(req, protocol=pickle.HIGHEST_PROTOCOL))
            frame = read_frame(self.proc.stdout.fileno(), time.perf_counter() + timeout_s)
        except TimeoutError:
            self.kill()
            return ("timeout", f"did not finish within {timeout_s:g} s; the GPU worker was restarted")
        except OSError as exc:
            self.kill()
            return ("died", f"the GPU worker failed: {exc}")
        if frame is None:
            code = self.proc.wait(10)
            self.kill()
            return ("died", f"the GPU worker exited with status {code}")
        reply = pickle.loads(frame)
        if reply[0] == "error" and reply[2]:
            self.kill()  # fatal: the context is gone; the next request starts a fresh worker
        return reply

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(10)
            for f in (self.proc.stdin, self.proc.stdout):
                if f:
                    f.close()
            self.proc = None


def probe_cuda_device(index: int = 0, backend: str = "auto") -> dict:
    """Properties of one GPU (name, cc, SMs, clocks, memory, versions, backend) from a short-lived worker."""
    w = GpuWorker(index, backend)
    try:
        return w.start()
    finally:
        w.kill()


@cache
def _stage_builder(arch: str, timeout_s: float) -> CudaBuilder:
    return CudaBuilder(arch, 1, timeout_s)


@dataclass(frozen=True)
class CudaBuildStage:
    """Compile one candidate of a CUDA template with nvcc, anywhere (no GPU needed): the cubin's bytes."""

    template: KernelTemplate
    arch: str
    timeout_s: float

    def __call__(self, task: Task, cand: Candidate) -> Built:
        if not self.template.space().contains(cand):
            return Built(None, "not a valid point of the kernel's knob space", invalid=True)
        cubin, err, spent, res = _stage_builder(self.arch, self.timeout_s).build(self.template.source(cand.payload))
        return Built(Path(cubin).read_bytes() if cubin else None, err, spent, res)


def run_on_worker(worker: GpuWorker, request: tuple, timeout_s: float, cand: Candidate, build_s: float, meta: dict
                  ) -> tuple[Measurement | None, object, float]:
    """Send one run request to the GPU worker (started again if it died): (the failed Measurement, None,
    seconds) when the worker could not start, timed out or reported an error, else (None, its reply, seconds)."""
    t0 = time.perf_counter()
    try:
        worker.start()
    except UsageError as exc:
        return Measurement(cand, Status.RUNTIME_ERROR, error=str(exc), build_s=build_s, meta=meta), None, 0.0
    reply = worker.request(request, timeout_s)
    run_s = time.perf_counter() - t0
    meta["worker_restarts"] = worker.restarts
    if reply[0] == "timeout":
        return Measurement(cand, Status.TIMEOUT, error=reply[1], build_s=build_s, run_s=run_s, meta=meta), None, run_s
    if reply[0] != "ok":
        return (Measurement(cand, Status.RUNTIME_ERROR, error=reply[1], build_s=build_s, run_s=run_s, meta=meta),
                None, run_s)
    return None, reply[1], run_s


class CudaRunner(BatchRunner):
    def __init__(self, template: KernelTemplate, device_index: int = 0, backend: str = "auto",
                 protocol: Protocol | None = None, build_workers: int | None = None, compile_timeout_s: float = 120.0,
                 run_timeout_s: float = 20.0, seed: int = 0, check: bool = True):
        if template.target != "cuda":
            raise UsageError(f"CudaRunner runs cuda templates; {template.name} targets {template.target!r}")
        self.template, self.protocol, self.run_timeout_s, self.check = template, protocol or Protocol(), \
            run_timeout_s, check
        self.worker = GpuWorker(device_index, backend)
        props = self.worker.start()
        cc = props["cc"]
        # one nvcc per core by default: a batch compiles in parallel while the GPU waits for it
        self.builder = CudaBuilder(f"sm_{cc[0]}{cc[1]}", build_workers or os.cpu_count() or 2, compile_timeout_s)
        self.device = Device(props["name"], "cuda", {k: v for k, v in props.items() if k != "backend"})
        self.inputs = template.make_inputs(seed)
        self.reference = template.reference(self.inputs)
        self.worker.setup(self.inputs, template.output_shape())

    def _prepare(self, task: Task, candidates: list[Candidate]) -> list:
        if task.key != self.template.task.key:
            raise UsageError(f"this runner measures {self.template.task.name} {self.template.task.params}, "
                             f"not {task.name} {task.params}")
        space = self.template.space()
        sources = [self.template.source(c.payload) if space.contains(c) else None for c in candidates]
        builds = self.builder.build_many(sources)
        return builds

    def build_stage(self) -> CudaBuildStage:
        return CudaBuildStage(self.template, self.builder.arch, self.builder.timeout_s)

    def run_built(self, task: Task, cand: Candidate, built: Built) -> Measurement:
        if built.invalid:
            return self._run(cand, None)
        return self._run(cand, (built.artifact, built.error, built.build_s, built.info))

    def _run(self, cand: Candidate, build) -> Measurement:
        meta = {"protocol": self.protocol.to_json(), "backend": self.worker.props.get("backend"), "runner": "cuda",
                "arch": self.builder.arch}
        if build is None:
            return Measurement(cand, Status.INVALID, error="not a valid point of the kernel's knob space", meta=meta)
        cubin, err, build_s, res = build
        meta.update(res)
        if cubin is None:
            return Measurement(cand, Status.COMPILE_ERROR, error=err, build_s=build_s, meta=meta)
        grid, block, shared = self.template.launch(cand.payload)
        image = cubin if isinstance(cubin, bytes) else Path(cubin).read_bytes()
        failed, reply, run_s = run_on_worker(self.worker, ("run", image, grid, block, shared, self.protocol),
                                             self.run_timeout_s, cand, build_s, meta)
        if failed is not None:
            return failed
        times, out = reply
        meta["repeats"] = len(times)
        if self.check and (why := self.template.check(out, self.reference)):
            return Measurement(cand, Status.WRONG_RESULT, times=list(times), error=why, build_s=build_s,
                               run_s=run_s, meta=meta)
        m = Measurement(cand, Status.OK, times=list(times), build_s=build_s, run_s=run_s, meta=meta)
        meta["gflops"] = self.template.flops / m.cost / 1e9
        meta["gbytes_s"] = self.template.bytes / m.cost / 1e9
        return m

    def close(self) -> None:
        self.worker.kill()
        self.builder.close()
