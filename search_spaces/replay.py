"""Recorded tuning spaces (Kernel Tuner cache files) and the knob space they define.

A cache maps each valid configuration to its recorded measurements; its keys are
the valid space. ``example:NAME`` names a cache bundled with the package.
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import json
import math
import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from autotune.errors import UsageError
from autotune.search_spaces.knobs import KnobSpace
from autotune.types import Candidate, Measurement, Status, Task

EXAMPLES = {"pnpoly-rtx3090": "pnpoly-rtx3090.json.gz"}

# The most text a cache may hold once decompressed (a small gzip can inflate to gigabytes).
MAX_CACHE_MB = int(os.environ.get("AUTOTUNE_MAX_CACHE_MB", "256"))


def _read_json(path: Path, where: str):
    limit = MAX_CACHE_MB << 20
    try:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as f:
            raw = f.read(limit + 1)
        if len(raw) <= limit:
            return json.loads(raw)
    except (OSError, EOFError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise UsageError(f"{where} is not readable JSON ({str(exc)[:120]}); expected a Kernel Tuner cache") from None
    # raised out of the try: a UsageError is a ValueError, which would be taken for a parse error above
    raise UsageError(f"{where} holds more than {MAX_CACHE_MB} MB of text; raise AUTOTUNE_MAX_CACHE_MB "
                     "if it is a genuine cache")


def _scalar(v) -> bool:
    """A knob value the database can store: a string, a boolean, a finite float or an integer of 64 bits (its JSON
    columns hold no larger one)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return -(2 ** 63) <= v < 2 ** 63
    return isinstance(v, (str, bool)) or (isinstance(v, float) and math.isfinite(v))


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def _bad_record(rec, names: list[str]) -> str:
    """Why a cache record is malformed ('' when it is fine)."""
    if not isinstance(rec, dict):
        return "is not an object"
    lacking = [n for n in names if n not in rec]
    if lacking:
        return f"lacks the parameter value(s) {', '.join(lacking)}"
    if not all(_scalar(rec[n]) for n in names):
        return "has a parameter value that is not a string, a boolean, a finite number or an integer of 64 bits"
    t = rec.get("time")
    if not (isinstance(t, str) or _number(t)):
        return f"has time {str(t)[:40]!r}: expected a non-negative number of ms or a failure string"
    times = rec.get("times")
    if times is not None and not (isinstance(times, list) and all(_number(x) for x in times)):
        return "has times that are not a list of non-negative numbers"
    for field in ("compile_time", "benchmark_time"):
        if rec.get(field) is not None and not _number(rec[field]):
            return f"has {field} {str(rec[field])[:40]!r}: expected a non-negative number of ms"
    return ""


#: a T4 result's invalidity as the failure name of a Kernel Tuner cache
_T4_FAILURES = {"compile": "CompilationFailedConfig", "constraints": "InvalidConfig", "runtime": "RuntimeFailedConfig",
                "timeout": "RuntimeFailedConfig", "correctness": "RuntimeFailedConfig"}
_TIME_UNITS_MS = {"ms": 1.0, "": 1.0, "s": 1e3, "us": 1e-3, "ns": 1e-6}


def t4_as_cache(data: dict, path: Path, where: str) -> dict:
    """A results file of the T4 auto-tuning format (``{"schema_version": ..., "results": [...]}``: Kernel Tuner's
    ``results_file``, the autotuning-methodology's files) as the Kernel Tuner cache it stands for: each result's
    configuration, its objective's value in ms (the objective must be a time) or its invalidity's failure name,
    its runtimes and compile and benchmark times. Each parameter's values are those its results hold, numbers in
    increasing order. T4 names neither the device nor the kernel: the device is the file's name (without a
    ``_T4`` suffix), the kernel its folder's name."""
    results = data["results"]
    if not results:
        raise UsageError(f"{where} holds no results (a T4 results file)")
    names: list[str] | None = None
    cache: dict[str, dict] = {}
    for i, res in enumerate(results):
        if not isinstance(res, dict) or not isinstance(res.get("configuration"), dict) or not res["configuration"]:
            raise UsageError(f"{where}: T4 result {i} has no configuration (an object of parameter values)")
        config = res["configuration"]
        if names is None:
            names = list(config)
        elif list(config) != names and set(config) != set(names):
            raise UsageError(f"{where}: T4 result {i} configures {sorted(config)}, not the first result's {sorted(names)}")
        objective = (res.get("objectives") or ["time"])[0]
        measured = {m.get("name"): m for m in res.get("measurements") or [] if isinstance(m, dict)}
        invalidity = res.get("invalidity", "correct")
        rec: dict = {n: config[n] for n in names}
        if invalidity != "correct":
            if invalidity not in _T4_FAILURES:
                raise UsageError(f"{where}: T4 result {i} has invalidity {str(invalidity)[:40]!r}; expected one of "
                                 f"correct, {', '.join(_T4_FAILURES)}")
            rec["time"] = _T4_FAILURES[invalidity]
        else:
            m = measured.get(objective)
            unit = str((m or {}).get("unit", "ms"))
            if m is None or unit not in _TIME_UNITS_MS:
                raise UsageError(f"{where}: T4 result {i} has no measurement of its objective {str(objective)[:40]!r} in "
                                 "a unit of time (ms, s, us, ns); autotune replays times, lower is better")
            value = m.get("value")
            rec["time"] = value * _TIME_UNITS_MS[unit] if _number(value) else value
            if isinstance(value, list) and value and all(_number(x) for x in value):
                rec["time"] = sum(value) / len(value) * _TIME_UNITS_MS[unit]
        times = res.get("times") if isinstance(res.get("times"), dict) else {}
        runtimes = times.get("runtimes")
        if invalidity == "correct" and isinstance(runtimes, list) and runtimes and all(_number(x) for x in runtimes):
            rec["times"] = [float(x) * _TIME_UNITS_MS[unit] for x in runtimes]  # in the objective's unit
        for field, keys in (("compile_time", ("compilation", "compilation_time")), ("benchmark_time", ("benchmark",))):
            value = next((times[k] for k in keys if _number(times.get(k))), None)
            if value is not None:
                rec[field] = value
        cache[",".join(str(rec[n]) for n in names)] = rec
    values = {}
    for n in names:
        seen = list(dict.fromkeys(rec[n] for rec in cache.values()))
        if all(_number(v) or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in seen):
            seen.sort()
        values[n] = seen
    label = cache_label(path).removesuffix("_T4")
    return {"device_name": label, "kernel_name": path.parent.name or label, "problem_size": None,
            "tune_params_keys": names, "tune_params": values, "cache": cache}


def resolve_cache_path(spec: str | Path) -> Path:
    """A cache file path, or ``example:NAME`` for a bundled one."""
    text = str(spec)
    if text.startswith("example:"):
        name = text.split(":", 1)[1]
        if name not in EXAMPLES:
            raise UsageError(f"unknown example cache {name!r}; bundled: {', '.join('example:' + e for e in EXAMPLES)}")
        return Path(str(resources.files("autotune.data").joinpath(EXAMPLES[name])))
    path = Path(text)
    try:
        found, folder = path.is_file(), path.is_dir()
    except OSError:  # e.g. a name too long for the file system
        found = folder = False
    if not found:
        what = "is a folder, not a file" if folder else "does not exist"
        raise UsageError(
            f"cache file {text[:200]!r} {what}; give a Kernel Tuner cache (.json or .json.gz) "
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


def cache_labels(paths: list[str]) -> dict[str, str]:
    """Each cache's label (``cache_label``), or folder/label where two caches share one (conv2d_c256/H200 and
    conv2d_c512/H200: two shapes recorded on one GPU); the same folder and name twice is an error."""
    names = [cache_label(p) for p in paths]
    out = {p: (f"{Path(p).parent.name}/{n}" if names.count(n) > 1 else n) for p, n in zip(paths, names)}
    if len(set(out.values())) < len(paths):
        raise UsageError(f"two caches have the same folder and name: {', '.join(sorted(map(str, paths)))}")
    return out


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
    def load(cls, spec: str | Path) -> KTCache:
        """Read and validate a cache: every record is checked here, so a malformed file is one
        UsageError naming the entry before any work starts. A file this process loaded before, byte for byte
        the same, is not parsed again: the parsed cache is shared, read-only (nothing changes a KTCache once
        loaded)."""
        path = resolve_cache_path(spec)
        try:
            if path.stat().st_size > MAX_CACHE_MB << 20:  # refused by _read_json, unread
                return cls._read(str(spec), path)
            with open(path, "rb") as f:
                digest = hashlib.file_digest(f, "blake2b").digest()
        except OSError:  # unreadable: reading it again says why
            return cls._read(str(spec), path)
        return _loaded(cls, str(spec), str(path), digest)

    @classmethod
    def _read(cls, spec: str, path: Path) -> KTCache:
        where = f"cache file {str(spec)!r}"
        data = _read_json(path, where)
        if isinstance(data, dict) and isinstance(data.get("results"), list) and "cache" not in data:
            data = t4_as_cache(data, path, where)
        if not isinstance(data, dict):
            raise UsageError(f"{where} is not a Kernel Tuner cache: the top level is a {type(data).__name__}, "
                             "expected an object with tune_params_keys, tune_params and cache")
        missing = [k for k in ("tune_params_keys", "tune_params", "cache") if k not in data]
        if missing:
            raise UsageError(f"{where} is not a Kernel Tuner cache: missing {', '.join(missing)} "
                             "(expected tune_params_keys, tune_params and cache)")
        names, params, cache = data["tune_params_keys"], data["tune_params"], data["cache"]
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
            raise UsageError(f"{where}: tune_params_keys must be a non-empty list of parameter names")
        if len(set(names)) != len(names):
            raise UsageError(f"{where}: tune_params_keys names a parameter twice")
        if not isinstance(params, dict):
            raise UsageError(f"{where}: tune_params must be an object mapping each parameter to its values")
        values: dict[str, list] = {}
        for n in names:
            vals = params.get(n)
            if not isinstance(vals, list) or not vals or not all(_scalar(v) for v in vals):
                raise UsageError(f"{where}: tune_params[{n!r}] must be a non-empty list of strings, booleans, finite "
                                 "numbers or integers of 64 bits")
            values[n] = list(vals)
        if not isinstance(cache, dict):
            raise UsageError(f"{where}: cache must be an object mapping configuration keys to records")
        records: dict[tuple, dict] = {}
        allowed = {n: set(values[n]) for n in names}
        for key, rec in cache.items():
            why = _bad_record(rec, names)
            if why:
                raise UsageError(f"{where}: entry {str(key)[:60]!r} {why}")
            other = next((n for n in names if rec[n] not in allowed[n]), None)
            if other is not None:
                raise UsageError(f"{where}: entry {str(key)[:60]!r} has {other} = {repr(rec[other])[:40]}, which is not "
                                 f"among tune_params[{other!r}]")
            records[tuple(rec[n] for n in names)] = rec
        if not records:
            raise UsageError(f"{where} holds no configurations")
        label = cache_label(spec)
        texts = {}
        for field in ("device_name", "kernel_name"):
            v = data.get(field)
            if v is not None and not isinstance(v, str):
                raise UsageError(f"{where}: {field} must be a string")
            if v is not None and len(v) > 200:
                raise UsageError(f"{where}: {field} is longer than 200 characters")
            texts[field] = v or label
        return cls(
            path=str(path), label=label, device_name=texts["device_name"], kernel_name=texts["kernel_name"],
            problem_size=data.get("problem_size"), param_names=list(names), param_values=values, records=records,
        )

    def task(self) -> Task:
        """The recorded kernel as a task: equal for every GPU that recorded the same space."""
        return Task("replay", self.kernel_name, {"problem_size": self.problem_size, "tune_params": self.param_values})

    def config(self, values: tuple) -> dict:
        return dict(zip(self.param_names, values))


@lru_cache(maxsize=8)
def _loaded(cls, spec: str, path: str, digest: bytes) -> KTCache:
    """KTCache.load's parsed caches, by file and content: the caches a transfer or a benchmark reads again, or
    the campaigns of one process (a tune-many file, a test suite), parse each once."""
    return cls._read(spec, Path(path))


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
        # the table of valid points comes straight from the cache (whose values load() checked), in sorted index order
        rows = [self._indices(self.cache.config(v)) for v in self.cache.records]
        self._rows = np.asarray(sorted(rows), dtype=np.int32)

    def contains(self, c: Candidate) -> bool:
        p = c.payload
        return isinstance(p, dict) and tuple(p.get(n) for n in self.names) in self.cache.records


# how Kernel Tuner names a failed configuration in its cache (any other failure: RuntimeFailedConfig)
KT_FAILURES = {Status.COMPILE_ERROR: "CompilationFailedConfig", Status.INVALID: "InvalidConfig"}


def _kt_record(m: Measurement, names: list[str]) -> dict:
    rec = {n: m.candidate.payload[n] for n in names}
    if m.ok:
        rec["time"] = m.cost * 1e3
        rec["times"] = [t * 1e3 for t in m.times]
    else:
        rec["time"] = KT_FAILURES.get(m.status, "RuntimeFailedConfig")
    rec["compile_time"] = m.build_s * 1e3
    rec["verification_time"] = 0
    rec["benchmark_time"] = m.run_s * 1e3
    rec["strategy_time"] = 0
    rec["framework_time"] = 0
    rec["timestamp"] = datetime.datetime.now(datetime.UTC).isoformat()
    return rec


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def _header_value(value):
    """A cache header's value as its JSON reads back, a problem size of one dimension as a number (4096 and
    [4096] are one size)."""
    value = json.loads(json.dumps(value, default=_json_default))
    return value[0] if isinstance(value, list) and len(value) == 1 and not isinstance(value[0], (list, dict)) else value


def check_cache_header(path: str | os.PathLike, device_name: str, kernel_name: str, problem_size,
                       names: list[str]) -> dict | None:
    """The Kernel Tuner cache at ``path`` as a dict (None: there is none yet), or UsageError when it is no
    cache or holds results for another device, kernel, problem size or parameter names (which
    :func:`write_cache` may not extend: a caller checks before measuring what it will write)."""
    path = Path(path)
    if not path.exists():
        return None
    raw = path.read_bytes()
    try:
        text = (gzip.decompress(raw) if path.name.endswith(".gz") else raw).decode().strip()
        if text and not text.endswith("}\n}") and not text.endswith("}}"):  # left open by an interrupted run
            text = text.rstrip(",") + "}\n}"
        old = json.loads(text)
    except (ValueError, OSError, EOFError) as exc:
        raise UsageError(f"cache file {str(path)!r} exists but is not a Kernel Tuner cache ({exc}); "
                         "remove it or name another file") from None
    if not isinstance(old, dict):
        raise UsageError(f"cache file {str(path)!r} exists but is not a Kernel Tuner cache (not a JSON object); "
                         "remove it or name another file")
    for key, mine in (("device_name", device_name), ("kernel_name", kernel_name), ("tune_params_keys", names),
                      ("problem_size", "callable" if callable(problem_size) else problem_size)):
        if _header_value(old.get(key)) != _header_value(mine):
            raise UsageError(f"cache file {str(path)!r} holds results for another {key.replace('_', ' ')} "
                             f"({old.get(key)!r}, not {mine!r}); name another cache file")
    return old


def write_cache(path: str | os.PathLike, device_name: str, kernel_name: str, problem_size, tune_params: dict,
                history: list[Measurement]) -> None:
    """Write (or extend) a Kernel Tuner cache file with ``history``: the header keys Kernel Tuner writes
    (device_name, kernel_name, problem_size, tune_params_keys, tune_params, objective, cache) and one
    record per configuration keyed by its values joined with commas. An existing cache must be of the
    same device, kernel, problem size and parameters (as Kernel Tuner requires); its records are kept, and
    each parameter's values in the header are the old ones followed by any new ones, so that every record's
    values are among them (a run over other values extends the cache without making it unreadable). A
    path ending in .gz is read and written gzip-compressed (autotune's replay reads both)."""
    path = Path(path)
    gz = path.name.endswith(".gz")
    names = list(tune_params)
    data = {"device_name": device_name, "kernel_name": kernel_name,
            "problem_size": "callable" if callable(problem_size) else problem_size,
            "tune_params_keys": names, "tune_params": tune_params, "objective": "time", "cache": {}}
    old = check_cache_header(path, device_name, kernel_name, problem_size, names)
    if old is not None:
        data["cache"] = dict(old.get("cache") or {})
        before = old.get("tune_params") if isinstance(old.get("tune_params"), dict) else {}
        prior = {n: before[n] if isinstance(before.get(n), list) else [] for n in names}
        data["tune_params"] = {n: [*prior[n], *(v for v in vals if v not in prior[n])] for n, vals in tune_params.items()}
    for m in history:
        key = ",".join(str(m.candidate.payload[n]) for n in names)
        data["cache"][key] = _kt_record(m, names)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    body = json.dumps(data, default=_json_default, indent="").encode()
    tmp.write_bytes(gzip.compress(body) if gz else body)
    os.replace(tmp, path)
