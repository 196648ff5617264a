"""Lazy plug-in tables: a name maps to a "module:attr" string, imported only when asked for,
so a missing optional dependency affects only the entry that needs it. Where a table's name is
taken, a user's own class may be named as "module:Class" too (:func:`load_user`)."""

from __future__ import annotations

import importlib
import os
import sys
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


class LazyModule:
    """A module imported on its first attribute access: ``xgb = LazyModule("xgboost")`` in a module that
    imports it at the top, so that a process that never trains a model (a query, a script refusing its
    arguments) does not pay the import (xgboost's is about a second, pandas with it)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


def is_spec(name: Any) -> bool:
    """Whether ``name`` names a class of the user's own as "module:Class" rather than a registered entry."""
    return isinstance(name, str) and ":" in name


def load_user(spec: str, kind: str, base: type) -> type:
    """The subclass of ``base`` that ``spec`` names as "module:Class" (a dotted module on ``sys.path``, or in the
    working directory, as a command run there expects); UsageError naming what is wrong when the module cannot
    be imported, has no such class, or the class is not a ``base``. An exception the module's own code raises
    while it is imported is not caught: its traceback is the user's to read."""
    module, _, attr = spec.partition(":")
    form = f"MODULE:CLASS, a {base.__name__} subclass in an importable module"
    if not module or not attr:
        raise UsageError(f"{kind} {spec!r} is not {form} (for example mysearch:MySearch)")
    try:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            here = os.getcwd()
            if exc.name != module.split(".")[0] or here in sys.path or "" in sys.path:
                raise
            sys.path.append(here)  # after the installed packages: a module here never shadows one of them
            mod = importlib.import_module(module)
    except ImportError as exc:
        raise UsageError(f"{kind} {spec!r}: cannot import {module!r} ({exc}); it must be {form} on the Python "
                         "path (PYTHONPATH) or in the working directory") from None
    cls = mod
    for part in attr.split("."):
        cls = getattr(cls, part, None)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        found = "no such name" if cls is None else f"a {type(cls).__name__}, not a {base.__name__} subclass"
        raise UsageError(f"{kind} {spec!r}: {module}.{attr} is {found}; it must be {form}")
    return cls
