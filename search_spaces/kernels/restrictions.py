"""Kernel Tuner's restrictions as KnobSpace constraints: expression strings in the safe constraint language
(search_spaces/constraints.py; nothing is passed to eval), callables taking keyword arguments
(``lambda block_size_x, tile: ...``) or the configuration dict, (callable, names) pairs, or, as the whole
``restrictions`` argument, one callable taking the configuration dict."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping

from autotune.errors import UsageError
from autotune.search_spaces.constraints import Constraint, guarded


def _keyword_restriction(fn: Callable, names: list[str]) -> Callable[[Mapping], bool]:
    """Kernel Tuner calls a restriction in a list with the parameters as keywords (``fn(**params)``);
    one taking a single positional parameter that is not a tunable parameter gets the dict."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return guarded(fn, lambda cfg: fn(**cfg), "restriction")
    ps = list(sig.parameters.values())
    positional = [p for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(ps) == 1 and positional and positional[0].name not in names:
        return guarded(fn, lambda cfg: fn(dict(cfg)), "restriction")
    takes_all = any(p.kind is p.VAR_KEYWORD for p in ps)
    wanted = [p.name for p in ps if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = [n for n in wanted if n not in names and sig.parameters[n].default is inspect.Parameter.empty]
    if unknown:
        raise UsageError(f"restriction {getattr(fn, '__name__', fn)!r} takes unknown parameter(s) "
                         f"{', '.join(unknown)}; tunable parameters are {', '.join(names)}")
    if takes_all:
        return guarded(fn, lambda cfg: fn(**cfg), "restriction")
    return guarded(fn, lambda cfg: fn(**{n: cfg[n] for n in wanted if n in cfg}), "restriction")


def make_restrictions(restrictions, names: list[str]) -> list:
    """Kernel Tuner restrictions as KnobSpace constraints (expression strings stay strings, checked
    against the parameter names; callables are adapted to take the configuration dict)."""
    if restrictions is None:
        return []
    if callable(restrictions):
        fn = restrictions
        return [guarded(fn, lambda cfg: fn(dict(cfg)), "restriction")]
    if isinstance(restrictions, str):
        restrictions = [restrictions]
    if not isinstance(restrictions, (list, tuple)):
        raise UsageError(f"restrictions must be a list of expression strings or callables, or one callable, "
                         f"not {type(restrictions).__name__}")
    out: list = []
    known = set(names)
    for r in restrictions:
        if isinstance(r, str):
            c = Constraint(r)
            if unknown := c.names - known:
                raise UsageError(f"restriction {r!r} uses unknown name(s) {', '.join(sorted(unknown))}; the tunable "
                                 f"parameters are {', '.join(names)}")
            out.append(c)
        elif isinstance(r, tuple) and len(r) == 2 and callable(r[0]) and isinstance(r[1], (list, tuple)):
            fn, used = r
            if unknown := [n for n in used if n not in known]:
                raise UsageError(f"restriction {getattr(fn, '__name__', fn)!r} names unknown parameter(s) "
                                 f"{', '.join(map(str, unknown))}; the tunable parameters are {', '.join(names)}")
            out.append(guarded(fn, lambda cfg, fn=fn, used=tuple(used): fn(**{n: cfg[n] for n in used}), "restriction"))
        elif callable(r):
            out.append(_keyword_restriction(r, names))
        else:
            raise UsageError(f"a restriction must be an expression string or a callable, not {type(r).__name__} "
                             f"({str(r)[:60]})")
    return out
