"""Progress of long work on standard error: a bar per phase and a one-line summary at the end.

A :class:`Progress` belongs to one piece of work (a command, a driver call). Its bars show a
description, completed/total, the elapsed time and, when the total is known, the time left;
its summary is one line naming the work and what it did ("optimize-graph: 1,123 graphs
evaluated in 58.1 s, ...").

When things are shown:

* ``enabled`` is the user's choice (``--progress/--no-progress``). Disabled, nothing at all is
  written: no bar, no summary.
* The bars are drawn only when standard error is a terminal (or a notebook), so logs and
  pipes get no control characters; ``force`` draws them anyway (tests, into a captured console).
* The summary line is written whenever progress is enabled, terminal or not: it is what a
  log of a long run wants to keep. Library code states it when its work is done; a command that
  prints a text report after that defers it (``defer_summary``) and writes it last, so the
  summary ends the command's output, while with ``--json`` it comes before the JSON line, which
  stays the last line even of both streams merged.

Standard output is never written, so ``--json`` stays one JSON line there.

Each phase is its own live display, started and stopped by ``with progress.phase(...)``, so
another live display (the campaign's bar, run between two phases on :attr:`Progress.console`)
never overlaps one of ours. Library code takes a ``Progress`` (or None) and calls ``phase``,
``advance`` and ``update``; a disabled one costs almost nothing.

This module sits in the core layer: it imports rich and nothing of autotune's, so spaces,
runners and the database can report progress without depending on anything above them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as _RichProgress
from rich.progress import Task as _Task
from rich.text import Text

__all__ = ["NameColumn", "Phase", "Progress", "cut_matches", "make_progress", "shorten", "stderr_is_terminal"]


def stderr_is_terminal(console: Console | None = None) -> bool:
    """Whether bars can be drawn on ``console`` (default: standard error): a terminal or a notebook."""
    c = console or Console(stderr=True)
    return bool(c.is_terminal or c.is_jupyter)


def shorten(s: str, width: int, cut: str = "end") -> str:
    """``s`` in at most ``width`` terminal cells, with '…' where text was cut."""
    from rich.cells import cell_len, set_cell_size

    if cell_len(s) <= width:
        return s
    if width <= 1:
        return "…"[:width]
    if cut == "start":
        return "…" + set_cell_size(s[::-1], width - 1)[::-1]
    if cut == "middle" and width >= 5:
        head = width // 2
        return set_cell_size(s, head) + "…" + set_cell_size(s[::-1], width - 1 - head)[::-1]
    return set_cell_size(s, width - 1) + "…"


def cut_matches(cut: str, name: str) -> bool:
    """Whether ``cut``, text that a table showed cut ('replay-RTX…xgb-seed0', '…gemm-RTX_2…'), could be
    ``name``: each '…' stands for any text (none included), the text before the first '…' is the name's
    start and the text after the last its end."""
    parts = cut.split("…")
    if len(parts) == 1:
        return cut == name
    head, tail = parts[0], parts[-1]
    if not name.startswith(head) or not name.endswith(tail) or len(name) < len(head) + len(tail):
        return False
    at, end = len(head), len(name) - len(tail)
    for part in parts[1:-1]:
        found = name.find(part, at, end)
        if found < 0:
            return False
        at = found + len(part)
    return True


class NameColumn(ProgressColumn):
    """The task's description in bold, as plain text (a name such as 'c[x]' is not read as markup), at most
    ``cells`` wide and at most what the console leaves beside the other columns (``others`` cells): a longer
    one keeps its end ('…-evolutionary+xgb-seed0'), where a campaign's name says its algorithm and seed, so
    the bar stays on one line of a narrow terminal."""

    def __init__(self, console: Console, others: int, cells: int = 40):
        super().__init__()
        self.console, self.others, self.cells = console, others, cells

    def render(self, task: _Task) -> Text:
        cells = max(8, min(self.cells, self.console.width - self.others))
        return Text(shorten(str(task.description), cells, "start"), style="bold", no_wrap=True)


class _TimeLeft(TimeRemainingColumn):
    """'left H:MM:SS' (rich's estimate) when the total is known, nothing when it is not."""

    def render(self, task: _Task) -> Text:
        if task.total is None:
            return Text("")
        return Text("left ") + super().render(task)


@dataclass
class Phase:
    """One phase of the work as it went: what the bar said, its total (None: unknown) and how far it got."""

    description: str
    total: float | None
    completed: float = 0


class Progress:
    """Progress bars and the closing summary of one piece of work named ``name`` (see the module docstring).

    ``console``: where to write (default: standard error, looked up when writing, so a test runner that
    swaps ``sys.stderr`` captures it). ``phases`` keeps every phase with its total and final count,
    whether or not it was drawn, so callers and tests can check what the bars reported."""

    def __init__(self, name: str, *, enabled: bool = True, force: bool = False, console: Console | None = None,
                 defer_summary: bool = False):
        self.name = name
        self.defer_summary = defer_summary
        self.enabled = bool(enabled)
        self.console = console or Console(stderr=True)
        #: whether bars are drawn (pass it to a Campaign as its ``progress``, with :attr:`console`)
        self.shown = self.enabled and (bool(force) or stderr_is_terminal(self.console))
        self.phases: list[Phase] = []
        self.summary_line: str | None = None
        self._summary_written = False
        self._t0 = time.perf_counter()
        self._bar: _RichProgress | None = None
        self._task: TaskID | None = None

    @property
    def elapsed_s(self) -> float:
        """Seconds since this Progress was made (the start of the work)."""
        return time.perf_counter() - self._t0

    @contextmanager
    def phase(self, description: str, total: float | None = None) -> Iterator[Progress]:
        """A bar for one phase of the work, drawn while the block runs and left on screen after it;
        ``total`` is the amount of work (None when it is not known beforehand: the bar counts up)."""
        ph = Phase(description, total)
        self.phases.append(ph)
        if not self.shown:
            yield self
            return
        bar = _RichProgress(
            NameColumn(self.console, others=50), BarColumn(bar_width=None), MofNCompleteColumn(), TextColumn("elapsed"),
            TimeElapsedColumn(), _TimeLeft(), console=self.console, transient=False,
        )
        self._bar, self._task = bar, bar.add_task(description, total=total)
        try:
            with bar:
                yield self
        finally:
            self._bar = self._task = None

    def advance(self, n: float = 1) -> None:
        """Count ``n`` more units of the current phase as done."""
        if self.phases:
            self.update(completed=self.phases[-1].completed + n)

    def update(self, completed: float | None = None, total: float | None = None,
               description: str | None = None) -> None:
        """Set the current phase's count, total (once it is known) or description."""
        if not self.phases:
            return
        ph = self.phases[-1]
        if completed is not None:
            ph.completed = completed
        if total is not None:
            ph.total = total
        if description is not None:
            ph.description = description
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=ph.completed, total=ph.total, description=ph.description)

    def summary(self, text: str) -> None:
        """State the closing line, ``NAME: TEXT``, and write it (unless ``defer_summary``: then
        :meth:`write_summary` does)."""
        self.summary_line = f"{self.name}: {text}"
        self._summary_written = False
        if not self.defer_summary:
            self.write_summary()

    def write_summary(self) -> None:
        """Write the closing line to the console, once, when progress is enabled and a line was stated."""
        if self.enabled and self.summary_line is not None and not self._summary_written:
            self.console.print(self.summary_line, markup=False, highlight=False, soft_wrap=True)
            self._summary_written = True


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units, three significant digits: '512 B', '138 KiB', '3.64 TiB'."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            break
        value /= 1024
    if unit == "B":
        return f"{value:.0f} B"
    return f"{value:.3g} {unit}" if value < 1000 else f"{value:.0f} {unit}"


def make_progress(progress: bool | Progress | None, name: str) -> Progress:
    """A :class:`Progress` from a driver's ``progress`` argument: a Progress is used as it is, a bool
    enables or disables one named ``name``, and None enables it when standard error is a terminal."""
    if isinstance(progress, Progress):
        return progress
    if progress is None:
        progress = stderr_is_terminal()
    return Progress(name, enabled=bool(progress))
