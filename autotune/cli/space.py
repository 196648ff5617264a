"""`autotune space check`: load a space file and describe it (size, knobs, constraints)."""

from __future__ import annotations

from typing import Annotated

import typer

from autotune.cli.common import JsonOption, emit_json, handle_errors


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    space_app = typer.Typer(help="Space files: knobs, constraints and objective of one's own code.",
                            no_args_is_help=True)
    app.add_typer(space_app, name="space")

    @space_app.command("check")
    @handle_errors
    def check_cmd(
        file: Annotated[str, typer.Argument(help="Space file (YAML or JSON)")],
        json: JsonOption = False,
    ) -> None:
        """Check a space file: print its number of valid points, knobs and constraints (exit status 2 if bad)."""
        from autotune.search_spaces.space_file import load_space_file

        space, objective = load_space_file(file)
        size = space.size()
        combinations = 1
        for values in space.values:
            combinations *= len(values)
        info = {
            "name": space.task.name, "file": file, "size": size, "combinations": combinations,
            "knobs": dict(zip(space.names, space.values)),
            "constraints": [getattr(c, "text", str(c)) for c in space.constraints],
            "default": space.initial().payload if space.initial() is not None else None,
            "objective": objective.to_json() if objective is not None else None,
        }
        if json:
            emit_json(info)
            return
        shown = f"{size:,}" if size is not None else f"more than {space.enumerate_limit:,}"
        typer.echo(f"space {info['name']}: {shown} valid points of {combinations:,} combinations")
        typer.echo("knobs:")
        for name, values in info["knobs"].items():
            listed = ", ".join(map(str, values[:12])) + (f", ... ({len(values)} values)" if len(values) > 12 else "")
            typer.echo(f"  {name}: {listed}")
        typer.echo("constraints:" + ("" if info["constraints"] else " none"))
        for text in info["constraints"]:
            typer.echo(f"  {text}")
        if info["default"] is not None:
            typer.echo(f"default: {info['default']}")
        typer.echo(f"objective: {objective.describe() if objective is not None else 'not given (tune command: wall time)'}")
