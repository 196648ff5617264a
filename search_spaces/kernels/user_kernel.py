"""UserKernel: a user's own C or CUDA kernel, tuned the way Kernel Tuner tunes it.

The user gives the source (a string of code), the kernel's name, a problem size, the
argument list (numpy arrays and numpy scalars) and the tunable parameters with optional
restrictions. Each configuration's source is the user's code with Kernel Tuner's
preprocessor defines in front of it:

    #define grid_size_x ...   (and _y, _z: ceil(problem_size / grid_div) per dimension)
    #define block_size_x ...  (and _y, _z, or the names in block_size_names; default 256, 1, 1)
    #define <param> <value>   (every tunable parameter)
    #define kernel_tuner 1
    #line 1

(or only the user's ``defines`` when given, as in Kernel Tuner). C sources compiled as C++
(g++, Kernel Tuner's default compiler) are wrapped in ``extern "C" { ... }`` unless they
already say ``extern "C"``, so the function keeps its plain name.

Restrictions (``restrictions.py``) are expression strings in the safe constraint language
(search_spaces/constraints.py; nothing is passed to eval), callables taking keyword
arguments (``lambda block_size_x, tile: ...``) or the configuration dict, or, as the whole
``restrictions`` argument, one callable taking the configuration dict.

The kernel's arguments, answer and the check of its outputs are ``user_arguments``.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from autotune.errors import UsageError, did_you_mean
from autotune.search_spaces.constraints import Constraint
from autotune.search_spaces.kernels.macros import check_macros
from autotune.search_spaces.kernels.restrictions import make_restrictions
from autotune.search_spaces.kernels.user_arguments import check_identity, describe_arguments
from autotune.search_spaces.knobs import KnobSpace
from autotune.types import Task

LANGS = ("C", "CUDA")
DEFAULT_BLOCK_SIZE_NAMES = ("block_size_x", "block_size_y", "block_size_z")
GRID_NAMES = ("grid_size_x", "grid_size_y", "grid_size_z")
FORBIDDEN_PARAMS = ("grid_size_x", "grid_size_y", "grid_size_z", "time")


def kernel_name_in_source(kernel_name: str, code: str, include_dirs: Sequence = (), extra: Sequence[str] = ()) -> None:
    """UsageError unless ``kernel_name`` (without template arguments or namespace) occurs as an identifier
    in ``code``, in a file it #includes from ``include_dirs``, or in ``extra`` (the text of compiler
    options and defines, which can spell a name for a macro): a misspelt name is refused before any
    compilation rather than failing every configuration when the function is looked up."""
    base = kernel_name.split("<", 1)[0].strip().rsplit("::", 1)[-1].strip()
    if not base.isidentifier():
        raise UsageError(f"kernel_name {kernel_name!r} is not the name of a function (a C identifier, optionally "
                         "with template arguments)")
    pattern = re.compile(r"(?<![A-Za-z0-9_])" + re.escape(base) + r"(?![A-Za-z0-9_])")
    include = re.compile(r'^\s*#\s*include\s*["<]([^">]+)[">]', re.MULTILINE)
    seen: set = set()
    todo, texts = [*extra, code], 0
    while todo and texts < 64 + len(extra):  # the source and up to 63 included files of the user's own
        text = todo.pop()
        texts += 1
        if pattern.search(text):
            return
        for rel in include.findall(text):
            for d in include_dirs:
                path = Path(d) / rel
                if path.is_file() and path.resolve() not in seen:
                    seen.add(path.resolve())
                    try:
                        todo.append(path.read_text(errors="replace"))
                    except OSError:
                        pass
                    break
    names = sorted(set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code)))
    raise UsageError(f"kernel_name {kernel_name!r} does not occur in the kernel source{did_you_mean(base, names)}; "
                     "give the name of the kernel function the source defines")


def _check_expression_names(spec, names: Sequence[str], what: str) -> None:
    """UsageError when a size or divisor expression (``spec``: a string, or a list of them; numbers and callables
    pass) names something that is not a tunable parameter: a Python variable of the script, such as ``"n"``,
    is not visible to it. Checked before anything is compiled."""
    for part in spec if isinstance(spec, (list, tuple)) else [spec]:
        if isinstance(part, str):
            unknown = Constraint(part).names - set(names)
            if unknown:
                raise UsageError(f"{what} {part!r} uses unknown name(s) {', '.join(sorted(unknown))}; an expression "
                                 f"there may name only the tunable parameters ({', '.join(names)}); give a number "
                                 "for a fixed size")


def _expr_value(text: str, params: Mapping, what: str) -> float:
    """A Kernel Tuner size expression ("block_size_x * tile", "n") evaluated at ``params`` safely."""
    _check_expression_names(text, list(params), what)
    c = Constraint(text, set(params))
    try:
        return c._fn(params)  # the compiled expression's value (a Constraint's call gives its truth)
    except (ArithmeticError, ValueError, TypeError) as exc:
        raise UsageError(f"{what} {text!r} cannot be evaluated at {dict(params)}: {exc}") from None


def _int_expr(spec, params: Mapping, what: str) -> int:
    if callable(spec):
        v = spec(dict(params))
    elif isinstance(spec, str):
        v = _expr_value(spec, params, what)
    elif isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        v = spec
    else:
        raise UsageError(f"{what} must be an integer, a string expression over the tunable parameters or a "
                         f"callable, not {type(spec).__name__}")
    try:
        return int(v)
    except (TypeError, ValueError):
        raise UsageError(f"{what} {spec!r} gives {v!r}, not an integer") from None


def _describe(spec) -> object:
    """A JSON-able description of a size or divisor specification (for the task's identity)."""
    if spec is None or isinstance(spec, (int, str)):
        return spec
    if isinstance(spec, np.integer):
        return int(spec)
    if callable(spec):
        return f"callable:{getattr(spec, '__qualname__', type(spec).__name__)}"
    if isinstance(spec, (list, tuple)):
        return [_describe(s) for s in spec]
    return repr(spec)


def _define_value(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    return str(v).replace("\n", "\\\n")


class UserKernel:
    """One user kernel (source, arguments, tunable parameters) as a knob space and per-configuration
    sources, launch dimensions and task identity; nothing here compiles or runs anything."""

    def __init__(self, kernel_name: str, source: str, lang: str, problem_size, arguments: Sequence,
                 tune_params: Mapping[str, Sequence], *, restrictions=None, grid_div=(None, None, None),
                 block_size_names: Sequence[str] | None = None, defines: Mapping | None = None,
                 smem_args: Mapping | None = None, max_threads: int = 1024, compiler: str = "g++",
                 timing: str | None = None, source_name: str | None = None, answer: Sequence | None = None,
                 atol: float = 1e-6, verify: Callable | None = None):
        if not isinstance(kernel_name, str) or not kernel_name.strip():
            raise UsageError("kernel_name must be the name of the kernel function, a non-empty string")
        if lang not in LANGS:
            raise UsageError(f"unsupported language {lang!r}; supported: {', '.join(LANGS)}")
        self.kernel_name, self.source_text, self.lang = kernel_name.strip(), source, lang
        if not isinstance(tune_params, Mapping) or not tune_params:
            raise UsageError("tune_params must be a non-empty dict mapping each tunable parameter to its values")
        for name, values in tune_params.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise UsageError(f"tunable parameter name {name!r} is not a valid C identifier")
            if name in FORBIDDEN_PARAMS:
                raise UsageError(f"tunable parameter {name!r} has a name Kernel Tuner reserves "
                                 f"({', '.join(FORBIDDEN_PARAMS)}); rename it")
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence | np.ndarray) or len(values) == 0:
                raise UsageError(f"tunable parameter {name!r} must have a non-empty list of values")
        self.tune_params = {n: [v.item() if isinstance(v, np.generic) else v for v in vals]
                            for n, vals in tune_params.items()}
        self.names = list(self.tune_params)
        names = block_size_names or DEFAULT_BLOCK_SIZE_NAMES
        if isinstance(names, str) or not all(isinstance(n, str) and n.isidentifier() for n in names) or len(names) > 3:
            raise UsageError("block_size_names must be a list of at most 3 parameter names (x, y, z)")
        self.block_size_names = tuple(names) + DEFAULT_BLOCK_SIZE_NAMES[len(names):]
        self.grid_div = tuple(grid_div)
        self.defines = dict(defines) if defines is not None else None
        if self.defines is None:  # the macros every configuration's source starts with: none may override another
            check_macros([*((g, f"the grid size {g}") for g in GRID_NAMES),
                          *((b, f"the block size in {d} ({b})") for d, b in zip("xyz", self.block_size_names)),
                          *((k, f"tunable parameter {k!r}") for k in self.names if k not in self.block_size_names),
                          ("kernel_tuner", "Kernel Tuner's own macro kernel_tuner")],
                         "each configuration's source", "rename the parameter (or the block_size_names)")
        else:
            for k in self.defines:
                if not isinstance(k, str) or not k.isidentifier():
                    raise UsageError(f"define name {k!r} is not a valid identifier")
        self.smem_args = dict(smem_args) if smem_args else None
        self.max_threads = int(max_threads)
        self.compiler = compiler
        self.timing = timing
        # compiler messages name the user's file (or "<kernel_string>") and its own line numbers
        name = source_name or "<kernel_string>"
        self._line = '#line 1 "' + name.replace("\\", "/").replace('"', "'") + '"\n'
        self.arg_specs = describe_arguments(arguments)
        if isinstance(problem_size, (int, np.integer, str)) or callable(problem_size):
            self.problem_size = problem_size if callable(problem_size) else (problem_size,)
        elif isinstance(problem_size, (list, tuple)) and 1 <= len(problem_size) <= 3:
            self.problem_size = tuple(problem_size)
        else:
            raise UsageError(f"problem_size must be an int, a string expression, a callable or a tuple of 1 to 3 of "
                             f"them, not {problem_size!r}")
        if not callable(self.problem_size):
            for p in self.problem_size:
                if not (isinstance(p, (int, np.integer, str)) and not isinstance(p, bool)):
                    raise UsageError(f"problem_size entries must be ints or string expressions, not {p!r}")
                _check_expression_names(p, self.names, "problem_size")
        for axis, div in zip("xyz", self.grid_div):
            _check_expression_names(div, self.names, f"grid_div_{axis}")
        if self.smem_args and "size" in self.smem_args:
            _check_expression_names(self.smem_args["size"], self.names, "smem_args size")
        self.constraints = make_restrictions(restrictions, self.names)
        if lang == "CUDA":
            self.constraints.append(self._fits_block)
        self.source_sha1 = hashlib.sha1(source.encode()).hexdigest()
        params = {"lang": lang, "source_sha1": self.source_sha1,
                  "problem_size": _describe(self.problem_size if callable(self.problem_size) else list(self.problem_size)),
                  "arguments": [[a["kind"], a["dtype"], a["shape"]] for a in self.arg_specs]}
        if lang == "C":
            params.update(compiler=compiler, timing=timing)
        else:
            params.update(grid_div=_describe(list(self.grid_div)), block_size_names=list(self.block_size_names))
        if self.defines is not None:
            params["defines"] = {k: _describe(v) for k, v in self.defines.items()}
        # how outputs are checked is part of the task: trials checked against another answer, tolerance or
        # verify function are not reused (a corrected reference measures afresh); with no answer nothing is
        # checked and the parameters are as they always were
        check = check_identity(answer, atol, verify)
        if check is not None:
            params["check"] = check
        self.task = Task("user-kernel", self.kernel_name, params)
        self._space: KnobSpace | None = None

    # -- the space ---------------------------------------------------------------------
    def _fits_block(self, cfg: Mapping) -> bool:
        """Kernel Tuner's own check: the thread block has at most the device's maximum of threads."""
        return math.prod(self.block(cfg)) <= self.max_threads

    def space(self) -> KnobSpace:
        if self._space is None:
            self._space = KnobSpace(self.tune_params, self.constraints, task=self.task)
        return self._space

    # -- per configuration -------------------------------------------------------------
    def block(self, cfg: Mapping) -> tuple[int, int, int]:
        d = (256, 1, 1)
        return tuple(int(cfg.get(n, d[i])) for i, n in enumerate(self.block_size_names))  # type: ignore[return-value]

    def current_problem_size(self, cfg: Mapping) -> tuple[int, int, int]:
        ps = self.problem_size(dict(cfg)) if callable(self.problem_size) else self.problem_size
        if isinstance(ps, (int, np.integer, str)):
            ps = (ps,)
        sizes = [_int_expr(s, cfg, "problem_size") for s in ps]
        return tuple(sizes + [1] * (3 - len(sizes)))  # type: ignore[return-value]

    def grid(self, cfg: Mapping) -> tuple[int, int, int]:
        """ceil(problem_size / grid_div) per dimension; grid_div_x defaults to the block's x name when it
        is a tunable parameter (likewise y and z), else 1; a list of expressions is multiplied out."""
        sizes = self.current_problem_size(cfg)
        out = []
        for i, div in enumerate(self.grid_div):
            if div is None:
                d = int(cfg[self.block_size_names[i]]) if self.block_size_names[i] in cfg else 1
            elif callable(div):
                d = _int_expr(div, cfg, f"grid_div_{'xyz'[i]}")
            else:
                parts = [div] if isinstance(div, (str, int, np.integer)) else list(div)
                d = math.prod(_int_expr(p, cfg, f"grid_div_{'xyz'[i]}") for p in parts)
            if d <= 0:
                raise UsageError(f"grid_div_{'xyz'[i]} is {d} at {dict(cfg)}; a grid divisor must be positive")
            out.append(-(-sizes[i] // d))
        return tuple(out)  # type: ignore[return-value]

    def shared_bytes(self, cfg: Mapping) -> int:
        if not self.smem_args or "size" not in self.smem_args:
            return 0
        return _int_expr(self.smem_args["size"], cfg, "smem_args size")

    def define_lines(self, cfg: Mapping) -> list[tuple[str, str]]:
        if self.defines is not None:
            out = []
            for k, v in self.defines.items():
                if callable(v):
                    v = v(dict(cfg))
                elif isinstance(v, str):
                    v = "".join(str(cfg[t]) if t in cfg else t for t in _tokens(v))
                out.append((k, _define_value(v)))
            return out
        out = [(n, str(g)) for n, g in zip(GRID_NAMES, self.grid(cfg))]
        out += [(n, str(b)) for n, b in zip(self.block_size_names, self.block(cfg))]
        out += [(k, _define_value(v)) for k, v in cfg.items() if k not in self.block_size_names]
        out.append(("kernel_tuner", "1"))
        return out

    def source(self, cfg: Mapping) -> str:
        prefix = "".join(f"#define {k} {v}\n" for k, v in self.define_lines(cfg))
        body = self.source_text
        if self.lang == "C" and self.compiler_is_cxx and 'extern "C"' not in body:
            return f'{prefix}extern "C" {{\n{self._line}{body}\n}}\n'
        return f"{prefix}{self._line}{body}\n"

    @property
    def compiler_is_cxx(self) -> bool:
        base = self.compiler.rsplit("/", 1)[-1]
        return "++" in base or base in ("nvcc", "nvc++", "clang++", "icpx", "icpc")


def _tokens(text: str) -> list[str]:
    """Split on identifiers, keeping everything else, so parameters can be replaced by their values."""
    parts = re.split(r"([A-Za-z_][A-Za-z0-9_]*)", text)
    return [p for p in parts if p]


def detect_c_timing(source: str, name: str, timing: str | None) -> tuple[str, str]:
    """(timing, return type) of a C function: Kernel Tuner's C convention is a function that returns
    its own time in milliseconds as a float ("kernel"); a void function is timed by the runner's wall
    clock ("runner"). ``timing`` None decides from the declared return type of ``name`` in ``source``
    (void -> runner; float or double -> kernel; not found -> kernel with float, as Kernel Tuner)."""
    if timing not in (None, "kernel", "runner"):
        raise UsageError(f"unknown timing {timing!r}; valid: 'kernel' (the function returns its own time in ms, "
                         "Kernel Tuner's C convention), 'runner' (autotune times the call), or None (decided from "
                         "the function's return type)")
    m = re.search(r"\b(void|float|double|int|long|unsigned|char|short|bool|size_t)\b[\s*]*"
                  + re.escape(name) + r"\s*\(", source)
    declared = m.group(1) if m else None
    if timing == "runner" or (timing is None and declared is not None and declared not in ("float", "double")):
        return "runner", "void"
    return "kernel", declared if declared in ("float", "double") else "float"
