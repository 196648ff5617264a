"""The project's own exceptions.

``UsageError`` is bad input from a user (a file, a name, a URL, a number): the CLI
prints its message as one sentence and exits with status 2, never a traceback.

A message that names one of the caller's inputs names it with :func:`argument`, which carries both
spellings: the Python API's (the keyword argument, ``microbatches``) and the command line's (its flag,
``--microbatches``). ``str(error)`` shows the first, so a script calling the library reads the name it
passed; the command line prints :meth:`AutotuneError.command_line_message`, which shows the second.
"""

import re
import sys
from contextvars import ContextVar

_ARGUMENT = re.compile("\x02([^\x02\x03\x1f]*)\x1f([^\x02\x03\x1f]*)\x03")
_MARKERS = str.maketrans({c: "?" for c in "\x02\x03\x1f"})


def argument(api: str, flag: str | None = None) -> str:
    """An input of the caller, named in an error message both ways: ``api`` as the Python API spells it
    (a keyword argument, ``transfer_from``, or an expression, ``device='cpu'``) and ``flag`` as the
    command line does (default: ``--`` and ``api`` with ``-`` for ``_``, ``--transfer-from``). Only for
    the messages of :class:`AutotuneError` and its subclasses, which render it."""
    flag = "--" + api.replace("_", "-") if flag is None else flag
    api, flag = (text.translate(_MARKERS) for text in (api, flag))  # user text (an option's value) may hold them
    return f"\x02{api}\x1f{flag}\x03"


class AutotuneError(Exception):
    """Base class of every error autotune raises on purpose."""

    def __str__(self) -> str:
        """The message as the Python API's caller reads it: each :func:`argument` by its API name."""
        return _ARGUMENT.sub(lambda m: m[1], super().__str__())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"

    def command_line_message(self) -> str:
        """The message as the command line prints it: each :func:`argument` by its flag."""
        return _ARGUMENT.sub(lambda m: m[2], super().__str__())


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


#: True while a command of the command line runs (autotune.cli sets it around each command), False in a script
#: calling the library: what a message tells the user to run next (how to resume a campaign) is worded for it
COMMAND_LINE: ContextVar[bool] = ContextVar("autotune_command_line", default=False)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C after the work it stopped has said on standard error what it stored and how to resume it (a
    campaign): a KeyboardInterrupt, to which the command line adds nothing."""


def interruption(message: str = "") -> KeyboardInterrupt:
    """What work stopped by Ctrl-C raises once it has said how to resume: Interrupted in a command of the
    command line (which adds nothing to it); in a script a plain KeyboardInterrupt, the only one with which
    Python ends a script as Ctrl-C does (killed by SIGINT: status 130, which also stops a shell loop), where a
    subclass of it ends the script with status 1."""
    return Interrupted(message) if COMMAND_LINE.get() else KeyboardInterrupt(message)


def check_choice(what: str, value: str, valid) -> str:
    """``value`` when it is one of ``valid``; else UsageError naming the valid values and the closest."""
    valid = list(valid)
    if value in valid:
        return value
    raise UsageError(f"unknown {what} {value!r}; valid: {', '.join(map(str, valid))}{did_you_mean(value, valid)}")


def check_campaign_name(name, what: str = "campaign name"):
    """``name`` (None stays None) when it is text on one line: UsageError for one holding a control character
    (a line break, a tab, an escape), which would break the listings and error messages that show it."""
    import unicodedata

    if name is None:
        return None
    bad = next((ch for ch in str(name) if unicodedata.category(ch) in ("Cc", "Zl", "Zp")), None)
    if bad is not None:
        raise UsageError(f"the {what} {name!r} holds the control character {bad!r}; a campaign name is one line "
                         "of text, without line breaks, tabs or other control characters")
    return name


def run_script(main, flags: bool = False) -> None:
    """Exit with ``main()``'s status, as the entry point of the CLI and of every script: bad input
    (:class:`AutotuneError`: a missing cache file, an unknown option) is one line on stderr and status 2,
    not a traceback. ``flags``: the message names the inputs by the CLI's flags (a script's own options
    differ: it names them as the Python API does)."""
    try:
        code = main()
    except AutotuneError as e:
        print(f"error: {e.command_line_message() if flags else e}", file=sys.stderr)
        code = 2
    sys.exit(code)
