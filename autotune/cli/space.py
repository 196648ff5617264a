"""`autotune space check`: load a space file and describe it (size, knobs, constraints).

The valid points are counted by walking the combinations of knob values (with a progress bar on a
terminal when that takes a while). A space whose walk would try more than the space's check limit
(a tight constraint over knobs of huge ranges) is not counted: its size is estimated from random
combinations, and it is refused when none of them is valid, since a search could not find a valid
point either.
"""

from __future__ import annotations

import contextlib
import math
from typing import Annotated

import typer

from autotune.cli.common import JsonOption, ProgressOption, emit_json, handle_errors
from autotune.errors import UsageError

SAMPLES = 100_000  # random combinations that estimate the size of a space too large to count
SHOWN_VALUES = 12  # a knob of more values is summarised: its first values, their count, min, max, step


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def knob_summary(values: list) -> list | dict:
    """A knob's values as `space check` shows them: the list itself when it has at most SHOWN_VALUES, else
    ``{"count", "first"}`` (the first SHOWN_VALUES), with ``"min"`` and ``"max"`` for numbers and ``"step"``
    when they are evenly spaced (a range)."""
    if len(values) <= SHOWN_VALUES:
        return list(values)
    out: dict = {"count": len(values), "first": list(values[:SHOWN_VALUES])}
    if all(_is_number(v) for v in values):
        out["min"], out["max"] = min(values), max(values)
        step = values[1] - values[0]
        exact = all(isinstance(v, int) for v in values)
        if step != 0 and all((b - a == step) if exact else math.isclose(b - a, step, rel_tol=1e-9, abs_tol=1e-12)
                             for a, b in zip(values, values[1:])):
            out["step"] = step if exact else float(f"{step:.12g}")  # 0.1, not 0.09999999999999998
    return out


def _knob_line(values: list | dict) -> str:
    """A knob's values (or their summary, :func:`knob_summary`) as one line of text."""
    if isinstance(values, list):
        return ", ".join(map(str, values))
    facts = [f"{values['count']:,} values"] + [f"{k} {values[k]}" for k in ("min", "max", "step") if k in values]
    return ", ".join(map(str, values["first"])) + f", ... ({', '.join(facts)})"


def _count(space, progress: bool) -> int | None:
    """The space's valid points (None: too large), with a bar once the walk has taken a while."""
    from autotune.progress import Progress

    bar = Progress("space check", enabled=progress)
    with contextlib.ExitStack() as stack:
        def report(fraction: float) -> None:  # per cent of the walk, first told after some 65,000 values
            if not bar.phases:
                stack.enter_context(bar.phase("valid points %", total=100))
            bar.update(completed=round(100 * fraction, 1))

        size = space.count(report)
        if bar.phases:
            bar.update(completed=100)
    return size


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    space_app = typer.Typer(help="Space files: knobs, constraints and objective of one's own code.",
                            no_args_is_help=True)
    app.add_typer(space_app, name="space")

    @space_app.command("check")
    @handle_errors
    def check_cmd(
        file: Annotated[str, typer.Argument(help="Space file (YAML or JSON)")],
        json: JsonOption = False,
        progress: ProgressOption = True,
        all_values: Annotated[bool, typer.Option("--all-values", help=f"Every value of every knob; by default a knob of more than {SHOWN_VALUES} values is summarised: its first {SHOWN_VALUES}, their count, and for numbers min, max and the step of a range")] = False,
    ) -> None:
        """Check a space file: print its number of valid points, knobs and constraints (exit status 2 if bad)."""
        from autotune.search_spaces.space_file import load_space_file

        space, objective = load_space_file(file)
        size = _count(space, progress)
        combinations = space.combinations()
        estimate = None
        if size is None and space.too_large_by == "checks":
            found = space.estimate_valid(SAMPLES)
            if found == 0:
                raise UsageError(
                    f"space {space.task.name!r} has {combinations:,} combinations of knob values, too many to check "
                    f"each against the constraints (the limit is {space.check_limit:,} knob values tried), and none "
                    f"of {SAMPLES:,} random combinations meets them, so a search could not find a valid point "
                    "either; narrow the knobs' ranges or loosen the constraints")
            estimate = round(combinations * found / SAMPLES)
        info = {
            "name": space.task.name, "file": file, "size": size, "combinations": combinations,
            "knobs": {name: list(values) if all_values else knob_summary(values)
                      for name, values in zip(space.names, space.values)},
            "constraints": [getattr(c, "text", str(c)) for c in space.constraints],
            "default": space.initial().payload if space.initial() is not None else None,
            "objective": objective.to_json() if objective is not None else None,
        }
        if estimate is not None:
            info["estimated_size"] = estimate
        if json:
            emit_json(info)
            return
        if size is not None:
            typer.echo(f"space {info['name']}: {size:,} valid points of {combinations:,} combinations")
        elif estimate is not None:
            typer.echo(f"space {info['name']}: about {estimate:,} valid points of {combinations:,} combinations "
                       f"(too many combinations to check each: estimated from {SAMPLES:,} random ones)")
        else:
            typer.echo(f"space {info['name']}: more than {space.enumerate_limit:,} valid points of "
                       f"{combinations:,} combinations")
        typer.echo("knobs:")
        for name, values in info["knobs"].items():
            typer.echo(f"  {name}: {_knob_line(values)}")
        typer.echo("constraints:" + ("" if info["constraints"] else " none"))
        for text in info["constraints"]:
            typer.echo(f"  {text}")
        if info["default"] is not None:
            typer.echo(f"default: {info['default']}")
        typer.echo(f"objective: {objective.describe() if objective is not None else 'not given (tune command: wall time)'}")
