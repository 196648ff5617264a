"""Argument checks and output writing shared by the benchmark scripts.

Bad input is refused when the arguments are read, before anything is measured: a count that must be
positive (``--seeds 0`` would report the median of nothing) and an output file whose folder does not
exist (found only when the report is written, at the end of a run of hours, it would lose the run). A
report is written beside its path and renamed over it, so an interrupted write never leaves half a file.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def output_file(text: str) -> str:
    """An argparse ``type``: a file the script will write, in a folder that exists (checked now, not when the
    results are written)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; name a file to write")
    folder = path.parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"the folder {str(folder)!r} of {text} does not exist")
    if not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"the folder {str(folder)!r} of {text} is not writable")
    return text


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
