"""KnobSpace: named discrete parameters plus constraints.

The valid points are enumerated once, lazily, by a depth-first walk that checks
each expression constraint as soon as all of its knobs are fixed, and kept as a
compact array of value indices. Spaces too large to enumerate (more than
``enumerate_limit`` valid points, or a walk that would try more than ``check_limit``
knob values: a tight constraint over knobs of huge ranges, whose product the walk
would go through) fall back to rejection sampling; ``too_large_by`` says which.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from operator import getitem

import numpy as np

from autotune.errors import UsageError
from autotune.search_spaces.base import Space
from autotune.search_spaces.constraints import Constraint, make_constraint
from autotune.types import Candidate, Task, canonical_json, text_key

MEMO = 250_000  # points a space remembers for its moves (about 650 bytes each with ten knobs); then it starts again
PROGRESS_EVERY = 1 << 16  # knob values the walk tries between two progress reports
CHECK_LIMIT = 20_000_000  # knob values the walk may try before it gives up counting (about 10-20 s)


class _TooManyChecks(Exception):
    """The walk reached its check_limit."""


def _is_power_of_two_list(values: Sequence) -> bool:
    return all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and float(v).is_integer()
        and (int(v) & (int(v) - 1)) == 0
        for v in values
    )


def _plain(name: str, v):
    """A knob value as the configuration stored in the database gives it back: numpy scalars as Python
    numbers, tuples as lists and mappings with sorted keys (a value read back from its JSON), so that a
    resumed campaign's points are the points of the space. UsageError for a value JSON cannot hold (NaN,
    infinity, an object)."""
    v = v.item() if isinstance(v, np.generic) else v
    if v is None or type(v) in (bool, int, str) or (type(v) is float and math.isfinite(v)):
        return v
    try:
        return json.loads(canonical_json(v))
    except (TypeError, ValueError):
        raise UsageError(f"knob {name!r} has the value {v!r} ({type(v).__name__}); a value must be a finite "
                         "number, a string, a boolean, None or a list of them (it is stored as JSON)"[:300]) from None


def _knob_values(name: str, raw) -> list:
    """A knob's values as a list of plain values (``_plain``); UsageError for a single value, a string, a
    mapping (the ``{range: ...}`` forms of space files) or a set (no fixed order) where a list belongs."""
    if isinstance(raw, (str, bytes, Mapping, set, frozenset)) or not isinstance(raw, Iterable):
        hint = (" (the {range: ...} and {pow2: ...} forms are for space files; in Python give e.g. list(range(0, 10)))"
                if isinstance(raw, Mapping) else " (a set has no fixed order; give e.g. sorted(values))"
                if isinstance(raw, (set, frozenset)) else f"; e.g. {{{name!r}: [{raw!r}]}}")
        raise UsageError(f"knob {name!r} must be a list of values, not {raw!r} ({type(raw).__name__}){hint}"[:300])
    return [_plain(name, v) for v in raw]


class KnobSpace(Space):
    """Knobs (each a list of allowed values) and constraints (expressions or callables on the knob dict)."""

    def __init__(
        self,
        knobs: Mapping[str, Sequence],
        constraints: Sequence[str | Callable] = (),
        task: Task | None = None,
        default: Mapping | None = None,
        enumerate_limit: int = 5_000_000,
        check_limit: int | None = None,
    ):
        if not knobs:
            raise UsageError("a knob space needs at least one knob")
        if not isinstance(knobs, Mapping):
            raise UsageError(f"the knobs must be a dict of knob name -> list of values, not {type(knobs).__name__}")
        for name in knobs:
            if not isinstance(name, str):  # a configuration is stored as JSON, whose keys are strings
                raise UsageError(f"knob name {name!r} ({type(name).__name__}) is not a string; name knobs with strings")
        self.names: list[str] = list(knobs)
        self.values: list[list] = []
        for name in self.names:
            vals = _knob_values(name, knobs[name])
            if not vals:
                raise UsageError(f"knob {name!r} has no values")
            if len(set(map(repr, vals))) != len(vals):
                raise UsageError(f"knob {name!r} lists a value twice: {vals}")
            self.values.append(vals)
        self._index = [{repr(v): i for i, v in enumerate(vals)} for vals in self.values]
        names = set(self.names)
        if isinstance(constraints, str) or callable(constraints):
            constraints = [constraints]  # one constraint, not a list of them
        self.constraints = [make_constraint(c, names) for c in constraints]
        self._made_task = Task("knobs", "custom", {"knobs": {n: list(v) for n, v in zip(self.names, self.values)}})
        self.task = task or self._made_task
        # an expression can be checked at the depth where its last knob is fixed; a callable at the end
        depth = {n: i for i, n in enumerate(self.names)}
        self._checks_at: list[list] = [[] for _ in self.names]
        for c in self.constraints:
            level = max(depth[n] for n in c.names) if isinstance(c, Constraint) and c.names else len(self.names) - 1
            self._checks_at[level].append(c)
        self._pow2 = [_is_power_of_two_list(v) for v in self.values]
        self._numeric = [all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v) for v in self.values]
        self.enumerate_limit, self.check_limit = enumerate_limit, CHECK_LIMIT if check_limit is None else check_limit
        self._rows: np.ndarray | None = None
        #: "points" (more valid points than enumerate_limit) or "checks" (the walk would try more knob values
        #: than check_limit) when the space was too large to enumerate; None until then
        self.too_large_by: str | None = None
        self._prefixes: dict[int, set[tuple]] = {}
        self._default = dict(default) if default is not None else None
        # the points the moves reached, by value indices (None: breaks a constraint), and each one's indices by
        # key: a search walks the same neighbourhoods over and over, and building a candidate (its key is a
        # digest of its JSON) and checking the constraints cost more than the move itself
        self._memo: dict[tuple, Candidate | None] = {}
        self._idx_of: dict[str, tuple] = {}
        self._sorted_knobs = sorted(range(len(self.names)), key=self.names.__getitem__)  # canonical JSON's order
        self._json = self._json_fragments()
        if self._default is not None:  # every knob, no other name, a valid point
            try:
                self._default = self.candidate(self._default).payload
            except UsageError as exc:
                raise UsageError(f"the default {exc}") from None

    @property
    def anonymous(self) -> bool:
        """Whether the task is the one the space made for want of one: it names the knobs, not what a runner
        measures over them, so a Campaign makes it the campaign's own (two campaigns of other runners over
        the same knobs must not look up each other's measurements)."""
        return self.task is self._made_task

    # -- conversions -----------------------------------------------------------------
    def _config(self, idx: Sequence[int]) -> dict:
        return dict(zip(self.names, map(getitem, self.values, idx)))  # listing 18,000 points: a third of its time

    def _indices(self, config: Mapping) -> tuple[int, ...]:
        return tuple(self._index[k][repr(config[n])] for k, n in enumerate(self.names))

    def _make(self, config: dict) -> Candidate:
        return Candidate(config)

    def _json_fragments(self) -> list[list[str]] | None:
        """Per knob in the sorted order of their names (canonical JSON's), each value's ``"name":value`` text, so
        that a point's key (the digest of its canonical JSON) is joined from them rather than encoded again:
        listing a space of 18,000 points took twice as long. None where a subclass builds its own candidates,
        the names are not all strings or a value has no JSON (the generic encoder keys, or refuses, such points)."""
        if type(self)._make is not KnobSpace._make or not all(isinstance(n, str) for n in self.names):
            return None
        try:
            return [[canonical_json(self.names[k]) + ":" + canonical_json(v) for v in self.values[k]]
                    for k in self._sorted_knobs]
        except (TypeError, ValueError):
            return None

    def _point(self, idx: Sequence[int], config: dict | None = None) -> Candidate:
        """The candidate at these value indices (``config``: their configuration, when known; constraints not
        checked), its key joined from the JSON fragments: the same key as ``Candidate(config)`` gives."""
        config = self._config(idx) if config is None else config
        if self._json is None:
            return self._make(config)
        text = "{" + ",".join(map(getitem, self._json, map(idx.__getitem__, self._sorted_knobs))) + "}"
        return Candidate(config, text_key(text))

    def _at(self, idx: tuple) -> Candidate | None:
        """The point at these value indices, None where it breaks a constraint (remembered, up to MEMO points)."""
        if idx in self._memo:
            return self._memo[idx]
        config = self._config(idx)
        c = self._point(idx, config) if all(con(config) for con in self.constraints) else None
        if len(self._memo) >= MEMO:
            self._memo.clear()
            self._idx_of.clear()
        self._memo[idx] = c
        if c is not None:
            self._idx_of[c.key] = idx
        return c

    def _indices_of(self, c: Candidate) -> tuple[int, ...]:
        return self._idx_of.get(c.key) or self._indices(c.payload)

    def candidate(self, config: Mapping) -> Candidate:
        config = dict(config)
        missing = [n for n in self.names if n not in config]
        extra = [n for n in config if n not in self.names]
        if missing or extra:
            raise UsageError(
                f"configuration {config} does not match the knobs {self.names}"
                + (f"; missing {missing}" if missing else "") + (f"; unknown {extra}" if extra else "")
            )
        ordered = {n: _plain(n, config[n]) for n in self.names}
        if not self.is_valid(ordered):
            raise UsageError(f"configuration {ordered} is not a valid point of the space")
        return self._make(ordered)

    # -- validity --------------------------------------------------------------------
    def is_valid(self, config: Mapping) -> bool:
        for k, n in enumerate(self.names):
            if n not in config or repr(config[n]) not in self._index[k]:
                return False
        return all(c(config) for c in self.constraints)

    def contains(self, c: Candidate) -> bool:
        return isinstance(c.payload, Mapping) and len(c.payload) == len(self.names) and self.is_valid(c.payload)

    # -- enumeration -----------------------------------------------------------------
    def combinations(self) -> int:
        """The number of combinations of knob values, valid or not (the product of the knobs' sizes)."""
        return math.prod(len(v) for v in self.values)

    def _walk(self, limit: int | None = None, progress: Callable[[float], None] | None = None) -> Iterator[tuple[int, ...]]:
        """The valid points' value indices in order. ``limit``: raise _TooManyChecks once more knob values
        than that were tried; ``progress(fraction)``: told now and then how far the walk is (through the
        combinations, or towards the limit where that is nearer)."""
        names, values, checks, n = self.names, self.values, self._checks_at, len(self.names)
        env: dict = {}
        idx = [0] * n
        sizes = [len(v) for v in values]
        tried, next_report = 0, PROGRESS_EVERY

        def rec(level: int) -> Iterator[tuple[int, ...]]:
            nonlocal tried, next_report
            tried += sizes[level]  # counted a level at a time: the loop below is the walk's hot path
            if tried >= next_report:
                next_report = tried + PROGRESS_EVERY
                if limit is not None and tried > limit:
                    raise _TooManyChecks
                if progress is not None:  # how far through the combinations, or towards the limit if nearer
                    done, scale = 0.0, 1.0
                    for k in range(level):
                        scale *= sizes[k]
                        done += idx[k] / scale
                    progress(min(1.0, max(done, tried / limit if limit else 0.0)))
            name, here, last = names[level], checks[level], level == n - 1
            one = here[0] if len(here) == 1 else None
            for i, v in enumerate(values[level]):
                env[name] = v
                if one is not None:
                    if not one(env):
                        continue
                elif here and not all(c(env) for c in here):
                    continue
                idx[level] = i
                if last:
                    yield tuple(idx)
                else:
                    yield from rec(level + 1)
            env.pop(name, None)

        yield from rec(0)

    def _table(self, progress: Callable[[float], None] | None = None) -> np.ndarray | None:
        if self._rows is None and self.too_large_by is None:
            if not self.constraints and self.combinations() > self.enumerate_limit:
                self.too_large_by = "points"  # every combination is a point: nothing to walk to know it
                return None
            rows = []
            try:
                for t in self._walk(self.check_limit, progress):
                    rows.append(t)
                    if len(rows) > self.enumerate_limit:
                        self.too_large_by = "points"
                        return None
            except _TooManyChecks:
                self.too_large_by = "checks"
                return None
            if not rows:
                raise UsageError("the knob space has no valid point: its constraints exclude every combination")
            self._rows = np.asarray(rows, dtype=np.int32)
        return self._rows

    def count(self, progress: Callable[[float], None] | None = None) -> int | None:
        """The number of valid points, as ``size()``; ``progress(fraction)`` is told how far the count is
        while it walks the combinations (the first time only: the points are kept)."""
        table = self._table(progress)
        return None if table is None else len(table)

    def estimate_valid(self, samples: int = 100_000, seed: int = 0) -> int:
        """How many of ``samples`` random combinations of knob values meet the constraints (with the
        combinations' number, an estimate of the size of a space too large to count)."""
        rng = np.random.default_rng(seed)
        picks = [rng.integers(len(vals), size=samples) for vals in self.values]
        found = 0
        for row in zip(*(p.tolist() for p in picks)):
            config = self._config(row)
            if all(c(config) for c in self.constraints):
                found += 1
        return found

    def enumerate(self) -> Iterator[Candidate]:
        table = self._table()
        if table is None:
            for t in self._walk():
                yield self._point(t)
            return
        for row in table.tolist():  # Python ints: indexing the value lists with them is cheaper
            yield self._point(row)

    def size(self) -> int | None:
        table = self._table()
        return None if table is None else len(table)

    def point(self, i: int) -> Candidate:
        """The i-th valid point in enumeration order."""
        table = self._table()
        if table is None:
            raise UsageError("this knob space is too large to index its points")
        return self._point(table[i].tolist())

    # -- moves -----------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Candidate:
        table = self._table()
        if table is not None:
            return self._at(tuple(table[rng.integers(len(table))].tolist()))
        for _ in range(100_000):
            config = {n: vals[rng.integers(len(vals))] for n, vals in zip(self.names, self.values)}
            if all(c(config) for c in self.constraints):
                return self._make(config)
        raise UsageError("could not sample a valid point in 100,000 tries: the constraints are too tight")

    def neighbor(self, c: Candidate, rng: np.random.Generator) -> Candidate:
        """Move one knob to an adjacent valid value (the nearest valid one in a random direction)."""
        base = self._indices_of(c)
        for k in rng.permutation(len(self.names)):
            n_vals = len(self.values[k])
            if n_vals == 1:
                continue
            step = 1 if rng.random() < 0.5 else -1
            for direction in (step, -step):
                j = base[k] + direction
                while 0 <= j < n_vals:
                    found = self._at(base[:k] + (j,) + base[k + 1:])
                    if found is not None:
                        return found
                    j += direction
        return self.sample(rng)

    def crossover(self, a: Candidate, b: Candidate, rng: np.random.Generator) -> Candidate:
        """Uniform crossover; retried a few times when the child breaks a constraint."""
        ia, ib = self._indices_of(a), self._indices_of(b)
        for _ in range(16):
            mask = rng.random(len(self.names)) < 0.5
            found = self._at(tuple(x if m else y for x, y, m in zip(ia, ib, mask)))
            if found is not None:
                return found
        return a if rng.random() < 0.5 else b

    def _has_completion(self, prefix: tuple) -> bool:
        table = self._table()
        if table is None:
            return True
        depth = len(prefix)
        if depth not in self._prefixes:
            self._prefixes[depth] = {tuple(r) for r in np.unique(table[:, :depth], axis=0)}
        return prefix in self._prefixes[depth]

    def children(self, c: Candidate | None) -> Iterator[Candidate]:
        """Fix the next unfixed knob (in declaration order) to each value that still has a valid completion."""
        partial = dict(c.payload) if c is not None else {}
        depth = len(partial)
        if depth >= len(self.names):
            return
        prefix = tuple(self._index[k][repr(partial[n])] for k, n in enumerate(self.names[:depth]))
        name = self.names[depth]
        for i, v in enumerate(self.values[depth]):
            if self._has_completion(prefix + (i,)):
                yield Candidate({**partial, name: v})

    def is_complete(self, c: Candidate) -> bool:
        return len(c.payload) == len(self.names)

    def initial(self) -> Candidate | None:
        return self._make(dict(self._default)) if self._default is not None else None

    # -- cost-model rows -------------------------------------------------------------
    @property
    def log2_columns(self) -> list[int]:
        """The feature columns that hold log2 of a power-of-two knob taking more than one value."""
        return [k for k, v in enumerate(self.values) if self._pow2[k] and len(v) > 1]

    def features(self, cs: list[Candidate]) -> np.ndarray:
        """One column per knob: log2 of the value for power-of-two knobs, the value for other
        numbers, and the value's index for enumerated choices. Unfixed knobs, and choices the knob does not
        offer (another device's measurements of a wider space, a warm start's source rows), are NaN."""
        out = np.full((len(cs), len(self.names)), np.nan)
        payloads = [c.payload for c in cs]
        nan = float("nan")
        for k, n in enumerate(self.names):  # column by column: numpy once per knob, not per value
            if self._pow2[k] or self._numeric[k]:
                col = np.array([p.get(n, nan) for p in payloads], dtype=float)
                out[:, k] = np.log2(col) if self._pow2[k] else col
            else:
                index = self._index[k]
                out[:, k] = [index.get(repr(p[n]), nan) if n in p else nan for p in payloads]
        return out
