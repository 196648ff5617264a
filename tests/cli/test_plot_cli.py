"""`autotune plot convergence`: what the figure says of campaigns without a success, of a best cost of 0 and of
costs that are not times, and a plot written where it cannot be."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

import autotune
from autotune.cli.main import app
from plot_helpers import figure

cli = CliRunner()


def run(*args):
    return cli.invoke(app, [str(a) for a in args])


def never_works(config: dict) -> float:
    raise RuntimeError("no")


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> str:
    """Campaigns of minimized functions: one whose every trial failed, one that reaches 0, and one of a
    replayed kernel (whose costs are seconds)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('plot') / 'p.db'}"
    for name, objective in (("failed", never_works), ("zero", lambda c: float(c["x"] - 1)),
                            ("двойка-日本", lambda c: 2.0 + c["x"])):
        autotune.minimize(objective, {"x": [1, 2, 3]}, trials=3, db=url, campaign=name, cost_model=None,
                          algorithm="random", progress=False)
    r = run("tune", "replay", "--cache", "example:pnpoly-rtx3090", "--trials", 8, "--cost-model", "none",
            "--campaign", "kernel", "--no-progress", "--db", url)
    assert r.exit_code == 0, r.output
    return url


def test_a_campaign_without_a_success_says_so_in_the_legend(url):
    fig = figure(url, "failed", "двойка-日本")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["failed (no successful trial: 3 failed)", "двойка-日本"]


def test_a_best_cost_of_zero_is_drawn_on_a_linear_axis(url):
    ax = figure(url, "zero").axes[0]
    assert ax.get_yscale() == "linear"
    assert min(y for line in ax.get_lines() for y in line.get_ydata() if not math.isnan(y)) == 0.0
    assert figure(url, "двойка-日本").axes[0].get_yscale() == "log"


def test_costs_are_in_seconds_only_when_they_are_times(url):
    assert [ax.get_ylabel() for ax in figure(url, "kernel").axes] == ["best cost so far (s)"] * 2
    assert figure(url, "zero").axes[0].get_ylabel() == "best cost so far"
    assert figure(url, "kernel", "zero").axes[0].get_ylabel() == "best cost so far"


def test_a_campaign_named_twice_is_drawn_once(url):
    assert len(figure(url, "kernel", "kernel").axes[0].get_lines()) == 1


def test_the_command_writes_the_plot_and_says_nothing_of_missing_glyphs(url, tmp_path):
    out = tmp_path / "p.png"
    r = run("plot", "convergence", "--campaign", "двойка-日本", "--campaign", "failed", "-o", out, "--db", url)
    assert r.exit_code == 0 and r.stdout == f"wrote {out}\n" and r.stderr == "", r.output
    assert out.stat().st_size > 0
    missing = tmp_path / "no" / "p.png"
    r = run("plot", "convergence", "--campaign", "kernel", "-o", missing, "--db", url)
    assert r.exit_code == 2 and "does not exist" in r.stderr and not missing.parent.exists()
