"""The ``autotune`` command line (typer). Each command group lives in its own module
of this package and registers itself through ``register(app, tune_app)``."""

from __future__ import annotations

import importlib
import sys

import typer

from autotune.errors import run_script

app = typer.Typer(
    name="autotune",
    help="Search and autotuning for ML systems: tune kernels, replay recorded spaces, query tuning logs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
tune_app = typer.Typer(help="Run a tuning campaign.", no_args_is_help=True)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"autotune {version('autotune')}")
        except PackageNotFoundError:  # run from a checkout that was not installed
            typer.echo("autotune (not installed: no version recorded)")
        raise typer.Exit()


@app.callback()
def _options(
    show_version: bool = typer.Option(False, "--version", help="Print the installed version and exit.",
                                      callback=_print_version, is_eager=True),
) -> None:
    """Search and autotuning for ML systems: tune kernels, replay recorded spaces, query tuning logs."""


app.add_typer(tune_app, name="tune")

# one module per command group; each defines register(app, tune_app)
COMMAND_MODULES = [
    "autotune.cli.tune_replay",
    "autotune.cli.tune_kernel",
    "autotune.cli.query",
    "autotune.cli.logs",
    "autotune.cli.plot",
    "autotune.cli.models",
    "autotune.cli.parallelize",
    "autotune.cli.graphs",
    "autotune.cli.transfer",
    "autotune.cli.scale",
    "autotune.cli.tune_command",
    "autotune.cli.space",
    "autotune.cli.dashboard",
]

for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app, tune_app)


def main() -> None:
    # Ctrl-C inside a command exits 130 (typer turns KeyboardInterrupt into that status); a campaign first
    # stores what it measured, marks itself "interrupted" and says how to resume (autotune.campaign)
    try:
        run_script(app, flags=True)  # the project's own errors: one line on stderr naming the flags, status 2
    except KeyboardInterrupt:
        typer.echo("interrupted; everything already stored stays in the database (rerun a campaign with the "
                   "same --campaign NAME to resume it)", err=True)
        sys.exit(130)
