"""The per-GPU worker behind runners.cuda.CudaRunner (``python -m autotune.runners.cuda_worker INDEX BACKEND``).

It owns one CUDA context. Requests and replies are length-prefixed pickles on
stdin/stdout (runners.workers frames):
  start-up reply          ("ready", props) or ("fatal", text)
  ("setup", inputs, out_shape)                   -> ("ok", None)
  ("run", cubin, grid, block, shared, protocol)  -> ("ok", (times, output)) or ("error", text, fatal)
A user's kernel (Kernel Tuner's convention: any list of numpy arrays and numpy scalars) instead:
  ("setup_args", arguments)                      -> ("ok", None)
  ("run_args", cubin, symbol, grid, block, shared, protocol, outputs)
        -> ("ok", (times, {index: array})) or ("error", text, fatal): the arrays are reset from the
           host copies, the first launch's outputs (the indices listed) are copied back, then timed.
After a fatal error (a failed launch: an illegal address ruins the context) the worker
exits and the runner starts a fresh one. Kernels are timed with CUDA events.
"""

from __future__ import annotations

import atexit
import os
import pickle
import sys
import traceback

import numpy as np

from autotune.runners.timing import Protocol, repeat
from autotune.runners.workers import read_frame, write_frame


class PyCudaBackend:
    name = "pycuda"

    def __init__(self, index: int):
        import pycuda.driver as cuda

        self.cuda = cuda
        cuda.init()
        self.dev = cuda.Device(index)
        self.ctx = self.dev.make_context()
        self.bufs: list = []
        atexit.register(self._pop)

    def _pop(self) -> None:
        try:
            self.ctx.pop()
        except Exception:  # noqa: BLE001, S110 - a context ruined by a fatal error cannot be popped cleanly
            pass

    def props(self) -> dict:
        a, cuda, dev = self.cuda.device_attribute, self.cuda, self.dev
        g = dev.get_attribute
        return {"name": dev.name(), "cc": list(dev.compute_capability()), "sms": g(a.MULTIPROCESSOR_COUNT),
                "clock_khz": g(a.CLOCK_RATE), "memory_clock_khz": g(a.MEMORY_CLOCK_RATE),
                "memory_bus_bits": g(a.GLOBAL_MEMORY_BUS_WIDTH), "memory_bytes": dev.total_memory(),
                "l2_bytes": g(a.L2_CACHE_SIZE), "max_threads_per_block": g(a.MAX_THREADS_PER_BLOCK),
                "max_shared_per_block": g(a.MAX_SHARED_MEMORY_PER_BLOCK),
                "max_registers_per_block": g(a.MAX_REGISTERS_PER_BLOCK),
                "driver_version": cuda.get_driver_version(), "cuda_version": ".".join(map(str, cuda.get_version())),
                "backend": self.name}

    def setup(self, inputs: list[np.ndarray], out_shape: tuple) -> None:
        cuda = self.cuda
        self.bufs = [cuda.to_device(np.ascontiguousarray(x, dtype=np.float32)) for x in inputs]
        self.out_shape = tuple(out_shape)
        self.out = cuda.mem_alloc(int(np.prod(out_shape)) * 4)
        self.l2 = cuda.mem_alloc(max(1, self.dev.get_attribute(cuda.device_attribute.L2_CACHE_SIZE)) * 2)

    def load(self, cubin: bytes, symbol: str = "kernel"):
        self._module = self.cuda.module_from_buffer(cubin)  # kept alive while its function is used
        return self._module.get_function(symbol)

    def setup_args(self, arguments: list) -> None:
        cuda = self.cuda
        self.host_args = [np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a for a in arguments]
        self.dev_args = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in self.host_args]

    def run_args(self, fn, grid, block, shared, protocol: Protocol, outputs: list[int]):
        cuda = self.cuda
        for h, d in zip(self.host_args, self.dev_args):
            if isinstance(h, np.ndarray):
                cuda.memcpy_htod(d, h)
        start, end = cuda.Event(), cuda.Event()
        launch = {"grid": tuple(grid), "block": tuple(block), "shared": int(shared)}
        fn(*self.dev_args, **launch)
        cuda.Context.synchronize()
        out = {}
        for i in outputs:
            out[i] = np.empty_like(self.host_args[i])
            cuda.memcpy_dtoh(out[i], self.dev_args[i])

        def timed() -> float:
            start.record()
            fn(*self.dev_args, **launch)
            end.record()
            end.synchronize()
            return start.time_till(end) * 1e-3

        return repeat(timed, protocol), out

    def run(self, fn, grid, block, shared, protocol: Protocol) -> tuple[list[float], np.ndarray]:
        cuda = self.cuda
        cuda.memcpy_htod(self.out, np.full(self.out_shape, np.nan, dtype=np.float32))
        args = [*self.bufs, self.out]
        start, end = cuda.Event(), cuda.Event()
        l2_bytes = self.dev.get_attribute(cuda.device_attribute.L2_CACHE_SIZE) * 2

        def timed() -> float:
            if protocol.flush_l2:
                cuda.memset_d8(self.l2, 0, l2_bytes)
            start.record()
            fn(*args, grid=tuple(grid), block=tuple(block), shared=int(shared))
            end.record()
            end.synchronize()
            return start.time_till(end) * 1e-3

        times = repeat(timed, protocol)
        out = np.empty(self.out_shape, dtype=np.float32)
        cuda.memcpy_dtoh(out, self.out)
        return times, out


class CupyBackend:
    name = "cupy"

    def __init__(self, index: int):
        import cupy

        self.cp = cupy
        self.index = index
        cupy.cuda.Device(index).use()

    def props(self) -> dict:
        rt = self.cp.cuda.runtime
        p = rt.getDeviceProperties(self.index)
        name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
        v = rt.runtimeGetVersion()
        return {"name": name, "cc": [p["major"], p["minor"]], "sms": p["multiProcessorCount"],
                "clock_khz": p.get("clockRate"), "memory_clock_khz": p.get("memoryClockRate"),
                "memory_bus_bits": p.get("memoryBusWidth"), "memory_bytes": p["totalGlobalMem"],
                "l2_bytes": p.get("l2CacheSize"), "max_threads_per_block": p["maxThreadsPerBlock"],
                "max_shared_per_block": p["sharedMemPerBlock"], "max_registers_per_block": p["regsPerBlock"],
                "driver_version": rt.driverGetVersion(), "cuda_version": f"{v // 1000}.{v % 1000 // 10}",
                "backend": self.name}

    def setup(self, inputs, out_shape) -> None:
        cp = self.cp
        self.bufs = [cp.asarray(np.ascontiguousarray(x, dtype=np.float32)) for x in inputs]
        self.out = cp.empty(tuple(out_shape), dtype=cp.float32)
        self.l2 = cp.empty(max(1, int(self.props().get("l2_bytes") or 1)) * 2, dtype=cp.uint8)

    def load(self, cubin: bytes, symbol: str = "kernel"):
        import tempfile

        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(cubin)
        try:
            self._module = self.cp.RawModule(path=f.name)  # kept alive while its function is used
            return self._module.get_function(symbol)
        finally:
            os.unlink(f.name)

    def setup_args(self, arguments: list) -> None:
        cp = self.cp
        self.host_args = [np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a for a in arguments]
        self.dev_args = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in self.host_args]

    def run_args(self, fn, grid, block, shared, protocol: Protocol, outputs: list[int]):
        cp = self.cp
        for h, d in zip(self.host_args, self.dev_args):
            if isinstance(h, np.ndarray):
                d.set(h)
        args = tuple(self.dev_args)
        fn(tuple(grid), tuple(block), args, shared_mem=int(shared))
        cp.cuda.Device().synchronize()
        out = {i: cp.asnumpy(self.dev_args[i]) for i in outputs}
        start, end = cp.cuda.Event(), cp.cuda.Event()

        def timed() -> float:
            start.record()
            fn(tuple(grid), tuple(block), args, shared_mem=int(shared))
            end.record()
            end.synchronize()
            return cp.cuda.get_elapsed_time(start, end) * 1e-3

        return repeat(timed, protocol), out

    def run(self, fn, grid, block, shared, protocol: Protocol):
        cp = self.cp
        self.out.fill(cp.nan)
        args = (*self.bufs, self.out)
        start, end = cp.cuda.Event(), cp.cuda.Event()

        def timed() -> float:
            if protocol.flush_l2:
                self.l2.fill(0)
            start.record()
            fn(tuple(grid), tuple(block), args, shared_mem=int(shared))
            end.record()
            end.synchronize()
            return cp.cuda.get_elapsed_time(start, end) * 1e-3

        times = repeat(timed, protocol)
        return times, cp.asnumpy(self.out)


def make_backend(index: int, preference: str = "auto"):
    errors = []
    order = {"auto": ("pycuda", "cupy"), "pycuda": ("pycuda",), "cupy": ("cupy",)}[preference]
    for name in order:
        try:
            return PyCudaBackend(index) if name == "pycuda" else CupyBackend(index)
        except ImportError as exc:
            errors.append(f"{name} is not installed ({exc.name})")
    raise ImportError("; ".join(errors))


def serve(index: int, preference: str, inp: int, out: int) -> int:
    send = lambda obj: write_frame(out, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
    try:
        be = make_backend(index, preference)
        send(("ready", be.props()))
    except BaseException as exc:  # noqa: BLE001 - reported to the runner
        send(("fatal", f"{type(exc).__name__}: {exc}"))
        return 2
    while (frame := read_frame(inp)) is not None:
        req = pickle.loads(frame)
        if req[0] in ("setup", "setup_args"):
            try:
                be.setup(req[1], req[2]) if req[0] == "setup" else be.setup_args(req[1])
                send(("ok", None))
            except Exception as exc:  # noqa: BLE001 - e.g. out of device memory
                send(("error", f"could not set up the inputs: {type(exc).__name__}: {exc}", True))
                return 3
            continue
        if req[0] == "run_args":
            _, cubin, symbol, grid, block, shared, protocol, outputs = req
        else:
            (_, cubin, grid, block, shared, protocol), symbol = req, "kernel"
        try:
            fn = be.load(cubin, symbol)
        except Exception as exc:  # noqa: BLE001 - a module that does not load spoils nothing
            send(("error", f"could not load the cubin: {type(exc).__name__}: {exc}", False))
            continue
        try:
            if req[0] == "run_args":
                send(("ok", be.run_args(fn, grid, block, shared, protocol, outputs)))
            else:
                send(("ok", be.run(fn, grid, block, shared, protocol)))
        except Exception as exc:  # noqa: BLE001 - a failed launch may have ruined the context
            send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=2)}", True))
            return 3
    return 0


if __name__ == "__main__":
    from autotune.runners.processes import die_with_parent

    die_with_parent()  # a GPU worker never outlives the runner that started it
    stdout = os.dup(1)
    os.dup2(2, 1)  # library chatter goes to stderr; replies use the saved stdout
    sys.exit(serve(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "auto", sys.stdin.fileno(), stdout))
