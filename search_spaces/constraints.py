"""Safe constraint expressions over knob names.

An expression such as ``"block_x * block_y <= 1024 and tile % vec == 0"`` is parsed
with :mod:`ast` and checked against a whitelist (names, numbers, arithmetic,
comparisons, boolean operators, conditional expressions and a few functions).
It is compiled to a Python closure tree; nothing is ever passed to ``eval``.

Limits keep a hostile or mistaken expression from hanging or exhausting memory: at most
MAX_CHARS characters and MAX_NODES syntax nodes, and powers whose result would exceed
MAX_POW_BITS bits are refused. An expression that cannot be evaluated at a point (division
by zero, log2 of 0, a power too large) raises UsageError naming the expression and the point.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
import warnings
from collections.abc import Callable, Mapping

from autotune.errors import UsageError

FUNCTIONS: dict[str, Callable] = {
    "min": min, "max": max, "abs": abs, "int": int, "float": float, "round": round,
    "log2": math.log2, "ceil": math.ceil, "floor": math.floor, "sqrt": math.sqrt,
}

MAX_CHARS = 10_000
MAX_NODES = 2_000
MAX_POW_BITS = 4_096


class _TooLarge(ArithmeticError):
    pass


def _pow(base, exp):
    """base ** exp, refused when the result would need more than MAX_POW_BITS bits."""
    if isinstance(base, (int, float)) and isinstance(exp, (int, float)) and abs(exp) > 1:
        magnitude = abs(base)
        if magnitude > 1 and exp > 0 and exp * math.log2(magnitude) > MAX_POW_BITS:
            raise _TooLarge(f"{base!r} ** {exp!r} is too large")
    return operator.pow(base, exp)


_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: _pow,
}
_CMPOPS = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}

Env = Mapping[str, object]
Compiled = Callable[[Env], object]


class Constraint:
    """A compiled constraint expression; call it with a mapping of knob values."""

    def __init__(self, text: str, names: set[str] | None = None):
        if not isinstance(text, str):
            raise UsageError(f"a constraint must be an expression string, not {type(text).__name__}")
        self.text = text
        shown = text if len(text) <= 80 else text[:77] + "..."
        if len(text) > MAX_CHARS:
            raise UsageError(f"constraint {shown!r} is {len(text):,} characters long; the limit is {MAX_CHARS:,}")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SyntaxWarning)  # e.g. "1if": the error below is enough
                tree = ast.parse(text, mode="eval")
            nodes = sum(1 for _ in ast.walk(tree))
            if nodes > MAX_NODES:
                raise UsageError(f"constraint {shown!r} has {nodes:,} terms; the limit is {MAX_NODES:,}")
            self.names: set[str] = set()
            self._fn = self._compile(tree.body)
        except SyntaxError as exc:
            raise UsageError(f"constraint {shown!r} is not a valid expression: {exc.msg}") from None
        except (RecursionError, MemoryError):
            raise UsageError(f"constraint {shown!r} is nested too deeply") from None
        if names is not None and (unknown := self.names - names):
            raise UsageError(
                f"constraint {text!r} uses unknown name(s) {', '.join(sorted(unknown))}; "
                f"knobs are {', '.join(sorted(names))}"
            )

    def __call__(self, env: Env) -> bool:
        try:
            return bool(self._fn(env))
        except (ArithmeticError, ValueError, TypeError, RecursionError) as exc:
            point = ", ".join(f"{n}={env[n]!r}" for n in sorted(self.names) if n in env)
            why = str(exc)[:100] if isinstance(exc, _TooLarge) else f"{exc.__class__.__name__}: {str(exc)[:100]}"
            raise UsageError(f"constraint {self.text[:80]!r} cannot be evaluated{' at ' + point if point else ''}: "
                             f"{why}") from None

    def __repr__(self) -> str:
        return f"Constraint({self.text!r})"

    def _reject(self, node: ast.AST, what: str) -> UsageError:
        return UsageError(
            f"constraint {self.text!r}: {what} is not allowed; use knob names, numbers, arithmetic, "
            f"comparisons (of strings too: layout == 'row'), and/or/not, 'x if c else y' and the functions "
            f"{', '.join(sorted(FUNCTIONS))}"
        )

    def _operand(self, node: ast.AST) -> Compiled:
        """A comparison's operand: what ``_compile`` takes, or a string (``layout == 'row'``: knobs take strings;
        only here, where a string cannot be multiplied into a huge one)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value
            return lambda env: value
        return self._compile(node)

    def _compile(self, node: ast.AST) -> Compiled:  # noqa: C901 - one branch per node type
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
            value = node.value
            return lambda env: value
        if isinstance(node, ast.Name):
            name = node.id
            if name in ("True", "False"):
                value = name == "True"
                return lambda env: value
            self.names.add(name)
            return lambda env: env[name]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            op, left, right = _BINOPS[type(node.op)], self._compile(node.left), self._compile(node.right)
            return lambda env: op(left(env), right(env))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            op, operand = _UNARY[type(node.op)], self._compile(node.operand)
            return lambda env: op(operand(env))
        if isinstance(node, ast.BoolOp):
            parts = [self._compile(v) for v in node.values]
            if isinstance(node.op, ast.And):
                return lambda env: all(p(env) for p in parts)
            return lambda env: any(p(env) for p in parts)
        if isinstance(node, ast.Compare) and all(type(o) in _CMPOPS for o in node.ops):
            first = self._operand(node.left)
            rest = [(_CMPOPS[type(o)], self._operand(c)) for o, c in zip(node.ops, node.comparators)]

            def compare(env: Env) -> bool:
                left = first(env)
                for op, right_fn in rest:
                    right = right_fn(env)
                    if not op(left, right):
                        return False
                    left = right
                return True

            return compare
        if isinstance(node, ast.IfExp):
            test, body, orelse = self._compile(node.test), self._compile(node.body), self._compile(node.orelse)
            return lambda env: body(env) if test(env) else orelse(env)
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS or node.keywords:
                raise self._reject(node, f"the call {ast.unparse(node)!r}")
            fn, args = FUNCTIONS[node.func.id], [self._compile(a) for a in node.args]
            return lambda env: fn(*(a(env) for a in args))
        raise self._reject(node, f"{ast.unparse(node)!r} ({type(node).__name__})")


def describe_callable(fn: Callable) -> str:
    """A callable as a user would recognise it: its name, and where it is defined when Python knows
    ("'<lambda>' (tune.py line 12)")."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    code = getattr(fn, "__code__", None)
    where = f" ({code.co_filename.replace(chr(92), '/').rsplit('/', 1)[-1]} line {code.co_firstlineno})" if code else ""
    return f"{name!r}{where}"


def guarded(fn: Callable, call: Callable[[Mapping], object] | None = None,
            what: str = "constraint") -> Callable[[Mapping], bool]:
    """``call`` (default ``fn``: the user's function applied to the configuration dict) whose failure is a
    UsageError naming the function and the configuration, worded as an expression's (Constraint.__call__):
    the user's function raising is bad input, not an error of autotune. It keeps ``fn``'s name
    (functools.wraps), which a task's identity reads."""
    call = fn if call is None else call

    @functools.wraps(fn)
    def check(cfg: Mapping) -> bool:
        try:
            return bool(call(cfg))
        except UsageError:
            raise  # already says which constraint and where (a guarded or expression constraint inside)
        except Exception as exc:  # noqa: BLE001 - any failure of the user's function is reported the same way
            point = ", ".join(f"{n}={v!r}" for n, v in cfg.items())
            raise UsageError(f"{what} {describe_callable(fn)} cannot be evaluated{' at ' + point if point else ''}: "
                             f"{exc.__class__.__name__}: {str(exc)[:100]}") from None
    check.guarded = True
    return check


def make_constraint(spec: str | Callable, names: set[str]) -> Callable[[Env], bool]:
    """A constraint from an expression string (parsed safely) or a callable taking the knob dict."""
    if isinstance(spec, str):
        return Constraint(spec, names)
    if isinstance(spec, Constraint) or getattr(spec, "guarded", False):
        return spec  # already reports its own failures
    if callable(spec):
        return guarded(spec)
    raise UsageError(f"a constraint must be an expression string or a callable, not {type(spec).__name__}")
