"""Core value types shared by every space, algorithm, runner and the database.

Everything here is plain data: JSON-serialisable payloads with stable keys.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from autotune.errors import UsageError


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


KEY_LENGTH = 16  # hex digits of a key


def text_key(text: str, length: int = KEY_LENGTH) -> str:
    """A short hex digest of ``text``, the canonical JSON of a value (``stable_key``), or one joined from
    pieces of it."""
    return hashlib.sha1(text.encode()).hexdigest()[:length]


def stable_key(value: Any, length: int = KEY_LENGTH) -> str:
    """A short hex digest of the canonical JSON of ``value``."""
    return text_key(canonical_json(value), length)


def _code_digest(code, h) -> None:
    """Feed a code object's bytecode, constants (nested functions' too) and names to ``h``; memory
    addresses and set ordering, which change from run to run, are left out."""
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            _code_digest(c, h)
        elif isinstance(c, frozenset):
            h.update(repr(sorted(map(repr, c))).encode())
        else:
            h.update(repr(c).encode())


def _simple(values) -> list:
    """The plain values (numbers, strings, None) among ``values``, as text; others are left out."""
    return [repr(v) for v in values if v is None or isinstance(v, (bool, int, float, str))]


def names_its_code(qualified_name: str) -> bool:
    """Whether a callable's qualified name says which code it is: not for a lambda or a function defined in
    another (``<lambda>``, ``f.<locals>.g``), which :func:`callable_identity`'s digest tells apart."""
    return "<" not in qualified_name


def callable_identity(fn) -> str:
    """A function as its qualified name and a digest of its code (with its plain default and closure
    values): the same function in a rerun gives the same text; a changed body, another lambda or a
    closure over other numbers gives another. (A task names the code it measures by this where its
    name alone does not say which code it is.)"""
    name = (f"{getattr(fn, '__module__', None) or ''}."
            f"{getattr(fn, '__qualname__', None) or type(fn).__qualname__}")
    fn = getattr(fn, "__func__", fn)  # a bound method's function
    if getattr(fn, "__code__", None) is None:  # a callable object: its class's __call__
        fn = getattr(type(fn), "__call__", None)  # noqa: B004 - the method itself, for its code
    code = getattr(fn, "__code__", None)
    if code is None:
        return name
    h = hashlib.sha1()
    _code_digest(code, h)
    cells = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ()) if _has_contents(c)]
    defaults = [*(getattr(fn, "__defaults__", None) or ()), *(getattr(fn, "__kwdefaults__", None) or {}).values()]
    h.update(repr(_simple([*defaults, *cells])).encode())
    return f"{name}:{h.hexdigest()[:16]}"


def _has_contents(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


class Status(str, enum.Enum):
    """Outcome of one measurement. Errors are data: a runner never raises for one candidate."""

    OK = "OK"
    INVALID = "INVALID"  # breaks a constraint or is not part of the space
    COMPILE_ERROR = "COMPILE_ERROR"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    TIMEOUT = "TIMEOUT"
    WRONG_RESULT = "WRONG_RESULT"

    @classmethod
    def parse(cls, text: str) -> Status:
        try:
            return cls(text.upper())
        except ValueError:
            valid = ", ".join(s.value for s in cls)
            raise UsageError(f"unknown status {text!r}; valid: {valid}") from None


@dataclass(frozen=True)
class Task:
    """What is tuned: ``kind`` ("kernel", "graph", "parallel", "replay", "op"), a name and JSON params."""

    kind: str
    name: str
    params: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def key(self) -> str:
        return stable_key({"kind": self.kind, "name": self.name, "params": self.params})

    def to_json(self) -> dict:
        return {"key": self.key, "kind": self.kind, "name": self.name, "params": self.params}


@dataclass(frozen=True)
class Device:
    """Where a task runs. The key is stable across runs on the same hardware and software."""

    name: str
    kind: str  # "cuda", "cpu", "simulated"
    properties: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def key(self) -> str:
        return stable_key({"name": self.name, "kind": self.kind, "properties": self.properties})

    def to_json(self) -> dict:
        return {"key": self.key, "name": self.name, "kind": self.kind, "properties": self.properties}


@dataclass(frozen=True)
class Candidate:
    """One point of a space: a JSON payload (knob dict, graph, strategy) with a stable key."""

    payload: Any = field(hash=False, compare=False)
    key: str = ""

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", stable_key(self.payload))


def median(values: list[float] | tuple[float, ...]) -> float:
    s = sorted(values)
    n = len(s)
    if n == 0:
        return math.nan
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


@dataclass
class Measurement:
    """The result of evaluating one candidate.

    ``cost`` is the statistic the search minimises (median of ``times`` by default,
    seconds); ``None`` unless the status is OK. ``simulated_s`` is the time a replay
    or simulator charges for this evaluation (recorded compile + benchmark time).
    """

    candidate: Candidate
    status: Status
    times: list[float] = field(default_factory=list)
    cost: float | None = None
    error: str = ""
    meta: dict = field(default_factory=dict)
    build_s: float = 0.0
    run_s: float = 0.0
    simulated_s: float = 0.0
    predicted: float | None = None

    def __post_init__(self) -> None:
        self.status = Status(self.status)
        if self.cost is None and self.status is Status.OK and self.times:
            self.cost = median(self.times)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK and self.cost is not None

    @property
    def objective(self) -> float:
        """Cost for ranking: failed candidates are infinitely slow."""
        return self.cost if self.ok else math.inf
