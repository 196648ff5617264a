"""Helpers shared by the command modules: their options, error handling, JSON output, the tuning report
(listings are written by autotune.cli.listings)."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from autotune.errors import COMMAND_LINE, AutotuneError, Interrupted, UsageError

DEFAULT_DB = "sqlite:///autotune.db"

DbOption = Annotated[
    str,
    typer.Option("--db", envvar="AUTOTUNE_DB", help="Database URL: sqlite:///FILE (default, in the working directory) or postgresql+psycopg://...; the AUTOTUNE_DB environment variable sets it for every command (a URL with a password stays out of the shell's history and of printed resume commands)"),
]

# Options shared by the tuning commands: one vocabulary for budgets (--trials, --time-budget) everywhere.
AlgorithmOption = Annotated[str, typer.Option("--algorithm", "-a", help="Search algorithm (see `autotune algorithms`), or MODULE:CLASS for a SearchAlgorithm of your own (a module on PYTHONPATH or in the working directory)")]
TrialsOption = Annotated[int | None, typer.Option("--trials", "-n", help="Measurements to make (over all runs of the campaign); default 100 when no budget is given")]
TimeOption = Annotated[float | None, typer.Option("--time-budget", help="Wall-clock seconds for this run")]
SimOption = Annotated[float | None, typer.Option("--simulated-budget", help="Simulated seconds (recorded compile + benchmark time)")]
SeedOption = Annotated[int, typer.Option("--seed", help="Random seed")]
BatchOption = Annotated[int, typer.Option("--batch", help="Candidates asked for and committed together (1 on one device measuring in turn: a model-guided search then sees every result before each pick)")]
CampaignOption = Annotated[str | None, typer.Option("--campaign", help="Campaign name; an existing name resumes it (default: derived from the inputs)")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object as the last line of standard output")]
CostModelOption = Annotated[str | None, typer.Option("--cost-model", help="Guide the algorithm with a cost model (xgb, the default; MODULE:CLASS for a CostModel of your own): it searches the model's predictions and only the most promising candidates are measured; none turns it off")]
TransferOption = Annotated[str | None, typer.Option("--transfer-from", help="Warm-start from other devices' measurements of this task in the database: DEVICE[,DEVICE...] or auto (the most similar)")]
TransferTopOption = Annotated[int, typer.Option("--transfer-top", help="With --transfer-from: the sources' best configurations measured first")]
RayOption = Annotated[str | None, typer.Option("--ray", metavar="ADDRESS", help="Measure on a Ray cluster (needs the ray extra): local (start one on this machine), auto (the cluster this machine belongs to) or HOST:PORT")]
RayActorsOption = Annotated[int | None, typer.Option("--ray-actors", min=1, help="With --ray: measuring actors, one device each (default: one per GPU for CUDA, one per CPU core otherwise)")]
ProgressOption = Annotated[bool, typer.Option("--progress/--no-progress", help="Progress bars with the time left, on standard error (drawn only on a terminal), and the closing summary line a command writes there, where it writes one")]
FreshOption = Annotated[bool, typer.Option("--fresh", help="Start the campaign afresh: an existing campaign of this name is deleted first (its measured trials stay in the database and are reused as look-ups)")]
RetryFailedOption = Annotated[bool, typer.Option("--retry-failed", help="Measure again the configurations whose stored trial crashed (RUNTIME_ERROR) or timed out (TIMEOUT), which another attempt may pass, instead of looking the failure up; the earlier failure stays in the trial's meta (earlier)")]
AlgorithmOptionsOption = Annotated[list[str] | None, typer.Option("--option", metavar="KEY=VALUE", help="An option of the algorithm, or of the cost-model guidance (see `autotune algorithms`); VALUE is read as JSON when it parses (numbers, true/false, lists), else as text. Repeat for several")]
InputShapeOption = Annotated[list[str] | None, typer.Option("--input-shape", metavar="NAME=DIMS", help="Static shape of an ONNX model's input with dynamic axes, e.g. input_ids=1x128 (repeat for several inputs)")]
IncludeReusedOption = Annotated[bool, typer.Option("--include-reused", help="Also count the trials the campaign looked up (measured by another campaign, an import or a deleted campaign), not only its own measurements")]

OldBudgetOption = Annotated[int | None, typer.Option("--budget", hidden=True, help="Deprecated: --trials")]
OldTimeLimitOption = Annotated[float | None, typer.Option("--time-limit", hidden=True, help="Deprecated: --time-budget")]


def with_old_budget_names(trials, time_budget, budget, time_limit):
    """(trials, time_budget), taking the deprecated --budget / --time-limit where the new names are unset."""
    for old, new, value in (("--budget", "--trials", budget), ("--time-limit", "--time-budget", time_limit)):
        if value is not None:
            typer.echo(f"note: {old} is deprecated; use {new}", err=True)
    return (budget if trials is None else trials), (time_limit if time_budget is None else time_budget)


def wants_json(fn, kwargs: dict) -> bool:
    """Whether the command ``fn``, called with ``kwargs``, was asked for JSON on standard output: ``--json``, or
    ``--format json`` of a listing (a command whose ``--format`` defaults to a table)."""
    if kwargs.get("json") is True or kwargs.get("json_out") is True:
        return True
    if kwargs.get("format") != "json":
        return False
    import inspect

    param = inspect.signature(fn).parameters.get("format")
    return param is not None and param.default == "table"


def handle_errors(fn):
    """Turn the project's own errors into one sentence on stderr, naming the inputs by their flags
    (:meth:`AutotuneError.command_line_message`), and exit status 2 (no traceback); a command
    asked for JSON (:func:`wants_json`) also prints the error as a JSON object, the last line of standard
    output, so that a script reading the output gets one either way."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AutotuneError as exc:
            message = exc.command_line_message()  # the library's inputs named by their flags
            typer.echo(f"error: {message}", err=True)
            if wants_json(fn, kwargs):
                emit_json({"error": message, "kind": type(exc).__name__, "exit_code": 2})
            raise typer.Exit(2) from None

    return wrapper


def interrupted_message(stores: bool) -> str:
    """The line a command interrupted outside a campaign prints (``stores``: the command has a database)."""
    return "interrupted; what was stored before stays in the database" if stores else "interrupted; nothing was stored"


def on_interrupt(fn):
    """Ctrl-C (KeyboardInterrupt) in the command ``fn``: one line on standard error, exit status 130. A campaign
    has said how to resume it already (:class:`autotune.errors.Interrupted`); otherwise the line says what
    became of the database: a command without a --db (a ``db`` parameter) stores nothing, and in one with it
    every transaction committed before stays. A command asked for JSON (:func:`wants_json`) also ends standard
    output with the interruption as a JSON object, as it does an error. (Left alone, typer exits 130 saying
    nothing.) While ``fn`` runs, :data:`autotune.errors.COMMAND_LINE` is set: a campaign's resume hint names
    a command line, not a script's call."""
    if getattr(fn, "_on_interrupt", False):
        return fn
    import inspect

    stores = "db" in inspect.signature(fn).parameters

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        token = COMMAND_LINE.set(True)  # what the library tells the user to run next is a command line
        try:
            return fn(*args, **kwargs)
        except (KeyboardInterrupt, typer.Abort) as exc:
            # click turns Ctrl-C at a prompt (campaigns delete's "delete it?") into Abort, "Aborted." and status 1
            if not isinstance(exc, KeyboardInterrupt) and not isinstance(exc.__context__, KeyboardInterrupt):
                raise
            if not isinstance(exc, KeyboardInterrupt):
                typer.echo()  # ends the prompt's line
            if not isinstance(exc, Interrupted):
                typer.echo(interrupted_message(stores), err=True)
            if wants_json(fn, kwargs):
                # a campaign's Interrupted says how to resume it; any other interruption's text (a batch's) is not
                # the user's: the JSON says what stderr did
                said = str(exc) if isinstance(exc, Interrupted) else ""
                emit_json({"error": said or interrupted_message(stores), "kind": "Interrupted", "exit_code": 130})
            raise typer.Exit(130) from None
        finally:
            COMMAND_LINE.reset(token)

    wrapper._on_interrupt = True
    return wrapper


def handle_interrupts(app: typer.Typer) -> None:
    """Give every command of ``app`` and of its groups (their callbacks too) :func:`on_interrupt`."""
    infos = [*app.registered_commands, *app.registered_groups]
    if app.registered_callback is not None:
        infos.append(app.registered_callback)
    for info in infos:
        if callable(info.callback):  # typer's placeholder for "none given" is not
            info.callback = on_interrupt(info.callback)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            handle_interrupts(group.typer_instance)


def writable_output(path, what: str, suffixes: tuple[str, ...] = ()) -> Path:
    """Check, before any work starts, that ``path`` can be written (its folder exists and is writable,
    its suffix is one of ``suffixes`` when given); UsageError naming the problem otherwise."""
    p = Path(path)
    shown = str(p) if len(str(p)) <= 200 else str(p)[:197] + "..."
    try:
        if p.is_dir():  # said before the suffix: a folder is no file whatever its name ends in
            raise UsageError(f"cannot write {what} {shown!r}: it is a folder")
    except OSError as exc:  # e.g. a name too long for the file system
        raise UsageError(f"cannot write {what} {shown!r}: {exc.strerror or exc}") from None
    if suffixes and p.suffix.lower() not in suffixes:
        raise UsageError(f"{what} {shown!r} must end in {', '.join(suffixes)}")
    folder = p.parent if str(p.parent) else Path(".")
    try:
        if not folder.is_dir():
            why = "is a file, not a folder" if folder.exists() else "does not exist"
            raise UsageError(f"cannot write {what} {shown!r}: the folder {str(folder)[:200]!r} {why}")
        writable = os.access(folder, os.W_OK) and (not p.exists() or os.access(p, os.W_OK))
    except OSError as exc:  # e.g. a name too long for the file system
        raise UsageError(f"cannot write {what} {shown!r}: {exc.strerror or exc}") from None
    if not writable:
        raise UsageError(f"cannot write {what} {shown!r}: permission denied")
    return p


def parse_json_arg(text: str, what: str):
    """A JSON command-line value, or UsageError naming the option."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{what} {text[:60]!r} is not valid JSON ({str(exc)[:80]})") from None


def emit_json(obj: Any) -> None:
    """Print one JSON object as the last line of standard output."""
    typer.echo(json.dumps(obj, default=str, allow_nan=False))


def open_db(url: str, existing: bool = False):
    """The database at ``url``; ``existing``: a command that only reads it (or changes what is there), so a
    missing SQLite file is an error rather than a new empty database."""
    from autotune.db import open_database, open_existing_database

    return open_existing_database(url) if existing else open_database(url)


def device_or_known_gpu(database, device: str | None) -> str | None:
    """A --device name for commands that can answer for a device that measured nothing (best,
    devices --similar-to): the stored name it resolves to (autotune.db.names), else, for a GPU of the
    known table (autotune.gpus), the name as given, with a note on standard error; any other unknown
    name is a UsageError naming the closest stored names."""
    from autotune.db.names import resolve, stored_names

    if device is None:
        return None
    try:
        return resolve(database, "device", device)
    except UsageError:
        from autotune.gpus import gpu_properties

        props = gpu_properties(device)
        if "model" not in props:  # not a GPU of the table (a vendor word alone is no answer): say the closest names
            raise
        same = [n for n in stored_names(database, "device")[0] if gpu_properties(n).get("model") == props["model"]]
        also = f" (the database has this GPU as {', '.join(repr(n) for n in same[:3])})" if same else ""
        typer.echo(f"note: device {device!r} is not in the database: answering from the known properties of "
                   f"the {props['model']}{also}", err=True)
        return device


def report(result, as_json: bool, extra: dict | None = None) -> None:
    """Print a campaign's summary: one JSON line with --json, else a short human-readable block."""
    summary = {**result.summary(), **(extra or {})}
    if as_json:
        emit_json(summary)
        return
    from rich.console import Console
    from rich.markup import escape

    c = Console(soft_wrap=True)  # one line per item when piped, however long (rich wraps at 80 columns otherwise)
    # names, keys and configurations are the user's text: escaped, so that '[b3c1]' is not read as a style
    c.print(f"[bold]campaign[/] {escape(result.campaign)} ({result.status}{', resumed' if result.resumed else ''})")
    c.print(escape(f"task {result.task.name} [{result.task.key}] on {result.device.name}"))
    assert result.trials >= 0 and result.reused >= 0, (result.trials, result.reused)
    c.print(f"trials {result.trials} measured, {result.reused} reused (looked up, not measured), {result.errors} errors")
    from autotune.cli.tables import PlainCost, seconds

    def cost(m) -> str:  # as the tables show it: a time with its unit, a minimized function's value alone
        return seconds(PlainCost(m.cost) if getattr(result.task, "kind", None) == "function" else m.cost)

    better = result.best_including_reused
    if result.best is not None:
        c.print(escape(f"best {cost(result.best)}  config {json.dumps(result.best.candidate.payload)}"))
    elif result.trials:
        c.print("no successful measurement")
    elif result.reused:  # every evaluation was a look-up: nothing of its own to call successful or not
        c.print("nothing measured: every trial was reused" + ("" if better is not None else ", none of them successful"))
    else:
        c.print("nothing measured")
    if better is not None:
        label = "best including reused trials" if result.best is not None else "best of the reused trials"
        c.print(escape(f"{label} {cost(better)}  config {json.dumps(better.candidate.payload)}"))
    # simulated time only where something was simulated (a replay, the parallel simulator): a real run has none
    simulated = f"simulated time {result.simulated_s:.1f} s, " if result.simulated_s > 0 else ""
    c.print(f"{simulated}wall time {result.wall_s:.2f} s")
    for k, v in (extra or {}).items():
        if k.endswith("_cost") and isinstance(v, float):  # a time (default_cost), in the unit the best's is shown in
            c.print(escape(f"{k} {seconds(v)}"))
        else:
            c.print(escape(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}"))
