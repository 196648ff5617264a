"""The project's own exceptions.

``UsageError`` is bad input from a user (a file, a name, a URL, a number): the CLI
prints its message as one sentence and exits with status 2, never a traceback.
"""


class AutotuneError(Exception):
    """Base class of every error autotune raises on purpose."""


class UsageError(AutotuneError, ValueError):
    """Bad input: the message names what was wrong and what is accepted."""


class DatabaseError(AutotuneError):
    """The experiment database could not be opened, read or written."""


class MissingDependencyError(AutotuneError, ImportError):
    """An optional dependency is needed; the message names the extra to install."""
