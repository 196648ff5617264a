"""Moving tuning logs: import-kt, export, import, and schema upgrades."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Annotated

import typer

from autotune.cli.common import DEFAULT_DB, DbOption, ProgressOption, handle_errors, open_db, writable_output
from autotune.errors import UsageError
from autotune.progress import Progress


def _remove_if_empty(path: str) -> None:
    """Remove the SQLite file ``path`` (with its -wal and -shm files) that this command created, when it holds
    no trial, campaign, task or device: a failed import leaves no database behind."""
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(path, timeout=1)) as conn:
            rows = sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                       for t in ("trials", "campaigns", "tasks", "devices"))
    except sqlite3.Error:
        return
    if rows == 0:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.unlink(path + suffix)


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    @app.command("import-kt")
    @handle_errors
    def import_kt_cmd(
        files: Annotated[list[str], typer.Argument(help="Kernel Tuner cache files (.json/.json.gz) or example:NAME")],
        progress: ProgressOption = True,
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """Store Kernel Tuner caches' measurements as trials of their task and device.

        Every cache is read and checked before anything is stored. Each cache gets one line: its new and stored
        trials, its task and device. On a terminal, a bar on standard error counts each cache's records as they
        are stored; with several caches, a summary line of their totals ends the run (--no-progress: neither)."""
        from autotune.db.logs import import_kt
        from autotune.search_spaces.replay import KTCache, resolve_cache_path

        for f in files:  # every file is there before anything is stored
            resolve_cache_path(f)
        for f in files[1:]:  # and every cache loads: read here and dropped, so one cache at a time is in memory
            KTCache.load(f)
        bar = Progress("import-kt", enabled=progress)
        database = None  # opened once the first cache has loaded: a cache refused creates no database
        total = new = 0
        try:
            for f in files:
                t0 = time.perf_counter()
                cache = KTCache.load(f)
                database = database or open_db(db)
                task, device, n, added = import_kt(database, cache, progress=bar)
                dt = time.perf_counter() - t0
                total, new = total + n, new + added
                typer.echo(f"{f}: {added} new of {n} trials for task {task.name} [{task.key}] on {device.name} "
                           f"({n / dt:,.0f} trials/s)")
        finally:
            if database is not None:
                database.close()
        if len(files) > 1:  # one cache's line says it all already
            bar.summary(f"{new:,} new of {total:,} trials from {len(files)} cache files in {bar.elapsed_s:.1f} s")

    @app.command("export")
    @handle_errors
    def export_cmd(
        output: Annotated[Path, typer.Option("--output", "-o", help="JSONL file to write ('-': standard output)")],
        campaign: Annotated[str | None, typer.Option("--campaign", help="Only this campaign: the trials it evaluated and its history")] = None,
        task: Annotated[str | None, typer.Option("--task", help="Task key or name")] = None,
        device: Annotated[str | None, typer.Option("--device", help="Device name or key")] = None,
        status: Annotated[str | None, typer.Option("--status", help="Only this status")] = None,
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """Write a tuning log as JSON lines, losslessly: trials, tasks, devices, campaigns with their histories, cost models.

        --campaign: its history, its models and the trials it evaluated (those it looked up too)."""
        from autotune.db.logs import export_file, export_items
        from autotune.db.queries import resolve_filters

        to_stdout = str(output) == "-"
        if not to_stdout:
            writable_output(output, "the export file")
        database = open_db(db, existing=True)
        stored = database.engine.url.database if database.dialect == "sqlite" else None
        if not to_stdout and stored and output.exists() and os.path.samefile(output, stored):
            raise UsageError(f"the export file {str(output)[:200]!r} is the database itself; give -o another file")
        names = resolve_filters(database, campaign=campaign, task=task, device=device)  # unknown: closest names
        if to_stdout:
            n = 0
            for line, is_trial in export_items(database, **names, status=status):
                typer.echo(line)
                n += is_trial
        else:
            n = export_file(database, output, **names, status=status)
        typer.echo(f"wrote {n} trials to {'standard output' if to_stdout else output}", err=True)

    @app.command("import")
    @handle_errors
    def import_cmd(
        file: Annotated[Path, typer.Argument(help="JSONL file written by autotune export ('-': standard input)")],
        progress: ProgressOption = True,
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """Import a tuning log exported from another database; trials, campaigns and models already present are kept.

        The file is one transaction: a malformed line, or a file cut short, imports nothing (no new database file).
        One line says how many trials were read and how many were new. On a terminal, a bar on standard
        error counts the file's lines as they are read (--no-progress: no bar). '-' reads standard input
        (`autotune export -o - --db A | autotune import - --db B`), once, line by line."""
        from autotune.db.engine import sqlite_file
        from autotune.db.logs import import_file, jsonl_path

        jsonl_path(file)  # a missing file creates no database
        bar = Progress("import", enabled=progress)
        new_file = sqlite_file(db)
        if new_file is not None and os.path.exists(new_file):
            new_file = None  # a database that was there stays, whatever happens
        database = open_db(db)
        try:
            read, added = import_file(database, file, progress=bar)
        except BaseException:
            database.close()
            if new_file is not None:  # a malformed file, or an interrupt: nothing was imported
                _remove_if_empty(new_file)
            raise
        finally:
            database.close()
        source = "standard input" if str(file) == "-" else file
        typer.echo(f"read {read} trials from {source}, {added} new")  # the summary: not repeated on standard error

    db_app = typer.Typer(help="Database schema management.", no_args_is_help=True)
    app.add_typer(db_app, name="db")

    @db_app.command("upgrade")
    @handle_errors
    def upgrade_cmd(db: DbOption = DEFAULT_DB) -> None:
        """Upgrade the database schema to this version of autotune (alembic), keeping every row.

        The upgrade is one transaction under the schema lock: stopped half-way (Ctrl-C, a kill) it leaves the
        database as it was, and a second process upgrading the same database at once waits for the first, then
        finds nothing to do. A missing SQLite file, or a database made by a newer autotune, is refused."""
        from autotune.db.migrate import upgrade_database

        safe, before, after = upgrade_database(db)
        if before == after:
            typer.echo(f"{safe}: schema {after} is this autotune's; nothing to upgrade")
        else:
            typer.echo(f"{safe}: schema {before or 'empty'} -> {after}")
