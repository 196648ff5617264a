"""Find every concrete subclass of a base class in the library, so conformance suites can be
parametrised over all of them and a new class cannot escape its suite.

``concrete_subclasses(Space, ["autotune.search_spaces"])`` imports every module under the named
packages (``pkgutil.walk_packages``) and returns the non-abstract subclasses defined there.
Only classes whose module lies under those packages count: subclasses that tests define
(planted faults, throw-away spaces) live elsewhere and are left out, whatever was imported
before. A module that cannot be imported because an optional dependency is missing is
recorded in ``unimportable`` (its classes cannot be checked here); any other import error is
raised, since a broken module would otherwise hide its classes from the suites.

Factory tables name classes as ``"module:QualName"`` strings, resolved only when used, so a
table entry for a class whose module needs a missing package does not break the import of the
table, and a class that moved is reported by the suite rather than by an ImportError.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
from collections.abc import Iterable

from autotune.errors import MissingDependencyError
from autotune.lazy import EXTRAS

#: module name -> why it could not be imported (a missing optional dependency)
unimportable: dict[str, str] = {}


class Unavailable(Exception):
    """A factory cannot build its object here (missing package or hardware); the message says why.
    Suites turn it (and MissingDependencyError) into a skip with that reason."""


def _missing_optional(exc: ImportError) -> str | None:
    """The optional package an ImportError is about, or None when it is not an optional one."""
    if isinstance(exc, MissingDependencyError):
        return str(exc)
    top = (exc.name or "").split(".")[0]
    if top in EXTRAS:
        return f"needs the package {top!r}; install it with pip install 'autotune[{EXTRAS[top]}]'"
    return None


def import_all(packages: Iterable[str]) -> list[str]:
    """Import every module under ``packages``; the names of those imported."""
    names: list[str] = []
    for pkg_name in packages:
        pkg = importlib.import_module(pkg_name)
        names.append(pkg_name)
        failed: list[str] = []
        for info in pkgutil.walk_packages(pkg.__path__, pkg_name + ".", onerror=failed.append):
            try:
                importlib.import_module(info.name)
            except ImportError as exc:
                reason = _missing_optional(exc)
                if reason is None:
                    raise
                unimportable[info.name] = reason
                continue
            names.append(info.name)
        for name in failed:  # a subpackage walk_packages could not import: raise its real error
            if name not in unimportable:
                try:
                    importlib.import_module(name)
                except ImportError as exc:
                    reason = _missing_optional(exc)
                    if reason is None:
                        raise
                    unimportable[name] = reason
    return names


def _all_subclasses(base: type) -> Iterable[type]:
    for sub in base.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def concrete_subclasses(base: type, packages: Iterable[str]) -> list[type]:
    """Non-abstract subclasses of ``base`` defined in modules under ``packages`` (all imported
    first), sorted by dotted name; private classes (a leading underscore) are left out."""
    packages = list(packages)
    import_all(packages)
    found = {}
    for cls in _all_subclasses(base):
        module = cls.__module__
        if not any(module == p or module.startswith(p + ".") for p in packages):
            continue
        if inspect.isabstract(cls) or cls.__name__.startswith("_"):
            continue
        found[dotted(cls)] = cls
    return [found[k] for k in sorted(found)]


def dotted(cls: type) -> str:
    """``"module:QualName"``, the form factory tables name classes in."""
    return f"{cls.__module__}:{cls.__qualname__}"


def resolve(name: str) -> type:
    """The class a ``"module:QualName"`` string names (ImportError/AttributeError when it is gone)."""
    module, _, qual = name.partition(":")
    obj = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def resolve_entry(name: str) -> tuple[type | None, str]:
    """``(class, "")`` for a table entry's class, or ``(None, why)`` when it cannot be imported here:
    its module needs a missing optional package, or the class is not in the package (it moved or
    was removed: the entry is stale, and the suites skip it saying so)."""
    try:
        return resolve(name), ""
    except ImportError as exc:
        reason = _missing_optional(exc)
        if reason is not None:
            return None, reason
        return None, f"{name} is not in the package ({type(exc).__name__}: {exc}); update or remove its entry"
    except AttributeError as exc:
        return None, f"{name} is not in the package ({exc}); update or remove its entry"


def require_modules(*modules: str) -> None:
    """Raise MissingDependencyError naming the pip extra when one of ``modules`` is not installed."""
    for m in modules:
        if importlib.util.find_spec(m) is None:
            extra = EXTRAS.get(m)
            hint = f"; install it with pip install 'autotune[{extra}]'" if extra else ""
            raise MissingDependencyError(f"needs the package {m!r}{hint}")


def table_entry(table: dict[str, list], cls: type) -> list | None:
    """The entries ``table`` holds for ``cls``: under its own dotted name, or under a name that
    resolves to the same class object (a class re-exported from the module it moved out of)."""
    if dotted(cls) in table:
        return table[dotted(cls)]
    for name, entries in table.items():
        try:
            if resolve(name) is cls:
                return entries
        except (ImportError, AttributeError):
            continue
    return None
