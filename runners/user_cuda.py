"""UserCudaRunner: a user's own CUDA kernel (Kernel Tuner's convention), built by nvcc and launched by
the GPU worker of runners/cuda.py with the user's arguments; the kernel is found by name among the
cubin's function symbols, plain or C++-mangled."""

from __future__ import annotations

import re
from pathlib import Path

from autotune.errors import UsageError
from autotune.runners.base import BatchRunner
from autotune.runners.cuda import NVCC_FLAGS, CudaBuilder, GpuWorker, run_on_worker
from autotune.runners.timing import Protocol
from autotune.search_spaces.kernels.user_arguments import verify_outputs
from autotune.types import Candidate, Device, Measurement, Status, Task


def cubin_functions(image: bytes) -> list[tuple[str, bool]]:
    """The function symbols of a cubin (an ELF file): (name, is a kernel entry point), read from its
    symbol table; [] when the image is not a 64-bit little-endian ELF file."""
    import struct

    if len(image) < 64 or image[:4] != b"\x7fELF" or image[4] != 2 or image[5] != 1:
        return []
    shoff, = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", image, 0x3A)
    sections = []
    for k in range(shnum):
        at = shoff + k * shentsize
        if at + 64 > len(image):
            return []
        _name, sh_type, _flags, _addr, offset, size, link, _info, _align, entsize = \
            struct.unpack_from("<IIQQQQIIQQ", image, at)
        sections.append((sh_type, offset, size, link, entsize))
    out = []
    for sh_type, offset, size, link, entsize in sections:
        if sh_type != 2 or entsize < 24 or link >= len(sections):  # SHT_SYMTAB
            continue
        str_off = sections[link][1]
        for at in range(offset, min(offset + size, len(image) - 23), entsize):
            st_name, st_info, st_other, _shndx, _value, _size = struct.unpack_from("<IBBHQQ", image, at)
            if st_info & 0xF != 2:  # STT_FUNC
                continue
            end = image.find(b"\0", str_off + st_name)
            name = image[str_off + st_name:end].decode("ascii", "replace")
            out.append((name, bool(st_other & 0x10)))  # STO_CUDA_ENTRY: a __global__ function
    return out


def find_kernel_symbol(image: bytes, kernel_name: str) -> tuple[str | None, str]:
    """The symbol of ``kernel_name`` in a cubin: the plain name (extern "C") or its C++ mangled name
    (``_Z<len><name>...``, also inside namespaces), so sources need no extern "C"; (None, why) when
    there is none or several (overloads, several template instantiations)."""
    base = kernel_name.split("<", 1)[0].strip()
    # the length prefix makes this exact: _Z10vector_addPfS_i, _ZN2ns10vector_addEPf, _Z10vector_addIfEvPT_
    mangled = re.compile(r"_Z(?:N(?:\d+[A-Za-z_]\w*?)*?)?" + str(len(base)) + re.escape(base))
    funcs = cubin_functions(image)
    entries = [n for n, entry in funcs if entry] or [n for n, _ in funcs]
    if base in entries:
        return base, ""
    found = [n for n in entries if mangled.match(n)]
    if len(found) == 1:
        return found[0], ""
    if not found:
        return None, (f"no kernel named {kernel_name!r} in the compiled code; its kernels: "
                      f"{', '.join(entries) or 'none'}")
    return None, (f"several kernels match {kernel_name!r} ({', '.join(found)}); overloads and several template "
                  "instantiations are not supported: give the kernel a unique name or mark it extern \"C\"")


class UserCudaRunner(BatchRunner):
    """Compile a user's own CUDA kernel with nvcc and time it on one GPU (Kernel Tuner's convention).

    Each configuration is the user's source with its defines (search_spaces/kernels/user_kernel.py), compiled
    to a cubin; the kernel is found by its name in the cubin's symbols (plain or C++-mangled, see
    ``find_kernel_symbol``) and launched with the grid and block of the configuration and the user's
    arguments (arrays as device pointers, numpy scalars by value), reset from the host copies before each
    configuration. The first launch's outputs are checked against ``answer``; launches are timed with
    CUDA events through pycuda or CuPy in the GPU worker process."""

    def __init__(self, kernel, arguments: list, answer: list | None = None, atol: float = 1e-6, verify=None,
                 device_index: int = 0, backend: str = "auto", protocol: Protocol | None = None,
                 compiler_options: list[str] | tuple[str, ...] = (), build_workers: int = 2,
                 compile_timeout_s: float = 120.0, run_timeout_s: float = 20.0):
        if kernel.lang != "CUDA":
            raise UsageError(f"UserCudaRunner runs CUDA kernels; {kernel.kernel_name} is {kernel.lang}")
        self.kernel, self.arguments, self.answer, self.atol, self.verify = kernel, list(arguments), answer, atol, verify
        self.protocol, self.run_timeout_s = protocol or Protocol(), run_timeout_s
        self.outputs = [i for i, a in enumerate(answer or []) if a is not None]
        self.worker = GpuWorker(device_index, backend)
        props = self.worker.start()
        cc = props["cc"]
        self.builder = CudaBuilder(f"sm_{cc[0]}{cc[1]}", build_workers, compile_timeout_s,
                                   flags=(*NVCC_FLAGS, *map(str, compiler_options)))
        self.device = Device(props["name"], "cuda", {k: v for k, v in props.items() if k != "backend"})
        try:
            self.worker.setup_args(self.arguments)
        except UsageError:
            self.close()
            raise

    def _prepare(self, task: Task, candidates: list[Candidate]) -> list:
        if task.key != self.kernel.task.key:
            raise UsageError(f"this runner measures {self.kernel.task.name}, not {task.name} {task.params}")
        space = self.kernel.space()
        sources: list[str | None] = []
        for c in candidates:
            try:
                sources.append(self.kernel.source(c.payload) if space.contains(c) else None)
            except (UsageError, KeyError, ValueError, TypeError):
                sources.append(None)
        builds = self.builder.build_many(sources)
        return builds

    def _run(self, cand: Candidate, build) -> Measurement:
        meta = {"protocol": self.protocol.to_json(), "backend": self.worker.props.get("backend"),
                "runner": "user-cuda", "arch": self.builder.arch}
        if build is None:
            return Measurement(cand, Status.INVALID, error="not a valid point of the kernel's parameter space", meta=meta)
        cubin, err, build_s, res = build
        meta.update(res)
        if cubin is None:
            return Measurement(cand, Status.COMPILE_ERROR, error=err, build_s=build_s, meta=meta)
        image = Path(cubin).read_bytes()
        symbol, why = find_kernel_symbol(image, self.kernel.kernel_name)
        if symbol is None:
            return Measurement(cand, Status.COMPILE_ERROR, error=why, build_s=build_s, meta=meta)
        cfg = cand.payload
        grid, block, shared = self.kernel.grid(cfg), self.kernel.block(cfg), self.kernel.shared_bytes(cfg)
        meta.update(grid=list(grid), block=list(block))
        failed, reply, run_s = run_on_worker(
            self.worker, ("run_args", image, symbol, grid, block, shared, self.protocol, self.outputs),
            self.run_timeout_s, cand, build_s, meta)
        if failed is not None:
            return failed
        times, outputs = reply
        meta["repeats"] = len(times)
        if why := verify_outputs(self.answer, outputs, self.atol, self.verify):
            return Measurement(cand, Status.WRONG_RESULT, times=list(times), error=why, build_s=build_s,
                               run_s=run_s, meta=meta)
        return Measurement(cand, Status.OK, times=list(times), build_s=build_s, run_s=run_s, meta=meta)

    def close(self) -> None:
        self.worker.kill()
        self.builder.close()
