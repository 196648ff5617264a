"""Knob names as C preprocessor macros: the one check every generator of macros runs before it writes any.

A knob becomes a macro in a user kernel's source (``#define <param> <value>``, user_kernel.py: the C and
CUDA runners compile that source) and in the C header of ``export-configs`` (``#define <PREFIX>_<KNOB>``,
the name converted by ``macro_name``). Two names can give one macro (``block-x`` and ``block_x`` are both
``BLOCK_X`` in a header), and a knob can be named like a macro the generated code defines itself
(``<PREFIX>_DEVICE``, ``kernel_tuner``): the later ``#define`` silently overrides the earlier. ``check_macros``
refuses both before anything is compiled or written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from autotune.errors import UsageError


def macro_name(text: str) -> str:
    """``text`` as a macro name: runs of other characters than letters and digits as one underscore, in capitals,
    an underscore in front where it would start with a digit."""
    name = re.sub(r"[^A-Za-z0-9]+", "_", str(text)).strip("_").upper()
    return name if name and not name[0].isdigit() else f"_{name}"


def check_macros(defined: Iterable[tuple[str, str]], where: str, hint: str = "") -> None:
    """``defined``: (macro, what it stands for) for every macro one generated source defines. A UsageError
    naming both where two different things would define the same macro (the same thing twice is one macro);
    ``where`` names the source (\"a C header\"), ``hint`` what to do about it."""
    first: dict[str, str] = {}
    for macro, what in defined:
        other = first.setdefault(macro, what)
        if other != what:
            raise UsageError(f"{other} and {what} would both be the macro {macro} in {where}"
                             + (f"; {hint}" if hint else ""))
