"""Recorded tuning spaces (Kernel Tuner cache files) and the knob space they define.

A cache maps each valid configuration to its recorded measurements; its keys are
the valid space. ``example:NAME`` names a cache bundled with the package.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from autotune.errors import UsageError
from autotune.search_spaces.knobs import KnobSpace
from autotune.types import Candidate, Task

EXAMPLES = {"pnpoly-rtx3090": "pnpoly-rtx3090.json.gz"}


def resolve_cache_path(spec: str | Path) -> Path:
    """A cache file path, or ``example:NAME`` for a bundled one."""
    text = str(spec)
    if text.startswith("example:"):
        name = text.split(":", 1)[1]
        if name not in EXAMPLES:
            raise UsageError(f"unknown example cache {name!r}; bundled: {', '.join('example:' + e for e in EXAMPLES)}")
        return Path(str(resources.files("autotune.data").joinpath(EXAMPLES[name])))
    path = Path(text)
    if not path.is_file():
        raise UsageError(
            f"cache file {text!r} does not exist; give a Kernel Tuner cache (.json or .json.gz) "
            f"or one of: {', '.join('example:' + e for e in EXAMPLES)}"
        )
    return path


def cache_label(spec: str | Path) -> str:
    """The cache's name without folders and extensions (RTX_3090.json.gz -> RTX_3090)."""
    text = str(spec)
    if text.startswith("example:"):
        return text.split(":", 1)[1]
    name = Path(text).name
    for ext in (".gz", ".json"):
        name = name.removesuffix(ext)
    return name


@dataclass
class KTCache:
    """A parsed Kernel Tuner cache file."""

    path: str
    label: str
    device_name: str
    kernel_name: str
    problem_size: object
    param_names: list[str]
    param_values: dict[str, list]
    records: dict[tuple, dict]  # value tuple (param order) -> record

    @classmethod
    def load(cls, spec: str | Path) -> "KTCache":
        path = resolve_cache_path(spec)
        try:
            opener = gzip.open if path.name.endswith(".gz") else open
            with opener(path, "rt") as f:
                data = json.load(f)
        except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UsageError(f"cache file {str(spec)!r} is not readable JSON ({exc}); expected a Kernel Tuner cache") from None
        missing = [k for k in ("tune_params_keys", "tune_params", "cache") if k not in data] if isinstance(data, dict) else ["all"]
        if missing:
            raise UsageError(
                f"cache file {str(spec)!r} is not a Kernel Tuner cache: missing {', '.join(missing)} "
                "(expected tune_params_keys, tune_params and cache)"
            )
        names = list(data["tune_params_keys"])
        values = {n: list(data["tune_params"][n]) for n in names}
        records: dict[tuple, dict] = {}
        for key, rec in data["cache"].items():
            try:
                records[tuple(rec[n] for n in names)] = rec
            except (KeyError, TypeError):
                raise UsageError(f"cache file {str(spec)!r}: entry {key!r} lacks the parameter values") from None
        if not records:
            raise UsageError(f"cache file {str(spec)!r} holds no configurations")
        label = cache_label(spec)
        return cls(
            path=str(path), label=label, device_name=data.get("device_name") or label,
            kernel_name=data.get("kernel_name") or label, problem_size=data.get("problem_size"),
            param_names=names, param_values=values, records=records,
        )

    def task(self) -> Task:
        """The recorded kernel as a task: equal for every GPU that recorded the same space."""
        return Task("replay", self.kernel_name, {"problem_size": self.problem_size, "tune_params": self.param_values})

    def config(self, values: tuple) -> dict:
        return dict(zip(self.param_names, values))


class ReplaySpace(KnobSpace):
    """The knob space of a recorded cache: its valid points are exactly the cache's keys."""

    def __init__(self, cache: KTCache | str | Path):
        self.cache = cache if isinstance(cache, KTCache) else KTCache.load(cache)
        keys = set(self.cache.records)
        names = self.cache.param_names
        super().__init__(
            self.cache.param_values,
            constraints=[lambda cfg: tuple(cfg[n] for n in names) in keys],
            task=self.cache.task(),
        )
        # the table of valid points comes straight from the cache, in sorted index order
        try:
            rows = [self._indices(self.cache.config(v)) for v in self.cache.records]
        except KeyError as exc:
            raise UsageError(f"cache file {self.cache.path!r}: a recorded value {exc} is not among tune_params") from None
        self._rows = np.asarray(sorted(rows), dtype=np.int32)

    def contains(self, c: Candidate) -> bool:
        p = c.payload
        return isinstance(p, dict) and tuple(p.get(n) for n in self.names) in self.cache.records
