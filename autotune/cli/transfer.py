"""Transfer commands: `autotune devices [--similar-to NAME]`, `autotune export-configs`."""

from __future__ import annotations

from typing import Annotated

import typer

from autotune.cli.common import DEFAULT_DB, DbOption, device_or_known_gpu, emit_json, handle_errors, open_db
from autotune.cli.listings import WideOption, print_table
from autotune.cli.tables import Col, number, short_key, text

# The default tables (--wide: every column in full; --json: everything).
DEVICE_COLUMNS = [
    Col("name", flex=True),
    Col("kind", width=10),
    Col("architecture", header="arch", width=12),
    Col("compute_capability", header="cc", render=text),
    Col("sm_count", header="SMs", render=number, right=True),
    Col("memory_bandwidth_gbs", header="mem GB/s", render=number, right=True),
    Col("boost_clock_mhz", header="boost MHz", render=number, right=True),
    Col("l2_kib", header="L2 KiB", render=number, right=True),
    Col("key", render=short_key),
]
SIMILAR_COLUMNS = [
    Col("device", width=28),
    Col("score", render=number, right=True),
    Col("property_score", header="props", render=number, right=True),
    Col("rank_correlation", header="rank corr", render=number, right=True),
    Col("common_configs", header="common", render=number, right=True),
    Col("why", flex=True),
    Col("key", render=short_key),
]


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    @app.command("devices")
    @handle_errors
    def devices_cmd(
        similar_to: Annotated[str | None, typer.Option("--similar-to", help="List the devices most similar to this one (a name or key in the database, or a GPU of the known table), and why")] = None,
        task: Annotated[str | None, typer.Option("--task", help="With --similar-to: compare measured times on this task (key or name)")] = None,
        json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")] = False,
        wide: WideOption = False,
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """List devices with their properties, or the devices most similar to one."""
        import pandas as pd

        from autotune.db import transfer as store
        from autotune.db.queries import resolve_filters

        if task is not None and similar_to is None:
            from autotune.errors import UsageError

            raise UsageError("--task goes with --similar-to: it names the task whose measured times compare devices")

        database = open_db(db, existing=True)
        try:
            devs = store.devices(database)
            if similar_to is None:
                rows = [{"name": d.name, "kind": d.kind, "key": d.key, **{k: v for k, v in d.properties.items()
                                                                           if k != "source"}} for d in devs]
                if json:
                    emit_json({"devices": rows})
                elif not rows:
                    typer.echo("no devices yet")
                else:
                    print_table(pd.DataFrame(rows), max_width=40, columns=DEVICE_COLUMNS, wide=wide)
                return
            # the similarity's statistics (scipy) load only here: the plain listing answers at once
            from autotune.transfer.dispatch import as_device
            from autotune.transfer.similarity import rank_similar

            target = as_device(database, device_or_known_gpu(database, similar_to))
            stored = any(d.key == target.key for d in devs)
            others = [d for d in devs if not _same_device(d, target, stored)]
            measured: dict[str, list] = {}
            mine: list = []
            if task is not None:
                t = store.resolve_task(database, resolve_filters(database, task=task)["task"])
                for key, (_, ms) in store.task_trials(database, t).items():
                    measured[key] = ms
                mine = measured.get(target.key, [])
            else:  # the task the target shares with the most other devices decides
                t, measured, mine = _best_shared_task(database, target, {d.key for d in others})
            ranked = rank_similar(target, others, measured, mine)
        finally:
            database.close()
        rows = [s.to_json() for s in ranked]
        compared = (f"{target.name} (key {short_key(target.key)})" if stored else
                    f"{target.name} (not in the database: its known properties)")
        # the rank correlations and common configurations are those of one task's measured times: say which
        on_task = f", measured times of task {t.name} [{short_key(t.key)}]" if t is not None else ""
        if json:
            emit_json({"device": target.name, "key": target.key if stored else None,
                       "task": {"name": t.name, "key": t.key} if t is not None else None, "similar": rows})
        elif rows:
            df = pd.DataFrame(rows)[["device", "score", "property_score", "rank_correlation", "common_configs", "why",
                                   "key"]]
            print_table(df, title=f"devices similar to {compared}{on_task}", max_width=120, columns=SIMILAR_COLUMNS,
                        wide=wide)
        else:
            typer.echo(f"no other devices in the database than {compared}")

    @app.command("export-configs")
    @handle_errors
    def export_cmd(
        task: Annotated[str, typer.Option("--task", help="Task key or name")],
        devices: Annotated[list[str] | None, typer.Option("--devices", help="Device names or keys (repeat, or comma-separated; default: every device that measured the task)")] = None,
        format: Annotated[str | None, typer.Option("--format", "-f", help="json or c-header, any case (default: c-header with --prefix or an --output FILE.h, .hh, .hpp or .cuh, else json)")] = None,
        output: Annotated[str | None, typer.Option("--output", "-o", help="Write to this file instead of standard output")] = None,
        prefix: Annotated[str | None, typer.Option("--prefix", help="Macro prefix of the C header (default: the task name)")] = None,
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """Write the best configuration per device, plus a fallback good on all of them, as JSON or a C header."""
        import json as _json
        from pathlib import Path

        from autotune.errors import UsageError
        from autotune.transfer.export import c_header, export_configs

        if format is None:
            header = prefix is not None or Path(output or "").suffix.lower() in (".h", ".hh", ".hpp", ".cuh")
            format = "c-header" if header else "json"
        format = format.lower()  # any case, as the listings take --format
        if format not in ("json", "c-header"):
            raise UsageError(f"unknown format {format!r}; valid: json, c-header")
        if prefix is not None and format != "c-header":
            raise UsageError("--prefix names the macros of a C header; it goes with --format c-header, not json")
        from autotune.db.queries import resolve_filters

        names = [n.strip() for d in (devices or []) for n in d.split(",") if n.strip()]
        if devices is not None and not names:
            raise UsageError(f"--devices {','.join(devices)!r} names no device; give DEVICE[,DEVICE...] (names or keys "
                             "in the database), or leave it out for every device that measured the task")
        database = open_db(db, existing=True)
        try:  # names as `trials` takes them: any case, or a key prefix
            task = resolve_filters(database, task=task)["task"]
            names = [resolve_filters(database, device=n)["device"] for n in names]
            doc = export_configs(database, task, names or None)
        finally:
            database.close()
        text = _json.dumps(doc, indent=1, default=str) + "\n" if format == "json" else c_header(doc, prefix)
        if output:
            import os
            import tempfile

            target = Path(output)
            tmp = None
            try:  # written beside it and moved over it: an interrupted write leaves the file that was there
                fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent if str(target.parent) else ".")
                with os.fdopen(fd, "w") as f:
                    f.write(text)
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(tmp, target.stat().st_mode & 0o7777 if target.is_file() else 0o666 & ~umask)
                os.replace(tmp, target)
                tmp = None
            except OSError as exc:
                raise UsageError(f"cannot write {output!r}: {exc.strerror or exc}") from None
            finally:
                if tmp is not None and os.path.exists(tmp):
                    os.unlink(tmp)
            shipped = sum(1 for r in doc["devices"] if not r.get("superseded_by"))
            typer.echo(f"wrote {shipped} device(s) and a fallback to {output}", err=True)
        else:
            typer.echo(text, nl=False)


def _same_device(d, target, stored: bool) -> bool:
    """Whether the stored device ``d`` is the device compared: itself, the same name stored again (a GPU whose
    driver changed), or, for a GPU named from the known table and not stored, a stored GPU of its model."""
    from autotune.gpus import gpu_properties

    if d.key == target.key or d.name.casefold() == target.name.casefold():
        return True
    model = None if stored else target.properties.get("model")
    return bool(model) and d.kind == target.kind and gpu_properties(d.name).get("model") == model


def _best_shared_task(database, target, others: set[str]):
    """(the task, measurements by device key, the target's) of the task the target measured that the most of
    ``others`` (keys) measured too; (None, {}, []) when none of them measured a task of the target's."""
    from sqlalchemy import select

    from autotune.db import transfer as store
    from autotune.db.models import DeviceRow, TaskRow, TrialRow

    with database.session() as s:
        tasks = s.execute(select(TaskRow).join(TrialRow, TrialRow.task_id == TaskRow.id)
                          .join(DeviceRow, DeviceRow.id == TrialRow.device_id)
                          .where(DeviceRow.key == target.key).distinct()).scalars().all()
        tasks = [store.Task(t.kind, t.name, dict(t.params or {})) for t in tasks]
    best: tuple[int, object, dict, list] = (0, None, {}, [])
    for t in tasks:
        trials = {k: ms for k, (_, ms) in store.task_trials(database, t).items()}
        mine = trials.get(target.key, [])
        shared = sum(1 for k in trials if k in others)
        if shared > best[0]:
            best = (shared, t, trials, mine)
    return best[1], best[2], best[3]
