"""The project's own exceptions.

``UsageError`` is bad input from a user (a file, a name, a URL, a number): the CLI
prints its message as one sentence and exits with status 2, never a traceback.
"""

import sys


class AutotuneError(Exception):
    """Base class of every error autotune raises on purpose."""


class UsageError(AutotuneError, ValueError):
    """Bad input: the message names what was wrong and what is accepted."""


class DatabaseError(AutotuneError):
    """The experiment database could not be opened, read or written."""


class MissingDependencyError(AutotuneError, ImportError):
    """An optional dependency is needed; the message names the extra to install."""


def did_you_mean(value: str, names, n: int = 3) -> str:
    """" (did you mean 'a' or 'b'?)" naming the closest of ``names`` to ``value`` (difflib), or ""."""
    import difflib

    close = difflib.get_close_matches(str(value), [str(x) for x in names], n=n)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def check_choice(what: str, value: str, valid) -> str:
    """``value`` when it is one of ``valid``; else UsageError naming the valid values and the closest."""
    valid = list(valid)
    if value in valid:
        return value
    raise UsageError(f"unknown {what} {value!r}; valid: {', '.join(map(str, valid))}{did_you_mean(value, valid)}")


def run_script(main) -> None:
    """Exit with ``main()``'s status, as the entry point of the CLI and of every script: bad input
    (:class:`AutotuneError`: a missing cache file, an unknown option) is one line on stderr and status 2,
    not a traceback."""
    try:
        code = main()
    except AutotuneError as e:
        print(f"error: {e}", file=sys.stderr)
        code = 2
    sys.exit(code)
