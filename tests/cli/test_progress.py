"""Progress of long work (autotune/progress.py): the bars' totals match the work, the summary line ends it,
nothing is written with progress off, and standard output stays clean for --json.

Bars are checked by forcing them into a captured console (off a terminal they are not drawn) and by
the phases a Progress records; no timing is asserted."""

from __future__ import annotations

import io
import json
import re
import shutil

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.progress import Phase, Progress, make_progress

cli = CliRunner()


def captured(force: bool = True, terminal: bool = False, **kw) -> tuple[Progress, io.StringIO]:
    """A Progress named "work" writing into a string: not a terminal (bars only when forced), or one
    (``terminal``: what a campaign, which draws its own bar on a terminal only, needs to draw it)."""
    out = io.StringIO()
    console = Console(file=out, width=150, force_terminal=terminal or None, color_system=None)
    return Progress("work", force=force, console=console, **kw), out


def frames(out: io.StringIO) -> list[str]:
    """The lines a terminal would have shown (each redraw of a bar is one), control sequences left out."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    return [line for line in re.split(r"[\r\n]", text) if line.strip()]


# -- the helper -------------------------------------------------------------------------------------

def test_a_forced_bar_counts_to_its_total_and_the_summary_ends_the_output():
    bar, out = captured()
    assert bar.shown and bar.enabled
    with bar.phase("counting", total=12):
        for _ in range(12):
            bar.advance()
    with bar.phase("open-ended"):  # no total known beforehand
        bar.advance(5)
        bar.update(description="open-ended, renamed")
    bar.summary("12 things counted")
    assert bar.phases == [Phase("counting", 12, 12), Phase("open-ended, renamed", None, 5)]
    lines = out.getvalue().strip().splitlines()
    assert lines[0].startswith("counting") and "12/12" in lines[0] and "elapsed" in lines[0] and "left" in lines[0]
    assert lines[1].startswith("open-ended, renamed") and "5/?" in lines[1]
    assert lines[-1] == "work: 12 things counted" and bar.summary_line == lines[-1]


def test_disabled_progress_writes_nothing_but_still_records_the_phases():
    bar, out = captured(enabled=False)
    assert not bar.shown
    with bar.phase("quiet", total=3):
        bar.advance(3)
    bar.summary("done")
    assert out.getvalue() == "" and bar.phases == [Phase("quiet", 3, 3)] and bar.summary_line == "work: done"


def test_off_a_terminal_no_bar_is_drawn_but_the_summary_line_is():
    bar, out = captured(force=False)
    assert bar.enabled and not bar.shown
    with bar.phase("hidden", total=2):
        bar.advance(2)
    bar.summary("2 done")
    assert out.getvalue() == "work: 2 done\n"


def test_a_deferred_summary_is_written_once_when_asked():
    bar, out = captured(defer_summary=True)
    bar.summary("later")
    assert out.getvalue() == ""
    bar.write_summary()
    bar.write_summary()
    assert out.getvalue() == "work: later\n"


def test_make_progress_reads_a_drivers_argument(capsys):
    given, _ = captured()
    assert make_progress(given, "x") is given
    assert make_progress(True, "x").enabled and not make_progress(False, "x").enabled
    assert not make_progress(None, "x").enabled  # None: on only when stderr is a terminal (not under pytest)


# -- the graph search: the campaign's bar, then the end-to-end check's ------------------------------

@pytest.fixture
def small_resnet(tmp_path, monkeypatch):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from autotune.runners.graph import BACKENDS
    from autotune.search_spaces.graphs import model_zoo
    from autotune.testing.graphs import fake_backend

    monkeypatch.setitem(BACKENDS, "fake", fake_backend)  # op times as a fixed function of each op: fast
    path = tmp_path / "resnet50.onnx"
    onnx.save(model_zoo.build("resnet50", small=True), path)
    return path


def test_optimize_graph_shows_the_search_and_the_end_to_end_check(small_resnet, tmp_path):
    from autotune.drivers.graph import CHECK_UNITS, optimize_graph, summary_text

    bar, out = captured(terminal=True)
    r = optimize_graph(small_resnet, device="fake", trials=16, batch=8, rounds=3, campaign="pg",
                       db=f"sqlite:///{tmp_path / 'g.db'}", progress=bar)
    check = bar.phases[-1]
    # one unit for the estimated ops, CHECK_UNITS for the numeric check, 3 per timing (a confirming one adds 3)
    assert check.description == "end-to-end check" and check.completed == check.total
    assert check.total in (1 + CHECK_UNITS + 3, 1 + CHECK_UNITS + 6)
    lines = frames(out)
    assert any(line.startswith("pg ") and "16/16" in line for line in lines)  # the campaign's bar, same console
    assert any(line.startswith("end-to-end check ") and f"{check.total}/{check.total}" in line for line in lines)
    assert lines[-1] == f"work: {summary_text(r)}" == bar.summary_line
    assert summary_text(r).startswith("16 graphs evaluated in ")


# -- rule generation: graphs enumerated per domain, then the pairs verified --------------------------

def test_rules_generation_counts_the_graphs_and_verifies_every_pair_it_found():
    pytest.importorskip("z3", reason="rules are proved with z3-solver (the graphs extra)")
    from autotune.search_spaces.graphs import synthesis
    from autotune.search_spaces.graphs.generator import DOMAINS

    bar, out = captured()
    rep = synthesis.generate(2, z3_timeout_ms=500, domains=[DOMAINS[0]], progress=bar)
    enumerate_phase, verify_phase = bar.phases
    assert enumerate_phase == Phase("enumerating elementwise graphs (up to 2 ops)", None, rep["graphs"])
    assert verify_phase == Phase("verifying candidate pairs", rep["generated"], rep["generated"])
    assert rep["generated"] > 10 and f"{rep['generated']}/{rep['generated']}" in out.getvalue()


# -- imports: records of a Kernel Tuner cache, lines of a JSONL export ------------------------------

def test_imports_count_records_and_lines(tmp_path):
    from autotune.db import open_database
    from autotune.db.logs import export_file, import_file, import_kt

    src = open_database(f"sqlite:///{tmp_path / 'a.db'}")
    bar, _ = captured()
    _, _, n, added = import_kt(src, "example:pnpoly-rtx3090", batch=1000, progress=bar)
    assert n == added == 4092 and bar.phases == [Phase("importing pnpoly-rtx3090.json.gz", n, n)]
    path = tmp_path / "t.jsonl"
    trials = export_file(src, path)
    with open(path, "a") as f:
        f.write("\n")  # a blank line is read past, and counted
    lines = len(path.read_text().split("\n")) - 1  # the trials', the export's first and last, the blank one
    bar, _ = captured()
    read, added = import_file(open_database(f"sqlite:///{tmp_path / 'b.db'}"), path, batch=1000, progress=bar)
    assert read == added == trials and bar.phases == [Phase("importing t.jsonl", lines, lines)]


def test_import_commands_print_their_summary_once(tmp_path):
    """A cache's line, or an import's, is its summary: not repeated on standard error. Several caches end
    with one line of their totals (unless --no-progress)."""
    url = f"sqlite:///{tmp_path / 'k.db'}"
    r = cli.invoke(app, ["import-kt", "example:pnpoly-rtx3090", "--db", url])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("example:pnpoly-rtx3090: 4092 new of 4092 trials") and len(r.stdout.splitlines()) == 1
    assert r.stderr == ""
    from autotune.testing.caches import NAMES, turing_time, write_cache

    other = write_cache(tmp_path / "toy.json.gz", NAMES["turing"], turing_time)
    r = cli.invoke(app, ["import-kt", "example:pnpoly-rtx3090", other, "--db", url])
    assert r.exit_code == 0 and "0 new of 4092" in r.stdout and "32 new of 32" in r.stdout, r.output
    summary = r.stderr.strip().splitlines()
    assert len(summary) == 1 and summary[0].startswith("import-kt: 32 new of 4,124 trials from 2 cache files in ")
    r = cli.invoke(app, ["import-kt", "example:pnpoly-rtx3090", other, "--db", url, "--no-progress"])
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 2 and r.stderr == ""
    path = tmp_path / "t.jsonl"
    assert cli.invoke(app, ["export", "-o", str(path), "--db", url]).exit_code == 0
    for extra in ([], ["--no-progress"]):
        r = cli.invoke(app, ["import", str(path), "--db", f"sqlite:///{tmp_path / 'o.db'}", *extra])
        new = 4124 if not extra else 0
        assert r.exit_code == 0 and r.stdout == f"read 4124 trials from {path}, {new} new\n" and r.stderr == ""


# -- the parallel search and tune_kernel -------------------------------------------------------------

def test_parallelize_draws_the_campaigns_bar_and_a_summary(tmp_path):
    from autotune.drivers.parallel import parallelize, summary_text, warmup

    bar, out = captured(terminal=True)
    r = parallelize("rnnlm", "p100-4x4", trials=5, db=f"sqlite:///{tmp_path / 'p.db'}", campaign="pp", progress=bar)
    n = len(warmup(r.space)) + 5  # the baselines and seed layouts, and 5 more
    text = frames(out)
    assert any(line.startswith("pp ") and f"{n}/{n}" in line for line in text)
    assert text[-1] == f"work: {summary_text(r)}" and f"{n} strategies simulated" in text[-1]
    out_json = json.dumps(r.to_json())  # the result itself is untouched by progress
    assert json.loads(out_json)["simulations"] == n


def test_a_long_campaign_name_keeps_its_end_and_the_bar_one_line_on_a_narrow_terminal(tmp_path):
    from autotune.drivers.parallel import parallelize, warmup

    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system=None)
    bar = Progress("work", force=True, console=console)
    name = "a-long-campaign-name-[that]-goes-on-and-on-" * 2 + "evolutionary+xgb-seed0"
    r = parallelize("rnnlm", "p100-4x4", trials=5, db=f"sqlite:///{tmp_path / 'p.db'}", campaign=name, progress=bar)
    n = len(warmup(r.space)) + 5
    done = [line for line in frames(out) if f"{n}/{n}" in line]
    assert done and all(len(line) <= 100 for line in done)
    assert done[-1].startswith("…") and done[-1].split()[0].endswith("xgb-seed0")


VADD = "void vadd(float *c, const float *a, int n) { for (int i = 0; i < n; i++) c[i] = a[i] * k; }"


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("gcc") is None, reason="needs a C compiler")
def test_tune_kernel_progress_parameter(tmp_path, capsys):
    from autotune.drivers.kernel_tuner import tune_kernel

    def args():
        return [np.zeros(16, dtype=np.float32), np.ones(16, dtype=np.float32), np.int32(16)]

    bar, out = captured()
    results, env = tune_kernel("vadd", VADD, 16, args(), {"k": [1, 2, 3]}, db=f"sqlite:///{tmp_path / 'k.db'}",
                               quiet=True, progress=bar)
    assert len(results) == 3 and bar.phases[0] == Phase("compile check", 1, 1)  # the first one compiled
    last = out.getvalue().strip().splitlines()[-1]
    assert last.startswith(f"work: 3 configurations in campaign {env['campaign']} (0 failed), 3 measured in ")
    assert last.endswith(f"best {min(r['time'] for r in results):.4g} ms")
    capsys.readouterr()
    # the default: on only when stderr is a terminal (it is not here), so nothing is written to stderr
    tune_kernel("vadd", VADD, 16, args(), {"k": [1, 2]}, db=f"sqlite:///{tmp_path / 'k2.db'}", quiet=True)
    assert capsys.readouterr().err == ""
