"""Ctrl-C in `autotune tune graph`: the resume line printed gives exactly the options the run was given."""

import shlex

import pytest
from typer.testing import CliRunner

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from autotune.cli.main import app
from autotune.runners.graph import BACKENDS, GraphCostRunner
from autotune.search_spaces.graphs import model_zoo
from autotune.testing.fakes import interrupting
from autotune.testing.graphs import fake_backend


@pytest.fixture
def nasrnn(tmp_path):
    path = tmp_path / "nasrnn.onnx"
    onnx.save(model_zoo.build("nasrnn", small=True), path)
    return path


def _resume_line(args: list[str], monkeypatch) -> list[str]:
    """The words of the command printed by `tune graph ARGS` interrupted at its second batch of graphs."""
    monkeypatch.setitem(BACKENDS, "fake", fake_backend)
    with monkeypatch.context() as m:
        m.setattr("autotune.drivers.graph.GraphCostRunner", interrupting(GraphCostRunner, 1))
        r = CliRunner().invoke(app, ["tune", "graph", *args, "--no-progress"])
    assert r.exit_code == 130, r.output
    line = [x for x in r.stderr.splitlines() if x.startswith("interrupted: ")][-1]
    return shlex.split(line.split("resume with: ", 1)[1])


@pytest.mark.parametrize("cap", [[], ["--max-measure", "400"], ["--max-measure", "5"]])
def test_the_resume_line_gives_the_options_of_the_run_and_no_other(nasrnn, tmp_path, monkeypatch, cap):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    options = ["--device", "fake", "--trials", "40", "--batch", "8", "--rounds", "3", *cap, "-o",
               str(tmp_path / "o.onnx"), "--db", url]
    words = _resume_line([str(nasrnn), *options], monkeypatch)
    assert words[:4] == ["autotune", "tune", "graph", str(nasrnn)]
    given = dict(zip(options[::2], options[1::2]))
    printed = dict(zip(words[4::2], words[5::2]))
    assert printed.pop("--campaign") and printed == given
