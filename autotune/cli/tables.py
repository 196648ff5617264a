"""The default (narrow) tables of the listing commands: a column spec per command says which columns
a table shows and how each value is written (short keys, relative times, costs with a unit, configs as
k=v text), and the layout fits the console's width (100 columns when the output is not a terminal) with
one line per row. `--wide` and the csv and json formats bypass this (autotune.cli.listings.print_table)."""

from __future__ import annotations

import json
import math
import numbers
import os
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.progress import format_bytes, shorten

#: the width default tables are laid out for; a wider terminal gives the flexible columns more room,
#: output that is not a terminal (a pipe, a file) gets this width unless COLUMNS says otherwise
TABLE_WIDTH = 100
KEY_CHARS = 8
_GAP = 2  # spaces between two columns


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or type(v).__name__ in ("NaTType", "NAType")


def text(v) -> str:
    """Any value as plain text ('' for a missing one): floats to 6 significant digits, configurations
    as k=v text."""
    if _missing(v):
        return ""
    if isinstance(v, (dict, list)):
        return config_text(v)
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def short_key(v) -> str:
    """A task, device or candidate key shortened to its first 8 characters (a unique prefix is
    accepted wherever a key is)."""
    return "" if _missing(v) else str(v)[:KEY_CHARS]


def number(v) -> str:
    """A number to 4 significant digits; integers as they are; booleans as yes or nothing."""
    if _missing(v):
        return ""
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return "yes" if v else ""
    if isinstance(v, numbers.Integral):
        return str(int(v))
    try:
        return f"{float(v):.4g}"
    except (TypeError, ValueError):
        return str(v)


_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


class PlainCost(float):
    """A cost that is not a time (the value a minimized function returned): shown without a unit."""


def seconds(v) -> str:
    """A time in seconds to 4 significant digits with a unit: '1.234 ms', '12.5 µs', '3.2 s'; a
    :class:`PlainCost` as the number alone ('2.5')."""
    if _missing(v):
        return ""
    if isinstance(v, PlainCost):
        return f"{float(v):.4g}"
    x = float(v)
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0 s"
    r = float(f"{x:.4g}")  # rounded first, so 0.99996 s is '1 s' and not '1000 ms'
    if abs(r) >= 1e4:
        return f"{r:,.0f} s"
    for scale, unit in _UNITS:
        if abs(r) >= scale or unit == "ns":
            return f"{r / scale:.4g} {unit}"
    return f"{r:.4g} s"


def size_bytes(v) -> str:
    """A size in bytes, binary units: '12.3 KiB'; 0 as 'none'."""
    if _missing(v):
        return ""
    return "none" if float(v) == 0 else format_bytes(v)


def _as_datetime(v):
    from datetime import UTC, datetime

    if isinstance(v, str):
        try:
            v = datetime.fromisoformat(v)
        except ValueError:
            return None
    if hasattr(v, "to_pydatetime"):
        v = v.to_pydatetime()
    if not isinstance(v, datetime):
        return None
    return v.astimezone(UTC).replace(tzinfo=None) if v.tzinfo else v  # the database stores naive UTC


def relative_time(v, now=None) -> str:
    """When, relative to now: 'just now', '3 min ago', '2 h ago', 'yesterday', '4 days ago', and the ISO
    date beyond a week. Database times are naive UTC."""
    from datetime import UTC, datetime

    if _missing(v):
        return ""
    t = _as_datetime(v)
    if t is None:
        return str(v)
    now = now or datetime.now(UTC).replace(tzinfo=None)
    s = (now - t).total_seconds()
    if s < 60:
        return "just now"
    if s < 3600:
        return f"{int(s // 60)} min ago"
    if s < 86400:
        return f"{int(s // 3600)} h ago"
    if s < 2 * 86400:
        return "yesterday"
    if s < 7 * 86400:
        return f"{int(s // 86400)} days ago"
    return t.date().isoformat()


def _compact(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, str):
        return v
    return json.dumps(v, separators=(",", ":"), default=str)


def config_text(v) -> str:
    """A configuration as compact k=v text: 'block=64 unroll=2 vec=true'; other JSON as compact JSON."""
    if _missing(v):
        return ""
    if isinstance(v, dict):
        return " ".join(f"{k}={_compact(x)}" for k, x in v.items())
    return _compact(v)


def task_labels(names: list, keys: list, width: int = 20) -> list[str | None]:
    """The task of each row as a table names it: its name, and after it its short key where another task
    among the rows has the same name (``width`` cells at most, the name cut so that the key stays whole);
    every label None when the rows are of one task, so a column of them is left out (:class:`Col`
    ``optional``)."""
    if len(set(keys)) <= 1:
        return [None] * len(keys)
    tasks_named: dict[str, set] = {}
    for name, key in zip(names, keys):
        tasks_named.setdefault(name, set()).add(key)
    room = max(1, width - 1 - KEY_CHARS)
    return [f"{shorten(str(name), room)} {short_key(key)}" if len(tasks_named[name]) > 1 else name
            for name, key in zip(names, keys)]


_VENDOR = ("NVIDIA ", "GeForce ")


def device_text(v) -> str:
    """A device name without the vendor words a table has no room for: 'NVIDIA GeForce RTX 3090' is
    'RTX 3090' (`--wide` and the devices table show the full name)."""
    if _missing(v):
        return ""
    name = str(v)
    for word in _VENDOR:
        if name.startswith(word) and len(name) > len(word):
            name = name[len(word):]
    return name.replace("(R)", "").replace("(TM)", "")


def _shared_ends(values: list[str]) -> dict[str, tuple[int, int]]:
    """Each value's longest start and longest end that another of ``values`` shares (characters)."""
    def longest(vals: list[str]) -> dict[str, int]:
        out = dict.fromkeys(vals, 0)
        ordered = sorted(vals)
        for a, b in zip(ordered, ordered[1:]):  # the longest shared start is with a neighbour in sorted order
            n = len(os.path.commonprefix([a, b]))
            out[a], out[b] = max(out[a], n), max(out[b], n)
        return out

    starts = longest(values)
    ends = {v[::-1]: n for v, n in longest([v[::-1] for v in values]).items()}
    return {v: (starts[v], ends[v]) for v in values}


_WINDOWED = 500  # distinct values beyond which a value is not looked for a stretch no other has (time)


def distinct_cuts(values: list[str], width: int) -> dict[str, str]:
    """Each of ``values`` in at most ``width`` cells, cut so that the rows stay told apart and the text
    shown still names its value: one that fits stays whole; a longer one keeps its start and its end with
    '…' between, split to show as much as fits of what no other value shares at its start or its end
    ('replay-RTX_30…', '…-random-seed0'); where no such split fits, a stretch of its middle that no other
    value has, between two '…' ('…gemm-RTX_2…'); else its start and end split evenly. Where a name is
    taken (autotune.db.names), '…' stands for any text, so a cut name that one stored name matches
    resolves to it. Values are told apart from the other values given, not from every stored name."""
    from rich.cells import cell_len

    distinct = list(dict.fromkeys(values))
    long = [v for v in distinct if cell_len(v) > width]
    out = {v: v for v in distinct if v not in long}
    if not long or width < 3:
        return {**out, **{v: shorten(v, width, "middle") for v in long}}
    ends = _shared_ends(distinct)
    room = width - 1
    for v in long:
        start, end = ends[v]
        # the split that shows most of what no other value shares, the evenest of those; a start or an end of
        # 1 to 3 characters says little: none instead
        splits = sorted((a for a in range(room + 1) if not (0 < a < 4 or 0 < room - a < 4)),
                        key=lambda a: (-max(0, a - start) - max(0, room - a - end), abs(a - (room - a)), -a))
        head = next((a for a in splits if a > start or room - a > end), None)
        cut = None
        if head is not None:
            cut = v[:head] + "…" + (v[len(v) - (room - head):] if room - head else "")
        elif len(distinct) <= _WINDOWED:
            span, others = width - 2, [o for o in distinct if o != v]
            # stretches ending just after where v first parts from the value sharing its longest start
            for at in sorted(range(len(v) - span + 1), key=lambda i: abs(i + span - 1 - start)):
                piece = v[at:at + span]
                if not any(piece in o for o in others):
                    cut = "…" + piece + "…"
                    break
        if cut is None or cell_len(cut) > width:
            cut = shorten(v, width, "middle")
        out[v] = cut
    return out


@dataclass(frozen=True)
class Col:
    """How a default table shows one column of a DataFrame: the column, its header, how a value is
    written, and its room: at most ``width`` cells (cut with '…'), or ``flex``: what the other
    columns leave of the console's width. ``cut`` is where a long value loses text: at the ``end``,
    the ``start``, the ``middle``, or where it keeps the rows ``distinct`` (:func:`distinct_cuts`:
    campaign names, whose start and end two campaigns often share, and which a cut text still names)."""

    name: str
    header: str | None = None
    render: Callable[[Any], str] = text
    width: int | None = None
    flex: bool = False
    right: bool = False
    cut: str = "end"
    optional: bool = False  # left out when no row has a value (an error column of successful trials)
    least: int | None = None  # cells kept when the table must be narrowed (default: 6, 8 if flex)
    spare: int = 0  # > 0: left out when the table cannot fit the console otherwise, the highest first


def table_console(width: int | None = None):
    """A console for tables: ``width`` when given; else the terminal's width, or TABLE_WIDTH when the
    output is not a terminal and COLUMNS is unset."""
    from rich.console import Console

    if width is not None:
        return Console(width=width)
    console = Console()
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console = Console(width=TABLE_WIDTH)
    return console


def _fill(naturals: list[int], room: int) -> list[int]:
    """Widths for the flexible columns: each its natural width when they fit in ``room``, else the
    room shared out, no column given more than it needs (water-filling)."""
    out = [0] * len(naturals)
    left, pending = room, sorted(range(len(naturals)), key=lambda i: naturals[i])
    while pending:
        share = left // len(pending)
        i = pending.pop(0)
        out[i] = min(naturals[i], share)
        left -= out[i]
    return out


def _one_line(s: str) -> str:
    return " ".join(s.split()) if ("\n" in s or "\r" in s or "\t" in s) else s


def _squeeze(widths: list[int], cols: list[Col], headers: list[str], cells: list[list[str]], room: int,
             min_flex: int = 12) -> None:
    """Narrow the text columns, the widest first, until the columns fit in ``room`` cells: numbers
    (right-aligned columns) and headers are never cut; a text column keeps at least its ``least`` cells
    (6, 8 for a flexible one) or its longest value when shorter. Where that is still too wide, a flexible
    column whose ``least`` asks for more than ``min_flex`` cells gives up the difference."""
    from rich.cells import cell_len

    longest = [max([0] + [cell_len(v) for v in col]) for col in cells]
    excess = sum(widths) - room
    for relax in (False, True):
        floors = []
        for c, h, n, w in zip(cols, headers, longest, widths):
            least = c.least if c.least is not None else 8 if c.flex else 6
            if relax and c.flex:
                least = min(least, min_flex)
            floors.append(w if c.right else max(cell_len(h), min(n, least)))
        while excess > 0:
            slack = [(widths[i] - floors[i], widths[i], i) for i in range(len(widths)) if widths[i] > floors[i]]
            if not slack:
                break
            i = max(slack, key=lambda t: (t[1], t[0]))[2]
            widths[i] -= 1
            excess -= 1


def narrow_lines(df, columns: list[Col], title: str = "", width: int | None = None,
                 min_flex: int = 12) -> tuple[list[str], int]:
    """The lines of ``df``'s table laid out by ``columns`` (those absent from ``df`` skipped) for a
    console ``width`` cells wide: [title, folded over as many lines as it needs,] header, rule, one line per row. Fixed columns are cut at
    their width, the flexible columns share what is left (at least ``min_flex`` cells each, or their
    ``least`` where that is more), and if
    that is still too wide the widest text columns are narrowed; where even that is too wide, the ``spare``
    columns are left out, the highest first (--wide shows them). Returns (lines, index of the header)."""
    width = width or TABLE_WIDTH
    cols = [c for c in columns if c.name in df.columns]
    while True:
        lines, head, total = _lay_out(df, cols, title, width, min_flex)
        spare = [c for c in cols if c.spare > 0]
        if total <= width or not spare:
            return lines, head
        cols = [c for c in cols if c is not max(spare, key=lambda c: c.spare)]


def _lay_out(df, cols: list[Col], title: str, width: int, min_flex: int) -> tuple[list[str], int, int]:
    """narrow_lines' table with these columns: (lines, index of the header, width of the table)."""
    from rich.cells import cell_len

    headers = [c.header or c.name for c in cols]
    cells = [[_one_line(c.render(v)) for v in df[c.name].tolist()] for c in cols]
    keep = [i for i, c in enumerate(cols) if not (c.optional and not any(cells[i]))]
    cols, headers, cells = [cols[i] for i in keep], [headers[i] for i in keep], [cells[i] for i in keep]
    widths = []
    for c, h, col in zip(cols, headers, cells):
        natural = max([cell_len(h)] + [cell_len(v) for v in col])
        widths.append(natural if c.width is None or c.flex else min(natural, max(c.width, cell_len(h))))
    flex = [i for i, c in enumerate(cols) if c.flex]
    if flex:
        fixed = sum(w for i, w in enumerate(widths) if i not in flex)
        room = max(width - fixed - _GAP * (len(cols) - 1), min_flex * len(flex))
        for i, w in zip(flex, _fill([widths[i] for i in flex], room)):
            least = max(min_flex, cols[i].least or 0)  # a column's own least, where it asks for more
            widths[i] = max(w, min(widths[i], least), cell_len(headers[i]) if w else 0)
    _squeeze(widths, cols, headers, cells, width - _GAP * (len(cols) - 1), min_flex)

    distinct = {i: distinct_cuts(cells[i], widths[i]) for i, c in enumerate(cols) if c.cut == "distinct"}

    def line(values: list[str], cut: bool = True) -> str:
        out = []
        for i, (v, w, c) in enumerate(zip(values, widths, cols)):
            v = distinct[i][v] if cut and i in distinct else shorten(v, w, c.cut if cut else "end")
            pad = " " * (w - cell_len(v))
            out.append(pad + v if c.right else v + pad)
        return (" " * _GAP).join(out).rstrip()

    total = sum(widths) + _GAP * max(0, len(cols) - 1)
    # the title says what the table is of (a task, a device): folded over lines, never cut
    lines = [t.center(total).rstrip() for t in textwrap.wrap(_one_line(title), width)] if title else []
    head = len(lines)
    lines += [line(headers, cut=False), "─" * total]
    lines += [line(list(row)) for row in zip(*cells)] if cells else []
    return lines, head, total
