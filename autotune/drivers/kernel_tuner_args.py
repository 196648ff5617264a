"""Kernel Tuner's arguments to ``tune_kernel``, read and checked before anything is built or stored: the kernel
source (code or a file name), its language, the strategy's autotune equivalent, and the other keyword options
(those that would change the results are refused, not ignored)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from autotune.algorithms.registry import ALGORITHMS, DEFAULT_ALGORITHM
from autotune.errors import UsageError
from autotune.search_spaces.kernels.user_kernel import LANGS

#: Kernel Tuner strategy -> autotune algorithm (None: our default search)
STRATEGIES: dict[str, str] = {
    "brute_force": "grid",
    "random_sample": "random",
    "genetic_algorithm": "evolutionary",
    "simulated_annealing": "mcmc",
    "mcmc": "mcmc",
}
#: strategies that are references: never guided by a cost model
UNGUIDED = ("brute_force", "random_sample", "grid", "random")

#: Kernel Tuner options accepted and ignored (they change nothing here)
IGNORED_KT_OPTIONS = ("log", "platform")
#: Kernel Tuner options that would change the results: refused rather than silently ignored
UNSUPPORTED_KT_OPTIONS = {
    "cmem_args": "constant memory arguments",
    "texmem_args": "texture memory arguments",
    "observers": "observers (power, NVML, registers)",
    "simulation_mode": "simulation mode (use autotune.tune_replay on the cache file)",
    "objective_higher_is_better": "objectives other than time",
}

# a source given as a file name (Kernel Tuner's rule, with the extensions of C, C++ and CUDA files)
SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hpp")


def _looks_like_filename(text: str) -> bool:
    if len(text) > 250 or "\n" in text or any(ch in text for ch in "();{}\\"):
        return False
    return text.strip().lower().endswith(SOURCE_SUFFIXES)


def read_source(kernel_source) -> tuple[str, Path | None]:
    """(code, file it came from or None): ``kernel_source`` is code, a file name, or a Path."""
    if isinstance(kernel_source, (list, tuple)):
        if len(kernel_source) != 1:
            raise UsageError("kernel_source as a list of several files is not supported; give the main file or "
                             "its code (#include the others)")
        kernel_source = kernel_source[0]
    if callable(kernel_source):
        raise UsageError("a kernel_source generator function is not supported; give the code or a file name")
    if isinstance(kernel_source, os.PathLike) or (isinstance(kernel_source, str) and _looks_like_filename(kernel_source)):
        path = Path(kernel_source)
        if not path.is_file():
            raise UsageError(f"kernel source file {str(path)!r} does not exist; give an existing file or the code "
                             "itself as a string")
        try:
            return path.read_text(), path.resolve()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read kernel source file {str(path)!r}: {exc}") from None
    if not isinstance(kernel_source, str) or not kernel_source.strip():
        raise UsageError(f"kernel_source must be the kernel's code or a file name, not {type(kernel_source).__name__}")
    return kernel_source, None


def detect_language(code: str, lang: str | None) -> str:
    if lang is None:
        return "CUDA" if "__global__" in code else "C"
    norm = {"c": "C", "cuda": "CUDA", "c++": "C", "cpp": "C"}.get(str(lang).lower())
    if norm is None:
        raise UsageError(f"unsupported lang {lang!r}; supported: {', '.join(LANGS)} (OpenCL, HIP, Fortran and "
                         "the other Kernel Tuner backends are not)")
    return norm


def choose_search(strategy: str | None, cost_model: str | None, budget_given: bool) -> tuple[str, str | None]:
    """(autotune algorithm, cost model) for a Kernel Tuner strategy name (or an autotune algorithm's)."""
    if strategy is None:
        if not budget_given:
            return "grid", None  # no budget: measure every valid point, as Kernel Tuner's default brute force
        return DEFAULT_ALGORITHM, cost_model
    if strategy in STRATEGIES:
        algo = STRATEGIES[strategy]
    elif strategy in ALGORITHMS:
        algo = strategy
    else:
        raise UsageError(f"unknown strategy {strategy!r}; valid: {', '.join(STRATEGIES)} (Kernel Tuner's names) "
                         f"or autotune's algorithms {', '.join(ALGORITHMS)}")
    return algo, (None if strategy in UNGUIDED else cost_model)


def check_options(options: dict) -> tuple[dict, int, int | None]:
    """(strategy_options, device index, smem_args) from Kernel Tuner's other keyword options."""
    for name, value in options.items():
        if name in UNSUPPORTED_KT_OPTIONS and value not in (None, False, {}, []):
            raise UsageError(f"{name}: {UNSUPPORTED_KT_OPTIONS[name]} are not supported by autotune's tune_kernel")
    known = {"strategy_options", "device", "smem_args", "metrics", "compiler", "defines", "objective",
             "c_timing", "run_timeout", "backend", "transfer_from", "fresh", "retry_failed", *IGNORED_KT_OPTIONS,
             *UNSUPPORTED_KT_OPTIONS}
    unknown = [n for n in options if n not in known]
    if unknown:
        raise UsageError(f"unknown option(s) {', '.join(unknown)}; see docs/kernel-tuner.md for the options "
                         "tune_kernel accepts")
    objective = options.get("objective")
    if objective not in (None, "time"):
        raise UsageError(f"objective {objective!r} is not supported; tune_kernel minimises time")
    so = options.get("strategy_options") or {}
    if not isinstance(so, Mapping):
        raise UsageError("strategy_options must be a dict (e.g. {'max_fevals': 100})")
    device = options.get("device") or 0
    if not isinstance(device, (int, np.integer)) or device < 0:
        raise UsageError(f"device must be a GPU index (0, 1, ...), not {device!r}")
    return dict(so), int(device), options.get("smem_args")


def finite_number(value, what: str, positive: bool) -> float:
    """``value`` as a finite float, > 0 when ``positive`` else >= 0; UsageError "``what`` must be ..., not ..."."""
    bound = "positive" if positive else "non-negative"
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise UsageError(f"{what.format(bound)}, not {type(value).__name__} {value!r}")
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise UsageError(f"{what.format(bound)}, not {value!r}")
    return float(value)


def check_cache_path(cache) -> None:
    """A cache file name whose folder exists (the file is written after the search: a bad path must fail
    before it, not throw the measurements' record away after), or UsageError."""
    if not isinstance(cache, (str, os.PathLike)) or not str(cache).strip():
        raise UsageError(f"cache must be a file name, not {type(cache).__name__} {cache!r}")
    path = Path(cache)
    if path.is_dir():
        raise UsageError(f"cache {str(path)!r} is a directory; give a file name such as {str(path / 'cache.json')!r}")
    if not path.parent.is_dir():
        raise UsageError(f"cache {str(path)!r}: the directory {str(path.parent)!r} does not exist; create it or "
                         "name a file in an existing one")
