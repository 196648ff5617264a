"""Lazy plug-in tables: a name maps to a "module:attr" string, imported only when asked for,
so a missing optional dependency affects only the entry that needs it."""

from __future__ import annotations

import importlib
from typing import Any

from autotune.errors import MissingDependencyError, UsageError

# which pip extra provides a module that an entry imports
EXTRAS = {"pycuda": "cuda", "psycopg": "postgres", "kernel_tuner": "bench", "onnx": "graphs", "onnxruntime": "graphs",
          "z3": "graphs", "torch": "torch"}


def load(table: dict[str, str], kind: str, name: str) -> Any:
    """The object ``table[name]`` names; a clear error for an unknown name or a missing extra."""
    if name not in table:
        raise UsageError(f"unknown {kind} {name!r}; valid: {', '.join(sorted(table))}")
    module, _, attr = table[name].partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        missing = (exc.name or "").split(".")[0]
        extra = EXTRAS.get(missing)
        hint = f"; install it with pip install 'autotune[{extra}]'" if extra else ""
        raise MissingDependencyError(f"{kind} {name!r} needs the package {missing!r}{hint}") from exc
