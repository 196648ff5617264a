"""Argument checks and output writing shared by the benchmark scripts.

Bad input is refused when the arguments are read, before anything is measured: a count that must be
positive (``--seeds 0`` would report the median of nothing), a negative seed (numpy refuses it at the first
run), an output file whose folder does not exist (found only when the report is written, at the end of a run
of hours, it would lose the run) and an option the run would not use. A report is written beside its path and
renamed over it, so an interrupted write never leaves half a file.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from autotune.cli.common import writable_output
from autotune.errors import UsageError


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer of at least 1."""
    return _whole(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse ``type``: an integer of at least 0 (a seed: what numpy's generators take)."""
    return _whole(text, 0)


def _whole(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least {least}, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
    return value


def output_file(text: str) -> str:
    """An argparse ``type``: a file the script will write, checked now (not when the results are written) as the
    CLI checks its output files (:func:`autotune.cli.common.writable_output`)."""
    try:
        writable_output(text, "the file")
    except UsageError as exc:  # argparse shows an ArgumentTypeError's message, a ValueError's only as "invalid"
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def refuse_unused(given: dict[str, bool], why: str) -> None:
    """UsageError ``FLAG why`` for the first option of ``given`` (option -> whether the command line gave it): an
    option that the run would not use is refused, not ignored (a run of hours without the --results it was given
    keeps nothing to resume from)."""
    flag = next((f for f, g in given.items() if g), None)
    if flag is not None:
        raise UsageError(f"{flag} {why}")


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it, renamed over it once complete."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: str | Path, value, indent: int | None = 1) -> None:
    """``value`` as JSON at ``path``, written atomically (:func:`write_text_atomic`)."""
    write_text_atomic(path, json.dumps(value, indent=indent))
