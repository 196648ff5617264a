"""`autotune tune many`, `autotune worker` and `autotune workers`: campaigns over many machines."""

from __future__ import annotations

from typing import Annotated

import typer

from autotune.cli.common import (
    DEFAULT_DB,
    DbOption,
    JsonOption,
    ProgressOption,
    RayActorsOption,
    RayOption,
    emit_json,
    handle_errors,
)
from autotune.cli.listings import print_table
from autotune.cli.tables import Col, number, seconds

# `tune many`'s table: one line per campaign at any width (the error shortened; --json and the line each
# campaign printed on standard error as it ended give it whole)
MANY_COLUMNS = [Col("campaign", flex=True, cut="distinct", least=12), Col("kind"), Col("status", width=10, least=8),
                Col("trials", render=number, right=True), Col("best_cost", render=seconds, right=True),
                Col("error", flex=True, optional=True)]


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    @tune_app.command("many")
    @handle_errors
    def tune_many_cmd(
        file: Annotated[str, typer.Argument(help="YAML or JSON file: a list of campaigns, or defaults: and campaigns:")],
        db: DbOption = DEFAULT_DB,
        ray: RayOption = None,
        json: JsonOption = False,
    ) -> None:
        """Run many campaigns (one per operator shape, one task on several GPUs, ...); with --ray as Ray tasks sharing the cluster, else one after the other.

        Each entry has a kind (replay, kernel, graph, parallel or command) and the arguments of that kind's command with underscores (cache, name, shape, target, model, cluster, argv, space_file, trials, seed, ...), and may name its campaign and db. Every campaign is logged as usual; one that fails is reported and the others go on. Each campaign is printed as it ends; with --ray, a line names those still running whenever none has ended for a minute."""
        import time

        import pandas as pd
        from rich.console import Console

        from autotune.drivers.scale import load_many, tune_many

        entries = load_many(file)
        # names and errors are plain text ('autotune[cuda]'); one line per campaign when piped, however long
        console = Console(stderr=True, markup=False, soft_wrap=True)
        done = []

        def show(r: dict) -> None:
            done.append(r)
            what = f"best {seconds(r['best_cost'])}" if r.get("best_cost") is not None else (r.get("error") or "no result")
            console.print(f"[{len(done)}/{len(entries)}] {r.get('campaign') or r['kind']}: {r.get('status')}, {what}")

        start = time.monotonic()

        def waiting(running: list[dict]) -> None:  # a line a minute while nothing ends: the run is alive
            names = [e.get("campaign") or e["kind"] for e in running]
            more = f" and {len(names) - 5} more" if len(names) > 5 else ""
            console.print(f"[{len(done)}/{len(entries)}] {len(running)} running after "
                          f"{(time.monotonic() - start) / 60:.0f} min: {', '.join(names[:5])}{more}")

        results = tune_many(entries, db, ray, on_done=show, on_wait=waiting)
        failed = sum(1 for r in results if r.get("error"))
        if json:
            emit_json({"campaigns": results, "failed": failed})
        else:
            cols = ["campaign", "kind", "status", "trials", "best_cost", "error"]
            print_table(pd.DataFrame([{c: r.get(c) for c in cols} for r in results]), title=f"{len(results)} campaigns",
                        columns=MANY_COLUMNS)
        if failed:
            raise typer.Exit(1)

    @app.command("worker")
    @handle_errors
    def worker_cmd(
        campaign: Annotated[str, typer.Option("--campaign", help="The running campaign to join")],
        db: DbOption = DEFAULT_DB,
        ray: RayOption = None,
        ray_actors: RayActorsOption = None,
        progress: ProgressOption = True,
        json: JsonOption = False,
    ) -> None:
        """Join a campaign as one more worker, on this machine or any other that reaches the database (PostgreSQL for several hosts: postgresql+psycopg://USER@HOST/DB).

        The campaign is made again from the recipe of the run that started or last resumed it alone, with the trial budget it runs to now (that of its live workers, or of that run). With --ray a replay or kernel campaign is measured on Ray actors, a graph or parallel one runs as one Ray task. Workers reserve each candidate in the database before measuring it (none is measured twice), claim from the shared trial budget (it is met exactly) and send heartbeats: a worker that dies is noticed (at once on its own host, after a minute elsewhere) and the candidates it held are measured by the others."""
        from autotune.drivers.scale import join_campaign

        out = join_campaign(campaign, db, ray, ray_actors, progress)
        if json:
            emit_json(out)
        else:
            # the cost as `tune` reports it (a time with its unit); the campaign's trials, and this worker's share
            best = f"best {seconds(out['best_cost'])}" if out.get("best_cost") is not None else "no successful measurement"
            here = f" ({out['measured_here']} measured by this worker)" if out.get("measured_here") is not None else ""
            typer.echo(f"campaign {out.get('campaign')} ({out.get('status')}): {out.get('trials')} trials{here}, {best}")

    @app.command("workers")
    @handle_errors
    def workers_cmd(
        campaign: Annotated[str, typer.Option("--campaign", help="Campaign name")],
        db: DbOption = DEFAULT_DB,
        json: JsonOption = False,
    ) -> None:
        """The workers of a campaign: what each has claimed and reserved, its last heartbeat, whether it lives."""
        import pandas as pd

        from autotune.cli.common import open_db

        database = open_db(db, existing=True)
        try:
            from autotune.db.queries import resolve_filters

            campaign = resolve_filters(database, campaign=campaign)["campaign"]
            rows = database.campaign_workers(database.campaign(campaign).id)
        finally:
            database.close()
        if json:
            emit_json({"campaign": campaign, "workers": [{**r, "heartbeat": r["heartbeat"].isoformat()} for r in rows]})
        elif not rows:
            typer.echo(f"campaign {campaign} has no worker running")
        else:
            print_table(pd.DataFrame(rows), title=f"workers of {campaign}")
