"""`autotune import -` (and a pipe such as /dev/stdin) reads a tuning log from standard input, once, line by
line, so that `autotune export -o - --db A | autotune import - --db B` copies a log."""

import io
import os
import threading
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import log_import, open_database
from autotune.db.logs import import_file, import_kt
from autotune.progress import Progress

cli = CliRunner()


@pytest.fixture
def exported(tmp_path) -> str:
    """The export of a database holding the bundled cache's trials, as written by `export -o -`."""
    db = open_database(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        import_kt(db, "example:pnpoly-rtx3090")
    finally:
        db.close()
    r = cli.invoke(app, ["export", "-o", "-", "--db", f"sqlite:///{tmp_path / 'a.db'}"])
    assert r.exit_code == 0, r.output
    return r.stdout


def test_import_dash_reads_the_export_written_to_standard_output(tmp_path, exported):
    n = sum('"candidate"' in line for line in exported.splitlines())
    url = f"sqlite:///{tmp_path / 'b.db'}"
    r = cli.invoke(app, ["import", "-", "--no-progress", "--db", url], input=exported)
    assert r.exit_code == 0, r.output
    assert f"read {n} trials from standard input, {n} new" in r.stdout
    r = cli.invoke(app, ["export", "-o", "-", "--db", url])
    assert r.exit_code == 0 and r.stdout == exported  # the copy is the same log


def test_a_bad_line_on_standard_input_names_it_and_leaves_no_database(tmp_path):
    r = cli.invoke(app, ["import", "-", "--db", f"sqlite:///{tmp_path / 'b.db'}"], input='{"x":\n')
    assert r.exit_code == 2 and "standard input:1 is not a valid line" in r.stderr, r.output
    assert not (tmp_path / "b.db").exists()


@pytest.mark.skipif(not os.path.isdir("/dev/fd"), reason="needs /dev/fd to name a pipe")
def test_a_pipe_is_read_once_without_counting_its_lines_first(tmp_path, exported, monkeypatch):
    def no_second_pass(path):
        raise AssertionError("a pipe's lines were counted before the import read them")

    monkeypatch.setattr(log_import, "count_lines", no_second_pass)
    r, w = os.pipe()

    def feed():
        try:
            with os.fdopen(w, "w", encoding="utf-8") as f:
                f.write(exported)
        except BrokenPipeError:  # the import stopped reading: the test fails on its error
            pass

    writer = threading.Thread(target=feed)
    writer.start()
    db = open_database(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        bar = Progress("import", force=True, console=Console(file=io.StringIO()))
        read, added = import_file(db, Path(f"/dev/fd/{r}"), progress=bar)
    finally:
        db.close()
        os.close(r)  # before the join: a writer blocked on a full pipe ends
        writer.join()
    assert read == added == sum('"candidate"' in line for line in exported.splitlines())
    assert bar.phases[0].total is None and bar.phases[0].completed > 0  # the bar counted up, without a total
