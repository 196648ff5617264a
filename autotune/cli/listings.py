"""How the listing commands write a DataFrame: a table fitted to the terminal (the commands' default
columns, autotune.cli.tables), every column in full (--wide), CSV or JSON, whole or page by page."""

from __future__ import annotations

import json
import math
import os
from typing import Annotated

import typer

from autotune.cli.tables import Col

def _cell(v) -> str:
    """A compact rendering of one value: dicts as k=v pairs, floats to 6 significant digits."""
    if isinstance(v, dict):
        return " ".join(f"{k}={_cell(x)}" for k, x in v.items())
    if isinstance(v, list):
        return json.dumps(v)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return f"{v:.6g}" if isinstance(v, float) else str(v)


WideOption = Annotated[bool, typer.Option("--wide", help="Every column in full (the default table shows the main columns, shortened to fit 100 columns)")]

TABLE_FORMATS = ("table", "csv", "json")


def check_format(fmt: str) -> None:
    """A command's first step: an unknown --format is one line, before a model loads or a query runs."""
    from autotune.errors import check_choice

    check_choice("format", fmt, TABLE_FORMATS)


def _lower(value: str) -> str:
    return value.lower()


FormatOption = Annotated[str, typer.Option("--format", "-f", callback=_lower, help="table, csv or json (any case)")]


def print_table(df, title: str = "", max_width: int = 60, columns: list[Col] | None = None, console=None,
                wide: bool = False) -> None:
    """Print a DataFrame as a rich table. With ``columns`` (a command's default layout) and not ``wide``:
    only those columns, each rendered by its spec, one line per row, fitting the console (100 columns
    when the output is not a terminal). Else every column, long cells shortened to ``max_width`` and
    folded to the terminal's width; ``wide`` (the commands' --wide) shortens no cell (a line break in one, an
    error's traceback, is a space), and folds nothing when the output is not a terminal (and COLUMNS is unset):
    each row is one line, as long as it needs."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    if columns is not None and not wide:
        from autotune.cli.tables import narrow_lines, table_console

        console = console or table_console()
        lines, head = narrow_lines(df, columns, title=title, width=console.width)
        for n, line in enumerate(lines[:head + 1]):
            console.print(Text(line, style="bold" if n == head else ""), soft_wrap=True)
        console.print(Text("\n".join(lines[head + 1:])), soft_wrap=True)
        return
    if wide:
        max_width = None  # every cell in full
    table = Table(title=title or None, show_lines=False)
    for col in df.columns:
        table.add_column(str(col), overflow="fold")
    for row in df.itertuples(index=False):
        cells = []
        for v in row:
            text = _cell(v)
            if wide and any(ch in text for ch in "\n\r\t"):  # an error's traceback: its row stays one line
                text = " ".join(text.split())
            text = text if max_width is None or len(text) <= max_width else text[: max_width - 1] + "…"
            cells.append(Text(text))  # plain text: brackets in a value ('autotune[cuda]') are not rich markup
        table.add_row(*cells)
    if console is None:
        console = Console()
        if wide and not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
            console = Console(width=100_000)
    console.print(table)


def _csv_ready(df):
    """A copy of ``df`` whose dict and list cells are JSON text, as CSV holds them."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object and out[col].map(lambda v: isinstance(v, (dict, list))).any():
            out[col] = out[col].map(lambda v: json.dumps(v, sort_keys=True))
    return out


def _json_value(v):
    """A cell json cannot write itself: a timestamp as ISO 8601 text (to the microsecond), a numpy scalar as its
    Python value."""
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if hasattr(v, "item"):
        return v.item()
    return str(v)


def _json_rows(df) -> str:
    """``df`` as a JSON array of objects, raw: floats to the last digit (pandas' to_json rounds them to 10
    decimal places, which turns 1.0799999814e-05 into 1.08e-05 and makes distinct costs tie), missing cells
    null."""
    rows = df.astype(object).where(df.notna(), None).to_dict(orient="records")
    return json.dumps(rows, default=_json_value, separators=(",", ":"))


def write_frame(df, fmt: str, max_width: int = 300, columns: list[Col] | None = None, title: str = "",
                wide: bool = False) -> None:
    """Write a DataFrame to stdout as table, csv or json (one object per row); a table is laid out by
    ``columns`` when given (a command's default, narrow table), else, or when ``wide``, shows every
    column (print_table). CSV and JSON always hold every column, raw."""
    if fmt == "table":
        print_table(df, title=title, max_width=max_width, columns=columns, wide=wide)
    elif fmt == "csv":
        typer.echo(_csv_ready(df).to_csv(index=False), nl=False)
    elif fmt == "json":
        typer.echo(_json_rows(df))
    else:
        raise typer.BadParameter(f"unknown format {fmt!r}; valid: table, csv, json")


def write_pages(frames, fmt: str, max_width: int = 300, columns: list[Col] | None = None, wide: bool = False) -> int:
    """Write DataFrames one after another as one table, CSV (one header) or JSON array; returns the rows.
    A table is laid out once, over every page, so its columns and widths do not change part-way."""
    if fmt == "table":
        import pandas as pd

        frames = list(frames)
        df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0] if frames else pd.DataFrame()
        write_frame(df, fmt, max_width, columns=columns, wide=wide)
        return len(df)
    rows = 0
    if fmt == "json":
        typer.echo("[", nl=False)
    try:
        for n, df in enumerate(frames):
            if fmt == "csv" and n > 0:
                typer.echo(_csv_ready(df).to_csv(index=False, header=False), nl=False)
            elif fmt == "json":
                if len(df):
                    typer.echo(("," if rows else "") + _json_rows(df)[1:-1], nl=False)
            else:
                write_frame(df, fmt, max_width, columns=columns, wide=wide)
            rows += len(df)
    except BaseException:  # an error or Ctrl-C part-way: the array's line ends, so the error's JSON is a line of its own
        if fmt == "json":
            typer.echo()
        raise
    if fmt == "json":
        typer.echo("]")
    return rows
