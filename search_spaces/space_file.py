"""Space files: a knob space (and how a program's cost is read) in YAML or JSON.

One format for ``autotune tune command --space FILE``, ``autotune space check FILE`` and
``autotune.minimize(objective, "FILE")``::

    name: matmul                      # optional; default: the file's stem
    knobs:                            # name -> the values it takes
      block: [16, 32, 64, 128]        #   a list of numbers, strings or booleans
      unroll: {range: [1, 8]}         #   integers 1..8 (both ends included); {range: [0, 64], step: 8}
      vec: {pow2: [1, 16]}            #   the powers of two 1, 2, 4, 8, 16
    constraints:                      # optional: expressions over knob names (search_spaces/constraints.py)
      - block * unroll <= 512
    default: {block: 32, unroll: 1, vec: 4}     # optional: a valid point
    objective:                        # optional, read by `tune command` only (default: wall time)
      regex: "time: ([0-9.eE+-]+)"    #   one capturing group, parsed as a float (the last match counts)
      scale: 1.0e-3                   #   multiplied by this to give seconds (default 1)
    # or: objective: {wall_time: true}

``load_space_file(path)`` returns ``(KnobSpace, Objective | None)``. Every problem is a
UsageError naming what was wrong and what is accepted.
"""

from __future__ import annotations

import json
import keyword
import math
import re
from dataclasses import dataclass
from pathlib import Path

from autotune.errors import UsageError, did_you_mean
from autotune.search_spaces.knobs import KnobSpace
from autotune.types import Task

TOP_LEVEL = ("name", "knobs", "constraints", "default", "objective")
OBJECTIVE_KEYS = ("regex", "scale", "wall_time")
MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_VALUES = 1_000_000  # values of one knob (a range or pow2 form)
MAX_INT = 2**63  # integer knob values must fit in 64 bits (cost-model features are floats)
MAX_REGEX_CHARS = 10_000


@dataclass(frozen=True)
class Objective:
    """How a program's cost is read: the first group of the last match of ``regex`` in its output,
    as a float times ``scale`` (seconds), or its wall time (``regex`` None)."""

    regex: str | None = None
    scale: float = 1.0

    @property
    def wall_time(self) -> bool:
        return self.regex is None

    def to_json(self) -> dict:
        return {"wall_time": True} if self.regex is None else {"regex": self.regex, "scale": self.scale}

    def describe(self) -> str:
        if self.regex is None:
            return "wall time of the program"
        return f"regex {self.regex!r}" + (f" x {self.scale:g}" if self.scale != 1.0 else "") + " (seconds)"


def _shown(value, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


def _suggest(word: str, choices) -> str:
    return did_you_mean(word, choices, n=1)


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_value(knob: str, v):
    if isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        if abs(v) >= MAX_INT:
            raise UsageError(f"knob {knob!r} has the value {_shown(v)}, too large; integers must fit in 64 bits")
        return v
    if isinstance(v, float):
        if not math.isfinite(v):
            raise UsageError(f"knob {knob!r} has the value {v!r}; values must be finite numbers, strings or booleans")
        return v
    raise UsageError(f"knob {knob!r} has the value {_shown(v)} ({type(v).__name__}); "
                     "values must be numbers, strings or booleans")


def _int_pair(knob: str, form: str, spec) -> tuple[int, int]:
    if not (isinstance(spec, list) and len(spec) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                              for x in spec)):
        raise UsageError(f"knob {knob!r}: {form} takes two integers [low, high], not {_shown(spec)}")
    lo, hi = spec
    if abs(lo) >= MAX_INT or abs(hi) >= MAX_INT:
        raise UsageError(f"knob {knob!r}: the {form} {_shown(spec)} is too large; integers must fit in 64 bits")
    if lo > hi:
        raise UsageError(f"knob {knob!r}: the {form} {spec} is empty; give [low, high] with low <= high")
    return lo, hi


def _knob_values(knob, spec) -> list:
    if not isinstance(knob, str) or not knob.isidentifier() or keyword.iskeyword(knob):
        raise UsageError(f"the knob name {_shown(knob)} is not valid; a knob name is a Python-style identifier "
                         "(letters, digits and _, not starting with a digit, not a keyword)")
    if isinstance(spec, list):
        values = [_check_value(knob, v) for v in spec]
    elif isinstance(spec, dict):
        forms = [k for k in spec if k in ("range", "pow2")]
        extra = [k for k in spec if k not in ("range", "pow2", "step")]
        if len(forms) != 1 or extra or ("step" in spec and forms != ["range"]):
            raise UsageError(f"knob {knob!r}: {_shown(spec, 80)} is not a value form; use a list of values, "
                             "{range: [low, high]} with an optional step, or {pow2: [low, high]}")
        lo, hi = _int_pair(knob, forms[0], spec[forms[0]])
        if forms[0] == "range":
            step = spec.get("step", 1)
            if not (isinstance(step, int) and not isinstance(step, bool) and step > 0):
                raise UsageError(f"knob {knob!r}: the step {_shown(step)} must be a positive integer")
            count = (hi - lo) // step + 1
            if count > MAX_VALUES:
                raise UsageError(f"knob {knob!r}: the range {[lo, hi]} with step {step} has {count:,} values; "
                                 f"the limit is {MAX_VALUES:,}")
            values = list(range(lo, hi + 1, step))
        else:
            if lo < 1:
                raise UsageError(f"knob {knob!r}: pow2 takes [low, high] with 1 <= low, not {[lo, hi]}")
            values = [1 << k for k in range(64) if lo <= (1 << k) <= hi]
    else:
        raise UsageError(f"knob {knob!r}: {_shown(spec)} is not a list of values; use a list, "
                         "{range: [low, high], step: 1} or {pow2: [low, high]}")
    if not values:
        raise UsageError(f"knob {knob!r} has no values; give at least one")
    if len(values) > MAX_VALUES:
        raise UsageError(f"knob {knob!r} has {len(values):,} values; the limit is {MAX_VALUES:,}")
    return values


def parse_objective(spec) -> Objective | None:
    """An Objective from the space file's ``objective`` entry (None: not given)."""
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise UsageError(f"objective must be a mapping such as {{regex: 'time: ([0-9.eE+-]+)', scale: 1e-3}} "
                         f"or {{wall_time: true}}, not {_shown(spec)}")
    for k in spec:
        if k not in OBJECTIVE_KEYS:
            raise UsageError(f"unknown objective key {_shown(k)}{_suggest(str(k), OBJECTIVE_KEYS)}; "
                             f"accepted: {', '.join(OBJECTIVE_KEYS)}")
    if "regex" in spec and spec.get("wall_time"):
        raise UsageError("objective has both regex and wall_time; give one of them")
    if "regex" not in spec:
        if spec.get("wall_time") is not True:
            raise UsageError("objective needs regex (a regular expression with one group) or wall_time: true")
        if "scale" in spec:
            raise UsageError("objective: scale applies to a regex only; wall time is in seconds")
        return Objective()
    regex = spec["regex"]
    if not isinstance(regex, str) or not regex:
        raise UsageError(f"objective regex must be a non-empty string, not {_shown(regex)}")
    if len(regex) > MAX_REGEX_CHARS:
        raise UsageError(f"objective regex is {len(regex):,} characters long; the limit is {MAX_REGEX_CHARS:,}")
    try:
        compiled = re.compile(regex)
    except (re.error, RecursionError, OverflowError, ValueError) as exc:
        raise UsageError(f"objective regex {_shown(regex)} is not a valid regular expression: {str(exc)[:100]}") from None
    if compiled.groups != 1:
        raise UsageError(f"objective regex {_shown(regex)} has {compiled.groups} capturing groups; it needs exactly "
                         "one, around the number (use (?:...) for other groups)")
    scale = spec.get("scale", 1.0)
    if isinstance(scale, str):  # YAML 1.1 reads 1e-3 (no dot) as a string
        try:
            scale = float(scale)
        except ValueError:
            pass
    if not (_number(scale) and math.isfinite(scale) and scale > 0):
        raise UsageError(f"objective scale must be a positive number (the factor to seconds), not {_shown(scale)}")
    return Objective(regex, float(scale))


def space_from_dict(doc, source: str = "the space", default_name: str = "space") -> tuple[KnobSpace, Objective | None]:
    """The KnobSpace and Objective a space document (already parsed) describes."""
    if doc is None:
        raise UsageError(f"{source} is empty; it needs at least a 'knobs' mapping (see docs/own-code.md)")
    if not isinstance(doc, dict):
        raise UsageError(f"{source} must be a mapping with the keys {', '.join(TOP_LEVEL)}, not {type(doc).__name__}")
    for k in doc:
        if k not in TOP_LEVEL:
            raise UsageError(f"{source} has an unknown key {_shown(k)}{_suggest(str(k), TOP_LEVEL)}; "
                             f"accepted: {', '.join(TOP_LEVEL)}")
    name = doc.get("name", default_name)
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise UsageError(f"name must be a non-empty string of at most 200 characters, not {_shown(name)}")
    knobs = doc.get("knobs")
    if not isinstance(knobs, dict) or not knobs:
        raise UsageError(f"{source} needs knobs: a mapping of knob names to their values, "
                         "e.g. knobs: {block: [16, 32, 64]}")
    values = {k: _knob_values(k, v) for k, v in knobs.items()}
    constraints = doc.get("constraints") or []
    if isinstance(constraints, str):
        constraints = [constraints]
    if not isinstance(constraints, list) or not all(isinstance(c, str) for c in constraints):
        raise UsageError(f"constraints must be a list of expression strings such as 'block * unroll <= 512', "
                         f"not {_shown(constraints)}")
    default = doc.get("default")
    if default is not None:
        if not isinstance(default, dict):
            raise UsageError(f"default must be a mapping of knob names to values, not {_shown(default)}")
        missing = [k for k in values if k not in default]
        unknown = [str(k) for k in default if k not in values]
        if missing or unknown:
            raise UsageError(f"default {_shown(default)} does not match the knobs {', '.join(values)}"
                             + (f"; missing {', '.join(missing)}" if missing else "")
                             + (f"; unknown {', '.join(unknown)}" if unknown else ""))
    objective = parse_objective(doc.get("objective"))
    task = Task("knobs", name.strip(), {"knobs": values, "constraints": list(constraints)})
    space = KnobSpace(values, constraints, task=task, default=default)
    return space, objective


class _DuplicateKey(ValueError):
    """A mapping that names one key twice: JSON and YAML parsers keep the last silently."""


def _unique_pairs(pairs) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(f"the key {k!r} is given twice in one mapping (the first would be lost)")
        out[k] = v
    return out


# YAML 1.2's core schema for the plain scalars that YAML 1.1 (PyYAML's default) reads otherwise: only
# true/false are booleans (on, off, yes, no, y, n stay text), an integer with a leading 0 is decimal (010 is
# 10; 0o10 and 0x10 are octal and hexadecimal), 1:30 is text (not 90, a base-60 number) and 1e3 is a number
_BOOL_12 = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT_12 = re.compile(r"^(?:[-+]?[0-9][0-9_]*|0o[0-7_]+|0x[0-9a-fA-F_]+)$")
_FLOAT_12 = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
                       r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


def _yaml_loader():
    """PyYAML's safe loader refusing a key given twice in one mapping (merge keys, ``<<``, still merge), its
    booleans and numbers read as YAML 1.2 reads them: a knob ``mode: [on, off]`` has the values "on" and
    "off", which a command's ``{mode}`` writes as such, not True and False."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            self.flatten_mapping(node)
            _unique_pairs((self.construct_object(k, deep=deep), None) for k, _ in node.value)
            return super().construct_mapping(node, deep=deep)

    tags = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}
    UniqueKeyLoader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in tags]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    UniqueKeyLoader.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL_12, list("tTfF"))
    UniqueKeyLoader.add_implicit_resolver("tag:yaml.org,2002:int", _INT_12, list("-+0123456789"))
    UniqueKeyLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+.0123456789"))

    def construct_bool(loader, node):
        text = loader.construct_scalar(node)
        if text.lower() not in ("true", "false"):  # an explicit !!bool tag on YAML 1.1's yes, on, ...
            return yaml.SafeLoader.construct_yaml_bool(loader, node)
        return text.lower() == "true"

    def construct_int(loader, node):
        text = loader.construct_scalar(node).replace("_", "")
        if not _INT_12.match(text):  # an explicit !!int tag on other text
            return yaml.SafeLoader.construct_yaml_int(loader, node)
        base = 8 if text.startswith("0o") else 16 if text.startswith("0x") else 10
        return int(text[2:] if base != 10 else text, base)

    UniqueKeyLoader.add_constructor("tag:yaml.org,2002:bool", construct_bool)
    UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", construct_int)
    return UniqueKeyLoader


def _parse(text: str, path: Path):
    """The file's document: JSON for .json, YAML (a superset) otherwise; a key given twice in one mapping
    is an error rather than the last one silently kept."""
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text, object_pairs_hook=_unique_pairs)
        except _DuplicateKey as exc:
            raise UsageError(f"space file {str(path)[:200]!r}: {exc}") from None
        except (ValueError, RecursionError) as exc:
            raise UsageError(f"space file {str(path)[:200]!r} is not valid JSON ({str(exc)[:100]})") from None
    import yaml

    try:
        return yaml.load(text, Loader=_yaml_loader())  # a SafeLoader subclass
    except _DuplicateKey as exc:
        raise UsageError(f"space file {str(path)[:200]!r}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the parser's own errors (YAMLError, ValueError, RecursionError...)
        why = " ".join(str(exc).split())[:150]
        raise UsageError(f"space file {str(path)[:200]!r} is not valid YAML ({type(exc).__name__}: {why})") from None


def load_space_file(path) -> tuple[KnobSpace, Objective | None]:
    """``(KnobSpace, Objective or None)`` from a YAML (.yaml, .yml) or JSON (.json) space file."""
    p = Path(path)
    shown = str(p) if len(str(p)) <= 200 else str(p)[:197] + "..."
    try:
        if not p.is_file():
            what = "is a folder" if p.is_dir() else "does not exist"
            raise UsageError(f"space file {shown!r} {what}; give a YAML or JSON file with knobs (see docs/own-code.md)")
        if p.stat().st_size > MAX_FILE_BYTES:
            raise UsageError(f"space file {shown!r} is larger than {MAX_FILE_BYTES // 2**20} MB")
        raw = p.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read space file {shown!r}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UsageError(f"space file {shown!r} is not UTF-8 text") from None
    doc = _parse(text, p)
    return space_from_dict(doc, f"space file {shown!r}", p.name.split(".")[0] or "space")
