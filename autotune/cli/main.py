"""The ``autotune`` command line (typer). Each command group lives in its own module
of this package and registers itself through ``register(app, tune_app)``."""

from __future__ import annotations

import importlib
import inspect
import signal
import sys

import typer

from autotune.cli.common import handle_interrupts, interrupted_message
from autotune.errors import run_script
from autotune.interrupts import terminate_as_interrupt

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



def _reflow_help(group: typer.Typer) -> None:
    """Give each command of ``group`` (and of its subgroups) its docstring with each paragraph's lines joined,
    and its first paragraph as one line for the command lists of ``--help``. The docstrings are wrapped for
    the source, and rich keeps their line breaks (typer does not join them in every version), which cut
    sentences mid-line at any terminal width; joined, rich wraps them to the terminal. A paragraph that
    starts with ``\\b`` keeps its lines."""
    for info in group.registered_commands:
        doc = info.help or (info.callback.__doc__ if info.callback else None)
        if not doc:
            continue
        paragraphs = inspect.cleandoc(doc).split("\n\n")
        info.help = "\n\n".join(p if p.startswith("\b") else " ".join(p.split()) for p in paragraphs)
        if info.short_help is None:
            info.short_help = " ".join(paragraphs[0].split())
    for sub in group.registered_groups:
        _reflow_help(sub.typer_instance)


try:
    for _name in COMMAND_MODULES:
        importlib.import_module(_name).register(app, tune_app)
    _reflow_help(app)
    # Ctrl-C in a command: one line on stderr (whether anything was stored), status 130; a campaign first stores
    # what it measured, marks itself "interrupted" and says how to resume (autotune.campaign), and that line is
    # the only one. Typer alone would exit 130 saying nothing.
    handle_interrupts(app)
except KeyboardInterrupt:  # while the command line is still being put together
    print(interrupted_message(stores=False), file=sys.stderr)
    sys.exit(130)


def main() -> None:
    # SIGTERM (kill PID, timeout, docker stop, a batch scheduler or Kubernetes ending the job) is Ctrl-C: a
    # campaign stores what it measured, gives back its claim and reservations and says how to resume, rather
    # than die with its batch in flight and its claim held until its heartbeat ages
    signal.signal(signal.SIGTERM, terminate_as_interrupt)
    try:
        run_script(app, flags=True)  # the project's own errors: one line on stderr naming the flags, status 2
    except KeyboardInterrupt:  # outside a command (parsing the command line): nothing was stored
        typer.echo(interrupted_message(stores=False), err=True)
        sys.exit(130)
