"""Code that runs inside an isolated worker process (preloaded by the forkserver).

It sets the BLAS thread count before numpy is imported: the worker only times a
kernel, and a BLAS thread pool would compete with the kernel's own OpenMP threads.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import ctypes

import numpy as np

from autotune.runners.timing import Protocol, repeat, time_calls


def run_shared_object(so_path: str, symbol: str, inputs: list[np.ndarray], out_shape: tuple[int, ...],
                      protocol: Protocol) -> tuple[list[float], np.ndarray]:
    """Load ``so_path``, time ``symbol(in0, ..., out)`` under ``protocol``; (times, output).

    The output starts as NaN, so an element the kernel never writes fails the check."""
    lib = ctypes.CDLL(so_path)
    fn = getattr(lib, symbol)
    fn.restype = None
    out = np.full(out_shape, np.nan, dtype=np.float32)
    arrays = [np.ascontiguousarray(a, dtype=np.float32) for a in inputs] + [out]
    fn.argtypes = [ctypes.c_void_p] * len(arrays)
    ptrs = [a.ctypes.data for a in arrays]
    times = time_calls(lambda: fn(*ptrs), protocol)
    return times, out


# numpy scalar dtype -> the ctypes type a C function receives it as (by value)
CTYPES_SCALARS = {
    "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
    "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float, "float64": ctypes.c_double,
}
RESTYPES = {"float": ctypes.c_float, "double": ctypes.c_double, "void": None}


def run_user_function(so_path: str, symbol: str, arguments: list, restype: str, timing: str,
                      protocol: Protocol, outputs: list[int]) -> tuple[list[float], dict[int, np.ndarray]]:
    """Call a user's C function ``symbol(arg0, ...)`` (Kernel Tuner's convention): arrays are passed as
    pointers to their data, numpy scalars by value as their C type. The first call, on the arguments as
    given, is the correctness run: copies of the arrays listed in ``outputs`` are returned. Then the
    function is timed under ``protocol``: by the wall clock (``timing="runner"``) or by what it returns,
    its own time in milliseconds (``timing="kernel"``, Kernel Tuner's C convention). Times in seconds."""
    lib = ctypes.CDLL(so_path)
    fn = getattr(lib, symbol)
    fn.restype = RESTYPES[restype]
    argtypes, values = [], []
    for i, a in enumerate(arguments):
        if isinstance(a, np.ndarray):
            a = arguments[i] = np.ascontiguousarray(a)
            argtypes.append(ctypes.c_void_p)
            values.append(a.ctypes.data)
        else:
            ct = CTYPES_SCALARS[np.asarray(a).dtype.name]
            argtypes.append(ct)
            values.append(ct(a.item() if isinstance(a, np.generic) else a))
    fn.argtypes = argtypes
    fn(*values)
    out = {i: np.array(arguments[i], copy=True) for i in outputs}
    if timing == "kernel":
        def timed() -> float:
            ms = fn(*values)
            if ms is None or not np.isfinite(ms) or ms < 0:
                raise ValueError(f"{symbol} returned {ms!r} as its time: with timing='kernel' (Kernel Tuner's C "
                                 "convention) the function must return its own time in milliseconds as a float; "
                                 "use timing='runner' for a void function timed by autotune")
            return float(ms) * 1e-3

        times = repeat(timed, protocol)
    else:
        times = time_calls(lambda: fn(*values), protocol)
    return times, out
