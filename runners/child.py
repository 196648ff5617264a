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
from autotune.runners.timing import Protocol, time_calls


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
