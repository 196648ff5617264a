"""`autotune plot convergence`: best-so-far against trials (and simulated time)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from autotune.cli.common import (
    DEFAULT_DB,
    DbOption,
    IncludeReusedOption,
    handle_errors,
    open_db,
    writable_output,
)


def convergence_series(database, campaigns: list[str], include_reused: bool = False) -> list[dict]:
    """What ``plot convergence`` draws, one dict per campaign: ``label``, ``trial`` (the x axis: the
    campaign's own measurements, or every evaluation with ``include_reused``), ``simulated_s`` (the
    cumulative simulated time at each), ``best`` (the best cost so far at each; NaN before the first
    success) and ``reused`` (how many of the points are look-ups: 0 unless ``include_reused``)."""
    from autotune.db import queries

    series = []
    for name in campaigns:
        df = queries.convergence(database, name, include_reused=include_reused)
        series.append({"label": name, "trial": df["trial"].to_list(), "simulated_s": df["simulated_cum_s"].to_list(),
                       "best": df["best_so_far"].to_list(), "reused": int(df["reused"].sum())})
    return series


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    plot_app = typer.Typer(help="Plots of tuning logs.", no_args_is_help=True)
    app.add_typer(plot_app, name="plot")

    @plot_app.command("convergence")
    @handle_errors
    def convergence_cmd(
        campaign: Annotated[list[str], typer.Option("--campaign", help="Campaign name (repeat for several)")],
        output: Annotated[Path, typer.Option("--output", "-o", help="Image file to write (.png, .svg, .pdf)")],
        include_reused: IncludeReusedOption = False,
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """Draw the best cost so far against the campaign's own trials, and against simulated time where
        there is one. With --include-reused, the trials it looked up count too (at no simulated time)."""
        writable_output(output, "the plot", (".png", ".svg", ".pdf"))
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from autotune.db.queries import resolve_filters

        database = open_db(db, existing=True)
        campaign = [resolve_filters(database, campaign=name)["campaign"] for name in campaign]  # as `trials` names them
        series = convergence_series(database, campaign, include_reused)
        with_sim = any(s["simulated_s"] and max(s["simulated_s"]) > 0 for s in series)
        fig, axes = plt.subplots(1, 2 if with_sim else 1, figsize=(11 if with_sim else 6, 4), squeeze=False)
        for s in series:
            label = s["label"] if s["trial"] else f"{s['label']} (empty)"
            axes[0][0].step(s["trial"], s["best"], where="post", label=label)
            if with_sim:
                axes[0][1].step(s["simulated_s"], s["best"], where="post", label=label)
        axes[0][0].set_xlabel("evaluation (own trials and reused look-ups)" if include_reused else "trial (own measurements)")
        if with_sim:
            axes[0][1].set_xlabel("simulated tuning time (s)")
        for ax in axes[0]:
            ax.set_ylabel("best cost so far (s)")
            ax.set_yscale("log")
            ax.grid(True, alpha=0.3)
            ax.legend()
        fig.tight_layout()
        fig.savefig(output)
        plt.close(fig)
        typer.echo(f"wrote {output}")
