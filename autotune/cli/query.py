"""Query commands: campaigns, trials, best, algorithms."""

from __future__ import annotations

from typing import Annotated

import typer

from autotune.cli.common import DEFAULT_DB, DbOption, handle_errors, open_db, print_table, write_frame, write_pages

FormatOption = Annotated[str, typer.Option("--format", "-f", help="table, csv or json")]
TaskOption = Annotated[str | None, typer.Option("--task", help="Task key or name")]
DeviceOption = Annotated[str | None, typer.Option("--device", help="Device name or key")]


def _check_format(fmt: str) -> None:
    from autotune.errors import UsageError

    if fmt not in ("table", "csv", "json"):
        raise UsageError(f"unknown format {fmt!r}; valid: table, csv, json")


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    @app.command("campaigns")
    @handle_errors
    def campaigns_cmd(db: DbOption = DEFAULT_DB, format: FormatOption = "table") -> None:
        """List campaigns with their task, device, algorithm, status, trials and best cost."""
        from autotune.db import queries

        _check_format(format)
        database = open_db(db)
        write_frame(queries.campaigns(database), format)

    @app.command("trials")
    @handle_errors
    def trials_cmd(
        campaign: Annotated[str | None, typer.Option("--campaign", help="Campaign name")] = None,
        task: TaskOption = None,
        device: DeviceOption = None,
        status: Annotated[str | None, typer.Option("--status", help="OK, INVALID, COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT or WRONG_RESULT")] = None,
        top: Annotated[int | None, typer.Option("--top", help="Only the K fastest successful trials, fastest first")] = None,
        limit: Annotated[int | None, typer.Option("--limit", help="At most this many trials, oldest first (default 50, or every trial of the --campaign)")] = None,
        all_: Annotated[bool, typer.Option("--all", help="Every matching trial (streamed page by page)")] = False,
        format: FormatOption = "table",
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """List trials (every measurement) with their configuration, status and cost: every trial of a
        --campaign, else the first 50 unless --limit, --top or --all says otherwise."""
        from autotune.db import queries

        _check_format(format)
        database = open_db(db)
        filters = {"campaign": campaign, "task": task, "device": device, "status": status}
        all_ = all_ or (campaign is not None and limit is None)
        limit = 50 if limit is None else limit
        if all_ and top is None:
            pages = queries.trial_pages(database, **filters)
        else:
            pages = iter([queries.trials(database, **filters, top=top, limit=None if all_ else limit)])
        columns = ["id", "status", "cost", "config", "device", "campaign", "error"]
        shown = write_pages((df[columns] if format == "table" else df for df in pages), format)
        if not all_ and top is None and shown == limit:
            total = queries.count_trials(database, **filters)
            if total > shown:
                typer.echo(f"showing the first {shown} of {total} trials; --limit N or --all for more", err=True)

    @app.command("best")
    @handle_errors
    def best_cmd(
        task: TaskOption = None,
        device: DeviceOption = None,
        k: Annotated[int, typer.Option("--k", help="How many per task and device")] = 1,
        format: FormatOption = "table",
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """The best measured configuration per (task, device)."""
        from autotune.db import queries
        from autotune.errors import UsageError

        _check_format(format)
        if k <= 0:
            raise UsageError(f"--k must be positive, not {k}")
        database = open_db(db)
        df = queries.best(database, task=task, device=device, k=k)
        if df.empty and task and device:  # a device never tuned: the config expected best from similar devices
            import pandas as pd

            from autotune.transfer.dispatch import best_config

            res = best_config(task, device, db=database).to_json()
            res["from"] = ", ".join(f"{d['device']} (similarity {d['score']})" for d in res["from"])
            df = pd.DataFrame([res])[["task", "task_key", "device", "source", "from", "config"]]
        if df.empty:
            raise UsageError("no successful trial matches" + (f" task {task!r}" if task else "") + (f" device {device!r}" if device else ""))
        write_frame(df, format)

    @app.command("algorithms")
    def algorithms_cmd() -> None:
        """List the search algorithms with their options and defaults."""
        import pandas as pd

        from autotune.errors import MissingDependencyError
        from autotune.algorithms.registry import ALGORITHMS, algorithm_class

        rows = []
        for name in sorted(ALGORITHMS):
            try:
                cls = algorithm_class(name)
            except MissingDependencyError as exc:
                rows.append((name, f"unavailable: {exc}", ""))
                continue
            opts = "; ".join(f"{k}={o.default!r}: {o.help}" for k, o in cls.options.items())
            rows.append((name, cls.description, opts))
        from autotune.algorithms.model_guided import ModelGuided

        opts = "; ".join(f"{k}={o.default!r}: {o.help}" for k, o in ModelGuided.options.items())
        rows.append(("ALGORITHM --cost-model xgb", ModelGuided.description, opts))
        print_table(pd.DataFrame(rows, columns=["algorithm", "description", "options"]), max_width=400)
