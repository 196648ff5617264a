"""`autotune plot convergence`: best-so-far against trials (and simulated time)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from autotune.cli.common import DEFAULT_DB, DbOption, handle_errors, open_db, writable_output


def register(app: typer.Typer, tune_app: typer.Typer) -> None:
    plot_app = typer.Typer(help="Plots of tuning logs.", no_args_is_help=True)
    app.add_typer(plot_app, name="plot")

    @plot_app.command("convergence")
    @handle_errors
    def convergence_cmd(
        campaign: Annotated[list[str], typer.Option("--campaign", help="Campaign name (repeat for several)")],
        output: Annotated[Path, typer.Option("--output", "-o", help="Image file to write (.png, .svg, .pdf)")],
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """Draw the best cost so far against trials, and against simulated time where there is one."""
        writable_output(output, "the plot", (".png", ".svg", ".pdf"))
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from autotune.db import queries

        database = open_db(db)
        frames = [queries.convergence(database, name) for name in campaign]
        with_sim = any(df["simulated_cum_s"].max() > 0 for df in frames)
        fig, axes = plt.subplots(1, 2 if with_sim else 1, figsize=(11 if with_sim else 6, 4), squeeze=False)
        for df in frames:
            label = df["campaign"].iloc[0] if len(df) else "empty"
            axes[0][0].step(df["trial"], df["best_so_far"], where="post", label=label)
            if with_sim:
                axes[0][1].step(df["simulated_cum_s"], df["best_so_far"], where="post", label=label)
        axes[0][0].set_xlabel("trial")
        if with_sim:
            axes[0][1].set_xlabel("simulated tuning time (s)")
        for ax in axes[0]:
            ax.set_ylabel("best cost so far (s)")
            ax.set_yscale("log")
            ax.grid(True, alpha=0.3)
            ax.legend()
        fig.tight_layout()
        fig.savefig(output)
        typer.echo(f"wrote {output}")
