"""Query commands: campaigns (list, delete, rename), trials, best, algorithms."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from autotune.cli.common import (
    DEFAULT_DB,
    DbOption,
    IncludeReusedOption,
    device_or_known_gpu,
    handle_errors,
    open_db,
)
from autotune.cli.listings import FormatOption, WideOption, check_format, print_table, write_frame, write_pages
from autotune.cli.tables import (
    Col,
    PlainCost,
    config_text,
    device_text,
    number,
    relative_time,
    seconds,
    short_key,
    task_labels,
)

TaskOption = Annotated[str | None, typer.Option("--task", help="Task key (or a unique prefix of it, at least 6 characters) or name")]
DeviceOption = Annotated[str | None, typer.Option("--device", help="Device name or key (or a unique prefix of it, at least 6 characters)")]
CampaignFilter = Annotated[str | None, typer.Option("--campaign", help="Campaign name")]

# The default tables (--wide: every column in full; csv and json: every column, raw).
CAMPAIGN_COLUMNS = [
    Col("campaign", flex=True, cut="distinct", least=14),
    Col("task", width=12),
    Col("device", render=device_text, width=14),
    Col("algorithm", width=14, cut="middle"),
    Col("status", width=10, least=8),
    Col("trials", render=number, right=True),
    Col("reused", render=number, right=True, spare=2),
    Col("errors", render=lambda v: "" if v == 0 else number(v), right=True, optional=True),  # left out when none failed
    Col("best_cost", header="best", render=seconds, right=True),
    Col("best_cost_including_reused", header="best+reused", render=seconds, right=True),
    Col("updated", render=relative_time, least=10, spare=3),  # on a narrow terminal, these go first
]
TRIAL_COLUMNS = [
    Col("id", render=number, right=True),
    Col("campaign", width=20, cut="distinct", optional=True),
    Col("task", width=20, least=20, optional=True),  # shown for the rows of several tasks (_with_task_column)
    Col("device", render=device_text, width=14),
    Col("status", width=13),
    Col("cost", render=seconds, right=True),
    Col("config", render=config_text, flex=True),
    Col("error", flex=True, optional=True),
]
BEST_COLUMNS = [
    Col("task", width=16),
    Col("task_key", header="task key", render=short_key),
    Col("device", render=device_text, width=16),
    Col("rank", render=number, right=True),
    Col("cost", render=seconds, right=True),
    Col("source", width=9),
    Col("from", flex=True, optional=True),
    Col("config", render=config_text, flex=True),
]


def _layout(columns: list[Col], drop: tuple[str, ...] = ()) -> list[Col]:
    """The column spec of a default table without the ``drop``ped columns."""
    return [c for c in columns if c.name not in drop]


def _group_db(ctx: typer.Context, db: str) -> str:
    """The --db of a `campaigns` subcommand, or the one given before it (`campaigns --db URL delete NAME`)."""
    parent = ctx.parent.params.get("db") if ctx.parent is not None else None
    return parent if db == DEFAULT_DB and parent else db


def _stdin_is_tty() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


COST_COLUMNS = ("cost", "best_cost", "best_cost_including_reused")


def _with_task_column(frames):
    """The pages of a default trials table as one frame whose ``task`` column names each row's task (with a
    short key where two of the tasks shown share a name) when the rows are of several tasks, and is empty
    (left out of the table) when they are of one."""
    import pandas as pd

    frames = list(frames)
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0] if frames else pd.DataFrame()
    if {"task", "task_key"} <= set(df.columns):
        df = df.copy()
        df["task"] = pd.Series(task_labels(df["task"].tolist(), df["task_key"].tolist()), dtype=object, index=df.index)
    return [df]


def plain_costs(database, frames, fmt: str):
    """``frames`` with the costs of tasks whose cost is not a time (a minimized function's value) as
    :class:`PlainCost`, which a table shows without a unit; csv and json keep the numbers as they are."""
    if fmt != "table":
        yield from frames
        return
    from sqlalchemy import select

    from autotune.db.models import TaskRow

    with database.session() as s:
        keys = set(s.scalars(select(TaskRow.key).where(TaskRow.kind == "function")).all())
    for df in frames:
        plain = df["task_key"].isin(keys).tolist() if keys and "task_key" in df.columns else []
        if any(plain):
            import pandas as pd

            df = df.copy()
            for c in COST_COLUMNS:
                if c in df.columns:  # a new object Series: assigning into one turns the values back into floats
                    df[c] = pd.Series([PlainCost(v) if p and pd.notna(v) else v
                                       for p, v in zip(plain, df[c].tolist())], dtype=object, index=df.index)
        yield df


def list_campaigns(db: str, format: str, include_reused: bool, wide: bool, task: str | None = None,
                   device: str | None = None) -> None:
    """Print the campaigns (optionally of one task and/or device)."""
    from autotune.db import queries

    check_format(format)
    database = open_db(db, existing=True)
    names = queries.resolve_filters(database, task=task, device=device)
    df = queries.campaigns(database, include_reused=include_reused)
    if names["task"] is not None:
        df = df[(df["task"] == names["task"]) | (df["task_key"] == names["task"])]
    if names["device"] is not None:
        from sqlalchemy import select

        from autotune.db.models import DeviceRow

        with database.session() as s:
            dev_names = set(s.scalars(select(DeviceRow.name).where(
                (DeviceRow.name == names["device"]) | (DeviceRow.key == names["device"]))).all())
        df = df[df["device"].isin(dev_names)]
    if format == "table" and df.empty:
        typer.echo("no campaigns" + (" match" if task or device else " yet"), err=True)
        return
    df = next(plain_costs(database, [df.reset_index(drop=True)], format))
    # --include-reused's two columns leave no room for the errors within 100 columns (--wide shows them)
    write_frame(df, format, columns=_layout(CAMPAIGN_COLUMNS, ("errors",) if include_reused else ()), wide=wide)


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    campaigns_app = typer.Typer(
        invoke_without_command=True, no_args_is_help=False,
        help="List campaigns (the default), or delete or rename one.")
    app.add_typer(campaigns_app, name="campaigns")

    @campaigns_app.callback()
    @handle_errors
    def campaigns_cmd(
        ctx: typer.Context,
        db: DbOption = DEFAULT_DB,
        format: FormatOption = "table",
        include_reused: IncludeReusedOption = False,
        task: TaskOption = None,
        device: DeviceOption = None,
        wide: WideOption = False,
    ) -> None:
        """List campaigns with their task, device, algorithm, status, trials (own measurements), reused
        (trials looked up, measured elsewhere), best cost (of the own trials) and when they last stored
        a batch; `campaigns delete NAME` and `campaigns rename OLD NEW` manage them."""
        if ctx.invoked_subcommand is None:
            list_campaigns(db, format, include_reused, wide, task, device)

    @campaigns_app.command("list")
    @handle_errors
    def campaigns_list_cmd(
        ctx: typer.Context,
        db: DbOption = DEFAULT_DB,
        format: FormatOption = "table",
        include_reused: IncludeReusedOption = False,
        task: TaskOption = None,
        device: DeviceOption = None,
        wide: WideOption = False,
    ) -> None:
        """List campaigns (the same as `autotune campaigns`)."""
        list_campaigns(_group_db(ctx, db), format, include_reused, wide, task, device)

    @campaigns_app.command("delete")
    @handle_errors
    def campaigns_delete_cmd(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(help="The campaign to delete")],
        with_trials: Annotated[bool, typer.Option("--with-trials", help="Also delete the trials the campaign measured (and other campaigns' links to them); by default they stay in the database, reusable, with no campaign")] = False,
        yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation (needed when standard input is not a terminal)")] = False,
        force: Annotated[bool, typer.Option("--force", help="Delete even while workers of the campaign are alive (they will fail)")] = False,
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """Delete a campaign: its history, algorithm state, workers' claims and reservations and its cost
        models (pinned models are kept, without the campaign). The trials it measured stay in the
        database (other campaigns reuse them) unless --with-trials."""
        from autotune.db import queries
        from autotune.errors import UsageError

        database = open_db(_group_db(ctx, db), existing=True)
        name = queries.resolve_filters(database, campaign=name)["campaign"]
        row = database.campaign(name)
        if not force:  # before asking: a deletion that would be refused is not offered
            database.refuse_live_workers(row.id, name)
        stats = queries.campaigns(database)
        stats = stats[stats["campaign"] == name].iloc[0]
        n_models = len(queries.cost_models(database, campaign=name))
        fate = (f"and the {stats['trials']} trials it measured" if with_trials else
                f"its {stats['trials']} measured trials stay in the database, with no campaign")
        what = (f"campaign {name!r} ({stats['task']} on {stats['device']}): its history of "
                f"{stats['trials'] + stats['reused']} evaluations, its state and {n_models} cost model(s); {fate}")
        if not yes:
            if not _stdin_is_tty():
                raise UsageError(f"not deleting campaign {name!r} without confirmation: standard input is not a "
                                 "terminal; pass --yes to delete it")
            typer.echo(f"delete {what}")
            if not typer.confirm("delete it?", default=False):
                typer.echo("nothing deleted", err=True)
                raise typer.Exit(1)
        done = database.delete_campaign(name, with_trials=with_trials, force=force)
        kept = f", {done['models_kept']} pinned model(s) kept" if done["models_kept"] else ""
        trials = (f"{done['trials_deleted']} trials deleted" if with_trials
                  else f"{done['trials_kept']} measured trials kept (no campaign)")
        typer.echo(f"deleted campaign {name!r}: {done['links']} evaluations, {done['models_deleted']} cost model(s)"
                   f"{kept}; {trials}")

    @campaigns_app.command("rename")
    @handle_errors
    def campaigns_rename_cmd(
        ctx: typer.Context,
        old: Annotated[str, typer.Argument(help="The campaign's name")],
        new: Annotated[str, typer.Argument(help="Its new name (no campaign may have it)")],
        force: Annotated[bool, typer.Option("--force", help="Rename even while workers of the campaign are alive (they go on naming it by its old name, in their summary and in the resume command a Ctrl-C prints)")] = False,
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """Rename a campaign (refused when a campaign of the new name exists, or while it runs unless --force);
        resume it with --campaign NEW."""
        from autotune.db import queries

        database = open_db(_group_db(ctx, db), existing=True)
        old = queries.resolve_filters(database, campaign=old)["campaign"]
        database.rename_campaign(old, new, force=force)
        typer.echo(f"renamed campaign {old!r} to {new!r}; resume it with --campaign {new!r}")

    @app.command("trials")
    @handle_errors
    def trials_cmd(
        campaign: CampaignFilter = None,
        task: TaskOption = None,
        device: DeviceOption = None,
        status: Annotated[str | None, typer.Option("--status", help="OK, INVALID, COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT or WRONG_RESULT")] = None,
        top: Annotated[int | None, typer.Option("--top", help="Only the K fastest successful trials, fastest first")] = None,
        limit: Annotated[int | None, typer.Option("--limit", help="At most this many trials, oldest first (default 50, or every trial of the --campaign)")] = None,
        all_: Annotated[bool, typer.Option("--all", help="Every matching trial (streamed page by page)")] = False,
        format: FormatOption = "table",
        wide: WideOption = False,
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """List trials (every measurement) with their configuration, status and cost: every trial a
        --campaign evaluated (with those it looked up rather than measured, which name the campaign that
        measured them), else the first 50 unless --limit, --top or --all says otherwise."""
        from autotune.db import queries
        from autotune.errors import UsageError

        check_format(format)
        if top is not None and (limit is not None or all_):
            raise UsageError(f"--top {top} lists the {top} fastest trials; it does not go with "
                             f"{'--limit' if limit is not None else '--all'}")
        database = open_db(db, existing=True)
        filters = {**queries.resolve_filters(database, campaign=campaign, task=task, device=device), "status": status}
        all_ = all_ or (campaign is not None and limit is None)
        limit = 50 if limit is None else limit
        if all_ and top is None:
            pages = queries.trial_pages(database, **filters)
        else:
            pages = iter([queries.trials(database, **filters, top=top, limit=None if all_ else limit)])
        # a filtered device is the same on every row, and so is a filtered campaign unless it looked up trials
        # measured elsewhere: the campaign column then names who measured each
        own = filters["campaign"] is not None and queries.lookups(database, filters["campaign"]) == 0
        drop = tuple(k for k, same in (("campaign", own), ("device", filters["device"] is not None)) if same)
        frames = plain_costs(database, pages, format)
        if format == "table":  # laid out once over every page: read whole anyway
            frames = list(frames)
            if not any(len(df) for df in frames):
                typer.echo("no trials" + (" match" if any(filters.values()) else " yet"), err=True)
                return
            if not wide:  # csv, json and --wide have every column, raw: task and task_key
                frames = _with_task_column(frames)
        shown = write_pages(frames, format, columns=_layout(TRIAL_COLUMNS, drop), wide=wide)
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
        wide: WideOption = False,
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """The best measured configuration per (task, device); for a device that never measured the task
        (in the database without a trial of it, or a GPU of the known table), the configuration expected
        best from the most similar devices."""
        from autotune.db import queries
        from autotune.errors import UsageError

        check_format(format)
        if k <= 0:
            raise UsageError(f"--k must be positive, not {k}")
        database = open_db(db, existing=True)
        task = queries.resolve_filters(database, task=task)["task"]
        if not task and device is not None:
            try:
                device = queries.resolve_filters(database, device=device)["device"]
            except UsageError as exc:
                from autotune.gpus import gpu_properties

                if "model" in gpu_properties(device):  # a known GPU that measured nothing: needs the task
                    raise UsageError(f"{exc.command_line_message()}; for a GPU without trials, name the --task too: the configuration "
                                     "expected best comes from the devices most similar to it") from None
                raise
        else:
            device = device_or_known_gpu(database, device)
        from autotune.db.names import is_stored

        # a GPU of the known table that the database does not have measured nothing: no query to run for it
        stored = device is None or is_stored(database, "device", device)
        df = queries.best(database, task=task, device=device, k=k) if stored else None
        if (df is None or df.empty) and task and device:  # a device never tuned: the config expected best from similar devices
            import pandas as pd

            from autotune.transfer.dispatch import best_config

            res = best_config(task, device, db=database).to_json()
            res["from"] = ", ".join(f"{d['device']} (similarity {d['score']})" for d in res["from"])
            df = pd.DataFrame([res])[["task", "task_key", "device", "source", "from", "config"]]
        if df.empty and format == "table":  # csv and json say it as a header alone, an empty array
            typer.echo(("no successful trial matches" if task or device else "no successful trials yet")
                       + (f" task {task!r}" if task else "")
                       + (f" device {device!r}" if device else ""), err=True)
            return
        df = next(plain_costs(database, [df], format))
        write_frame(df, format, columns=_layout(BEST_COLUMNS, () if k > 1 else ("rank",)), wide=wide)

    @app.command("algorithms")
    def algorithms_cmd() -> None:
        """List the search algorithms with their options and defaults (one of your own: --algorithm
        MODULE:CLASS, a SearchAlgorithm subclass)."""
        import pandas as pd

        from autotune.algorithms.registry import ALGORITHMS, algorithm_class
        from autotune.errors import MissingDependencyError

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
        print_table(pd.DataFrame(rows, columns=["algorithm", "description", "options"]), max_width=10_000)  # every option

