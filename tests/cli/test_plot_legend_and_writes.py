"""`autotune plot convergence` as a user meets it: a campaign of one trial, names the legend must show as
written ('_' first, '$' in them, very long ones), and a plot that cannot be written or is a folder."""

from __future__ import annotations

import math
import warnings

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

import autotune
from autotune.cli.main import app
from autotune.cli.plot import LABEL_CELLS
from plot_helpers import figure

cli = CliRunner()
LONG = "a very long campaign name " * 8


def run(*args):
    return cli.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('plotnames') / 'p.db'}"
    for n, (name, trials) in enumerate((("single", 1), ("_underscore", 3), ("cost $x$ run", 3), (LONG + "one", 3),
                                        (LONG + "two", 3))):  # each a space of its own: no trial looked up
        autotune.minimize(lambda c: 1.0 + c["x"], {"x": [1, 2 + n]}, trials=trials, db=url, campaign=name,
                          cost_model=None, algorithm="random", seed=0, progress=False)
    return url


def test_a_campaign_of_one_trial_is_drawn_as_a_point(url):
    ax = figure(url, "single", "_underscore").axes[0]
    single, other = ax.get_lines()
    assert single.get_marker() == "o" and sum(not math.isnan(y) for y in single.get_ydata()) == 1
    assert other.get_marker() in (None, "None", "")  # a line of several points needs no marks


def test_the_legend_shows_names_as_written(url):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns when it leaves a '_' label out of the legend
        fig = figure(url, "_underscore", "cost $x$ run")
    texts = fig.axes[0].get_legend().get_texts()
    assert [t.get_text() for t in texts] == ["_underscore", "cost $x$ run"]
    assert not any(t.get_parse_math() for t in texts)  # '$x$' is part of the name, not a formula


def test_long_names_are_cut_in_the_legend_and_stay_told_apart(url):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "tight layout not applied" on standard error
        fig = figure(url, LONG + "one", LONG + "two")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert all(cell_len(label) <= LABEL_CELLS for label in labels) and len(set(labels)) == 2, labels
    assert labels[0].endswith("one") and labels[1].endswith("two")


@pytest.mark.parametrize("suffix, header", [(".png", b"\x89PNG\r\n\x1a\n"), (".svg", b"<?xml"), (".PDF", b"%PDF-")])
def test_the_file_written_is_the_image_its_name_says(url, tmp_path, suffix, header):
    out = tmp_path / f"p{suffix}"
    r = run("plot", "convergence", "--campaign", "single", "-o", out, "--db", url)
    assert r.exit_code == 0 and r.stdout == f"wrote {out}\n", r.output
    assert out.read_bytes().startswith(header)
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # nothing left beside it


def test_a_plot_that_cannot_be_written_is_one_line_of_error(url, tmp_path):
    link = tmp_path / "p.png"
    link.symlink_to(tmp_path / "gone" / "p.png")  # its folder exists; the file it names cannot be made
    r = run("plot", "convergence", "--campaign", "single", "-o", link, "--db", url)
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert r.stderr == f"error: cannot write the plot {str(link)!r}: No such file or directory\n"


def test_a_folder_as_the_output_is_said_to_be_one(url, tmp_path):
    r = run("plot", "convergence", "--campaign", "single", "-o", tmp_path, "--db", url)
    assert r.exit_code == 2 and r.stderr == f"error: cannot write the plot {str(tmp_path)!r}: it is a folder\n"


def test_an_output_under_a_file_says_the_folder_is_a_file(url, tmp_path):
    (tmp_path / "notes.txt").write_text("")
    out = tmp_path / "notes.txt" / "p.png"
    r = run("plot", "convergence", "--campaign", "single", "-o", out, "--db", url)
    assert r.exit_code == 2 and r.stderr == (f"error: cannot write the plot {str(out)!r}: the folder "
                                             f"{str(tmp_path / 'notes.txt')!r} is a file, not a folder\n")
