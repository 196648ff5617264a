"""`autotune plot convergence`: best-so-far against trials (and simulated time)."""

from __future__ import annotations

import contextlib
import io
import warnings
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
from autotune.cli.tables import distinct_cuts


#: the legend's room for a campaign name: a longer one, which would cover the plot, is cut (the names still told apart)
LABEL_CELLS = 40


def convergence_series(database, campaigns: list[str], include_reused: bool = False) -> list[dict]:
    """What ``plot convergence`` draws, one dict per campaign: ``label``, ``trial`` (the x axis: the
    campaign's own measurements, or every evaluation with ``include_reused``), ``simulated_s`` (the
    cumulative simulated time at each), ``best`` (the best cost so far at each; NaN before the first
    success), ``reused`` (how many of the points are look-ups: 0 unless ``include_reused``) and ``time``
    (whether its costs are seconds: not a minimized function's values)."""
    from sqlalchemy import select

    from autotune.db import queries
    from autotune.db.models import CampaignRow, TaskRow

    series = []
    for name in dict.fromkeys(campaigns):  # a campaign named twice is drawn once
        df = queries.convergence(database, name, include_reused=include_reused)
        with database.session() as s:
            kind = s.scalar(select(TaskRow.kind).join(CampaignRow, CampaignRow.task_id == TaskRow.id)
                            .where(CampaignRow.name == name))
        series.append({"label": name, "trial": df["trial"].to_list(), "simulated_s": df["simulated_cum_s"].to_list(),
                       "best": df["best_so_far"].to_list(), "reused": int(df["reused"].sum()),
                       "time": kind != "function"})
    return series


@contextlib.contextmanager
def _no_glyph_warnings():
    """Draw a name in a script the font lacks as boxes, without a warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        yield


def convergence_figure(series: list[dict], include_reused: bool = False):
    """The matplotlib figure of ``series`` (:func:`convergence_series`): best so far against trials, and
    against simulated time where a campaign spent some. A campaign without a point, or without a
    success, says so in the legend; one with a single success has it marked; the legend shows each name as
    written (no formula, no name left out), a name longer than LABEL_CELLS cut; the cost axis is logarithmic
    unless a best is 0, and in seconds unless a campaign minimized a function (whose values have no unit)."""
    import math

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with_sim = any(s["simulated_s"] and max(s["simulated_s"]) > 0 for s in series)
    bests = [b for s in series for b in s["best"] if not math.isnan(b)]
    fig, axes = plt.subplots(1, 2 if with_sim else 1, figsize=(11 if with_sim else 6, 4), squeeze=False)
    names = distinct_cuts([s["label"] for s in series], LABEL_CELLS)
    labels = []
    for s in series:
        label = names[s["label"]]
        if not s["trial"]:
            label += " (empty)"
        elif all(math.isnan(b) for b in s["best"]):
            label += f" (no successful trial: {len(s['trial'])} failed)"
        labels.append(label)
        # a step drawn from one point is no line at all: its point is marked
        marker = "o" if sum(not math.isnan(b) for b in s["best"]) == 1 else None
        axes[0][0].step(s["trial"], s["best"], where="post", marker=marker)
        if with_sim:
            axes[0][1].step(s["simulated_s"], s["best"], where="post", marker=marker)
    axes[0][0].set_xlabel("evaluation (own trials and reused look-ups)" if include_reused else "trial (own measurements)")
    if with_sim:
        axes[0][1].set_xlabel("simulated tuning time (s)")
    for ax in axes[0]:
        ax.set_ylabel("best cost so far" + (" (s)" if all(s["time"] for s in series) else ""))
        if bests and min(bests) > 0:  # a log axis cannot show a cost of 0
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        # the lines and labels given, not set on the lines: matplotlib leaves out a label starting with '_'
        legend = ax.legend(ax.get_lines(), labels)
        for text in legend.get_texts():
            text.set_parse_math(False)  # a campaign name is its text: 'a$b$' is no formula
    with _no_glyph_warnings():
        fig.tight_layout()
    return fig


def write_image(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (``write_whole``: beside it first, renamed over it, so that a
    write that fails part-way leaves the file that was there); UsageError saying why it cannot."""
    from autotune.errors import UsageError
    from autotune.files import write_whole

    try:
        write_whole(path, lambda name: Path(name).write_bytes(data))
    except OSError as exc:
        shown = str(path) if len(str(path)) <= 200 else str(path)[:197] + "..."
        raise UsageError(f"cannot write the plot {shown!r}: {exc.strerror or exc}") from None


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
        import matplotlib.pyplot as plt

        from autotune.db.queries import resolve_filters

        database = open_db(db, existing=True)
        campaign = [resolve_filters(database, campaign=name)["campaign"] for name in campaign]  # as `trials` names them
        fig = convergence_figure(convergence_series(database, campaign, include_reused), include_reused)
        image = io.BytesIO()
        with _no_glyph_warnings():
            fig.savefig(image, format=output.suffix[1:].lower())
        plt.close(fig)
        write_image(output, image.getvalue())
        typer.echo(f"wrote {output}")
