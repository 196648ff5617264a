"""Helpers shared by the command modules: the --db option, error handling, JSON output."""

from __future__ import annotations

import functools
import json
from typing import Annotated, Any

import typer

from autotune.errors import AutotuneError

DEFAULT_DB = "sqlite:///autotune.db"

DbOption = Annotated[
    str,
    typer.Option("--db", help="Database URL: sqlite:///FILE (default, in the working directory) or postgresql+psycopg://..."),
]


def handle_errors(fn):
    """Turn the project's own errors into one sentence on stderr and exit status 2 (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AutotuneError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None

    return wrapper


def emit_json(obj: Any) -> None:
    """Print one JSON object as the last line of standard output."""
    typer.echo(json.dumps(obj, default=str, allow_nan=False))
