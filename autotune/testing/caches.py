"""Small synthetic Kernel Tuner caches for tests: one toy kernel on a few named GPUs with known optima."""

from __future__ import annotations

import gzip
import json
import math

NAMES = {"turing": "NVIDIA TITAN RTX", "turing2": "NVIDIA GeForce RTX 2080 Ti", "ampere": "NVIDIA GeForce RTX 3090",
         "ampere_laptop": "NVIDIA GeForce RTX 3060 Laptop GPU"}


def write_cache(path, device_name, time_fn, kernel="toy_kernel"):
    """A Kernel Tuner cache over a 4x4x2 space, times (ms) from time_fn(a, b, c)."""
    params = {"a": [1, 2, 4, 8], "b": [16, 32, 64, 128], "c": [0, 1]}
    cache = {}
    for a in params["a"]:
        for b in params["b"]:
            for c in params["c"]:
                t = time_fn(a, b, c)
                cache[f"{a},{b},{c}"] = {"a": a, "b": b, "c": c, "time": t, "times": [t, t * 1.01, t * 0.99],
                                         "compile_time": 100.0, "benchmark_time": 10.0}
    doc = {"device_name": device_name, "kernel_name": kernel, "problem_size": [64], "tune_params_keys": list(params),
           "tune_params": params, "cache": cache}
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return str(path)


def turing_time(a, b, c):  # best at a=4, b=64, c=1
    return 1.0 + (math.log2(a) - 2) ** 2 + (math.log2(b) - 6) ** 2 + (0 if c else 0.5)


def ampere_time(a, b, c):  # best at a=1, b=128, c=0: another optimum
    return 1.0 + (math.log2(a) - 0) ** 2 + 0.7 * (math.log2(b) - 7) ** 2 + (0.4 if c else 0)


def import_two_gpus(db, folder):
    """The toy kernel as a TITAN RTX (``turing_time``) and an RTX 3090 (``ampere_time``) measured it, each
    written as a cache in ``folder`` and imported into ``db``; the kernel's task."""
    from pathlib import Path

    from autotune.db.logs import import_kt

    folder = Path(folder)
    task, *_ = import_kt(db, write_cache(folder / "titan.json.gz", NAMES["turing"], turing_time))
    import_kt(db, write_cache(folder / "r3090.json.gz", NAMES["ampere"], ampere_time))
    return task
