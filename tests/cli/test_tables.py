"""Default tables fit 100 columns with one line per row; --wide shows every column in full; csv and
json keep every column, raw."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta

import pandas as pd
import pytest
from rich.console import Console
from typer.testing import CliRunner

from autotune.cli.listings import print_table
from autotune.cli.main import app
from autotune.cli.models import MODEL_COLUMNS
from autotune.cli.query import BEST_COLUMNS, CAMPAIGN_COLUMNS, TRIAL_COLUMNS
from autotune.cli.tables import (
    Col,
    config_text,
    device_text,
    number,
    relative_time,
    seconds,
    short_key,
    shorten,
    size_bytes,
    task_labels,
)
from autotune.cli.transfer import DEVICE_COLUMNS, SIMILAR_COLUMNS
from autotune.db import open_database
from autotune.db.logs import import_kt
from autotune.testing.caches import NAMES, ampere_time, turing_time, write_cache

cli = CliRunner()
NOW = datetime(2026, 5, 20, 12, 0, 0)


def run(*args, env=None):
    # the width a pipe gets, whatever COLUMNS the test runner's environment holds (pytest-xdist's workers)
    return cli.invoke(app, [str(a) for a in args], env={"COLUMNS": "", **(env or {})})


def test_seconds_have_4_significant_digits_and_a_unit():
    assert seconds(0.0012341) == "1.234 ms"
    assert seconds(0.010605568) == "10.61 ms"
    assert seconds(12.5e-6) == "12.5 µs"
    assert seconds(3.2e-9) == "3.2 ns"
    assert seconds(3.21) == "3.21 s"
    assert seconds(0.99996) == "1 s"  # rounded before the unit is chosen
    assert seconds(12345.6) == "12,350 s"
    assert seconds(0.0) == "0 s"
    assert seconds(None) == seconds(float("nan")) == ""
    assert seconds(float("inf")) == "inf"


def test_a_minimized_functions_cost_has_no_unit_in_tables_and_stays_a_number_in_csv(tmp_path):
    from autotune import minimize

    url = f"sqlite:///{tmp_path / 'f.db'}"
    minimize(lambda c: (c["x"] - 3) ** 2 + 2.5, {"x": list(range(8))}, trials=8, db=url, campaign="bowl")
    import_kt(open_database(url), "example:pnpoly-rtx3090")  # a task whose cost is a time, beside it
    best = run("best", "--db", url).stdout
    bowl = next(line for line in best.splitlines() if "python-function" in line)
    assert bowl.split()[-2] == "2.5" and " s " not in bowl, best
    assert any("RTX 3090" in line and " ms " in line for line in best.splitlines()), best
    trials = run("trials", "--campaign", "bowl", "--db", url).stdout
    assert " s " not in trials and "2.5" in trials, trials
    assert "2.5" in run("campaigns", "--db", url).stdout.split("bowl")[-1].split("\n")[0]
    rows = json.loads(run("best", "--db", url, "--format", "json").stdout)
    assert {r["cost"] for r in rows if r["device"] == "python-function"} == {2.5}


def test_task_labels_name_the_task_and_its_short_key_where_two_tasks_share_a_name():
    assert task_labels(["gemm", "gemm"], ["a" * 16, "a" * 16]) == [None, None]  # one task: no column
    assert task_labels(["gemm", "conv"], ["a" * 16, "b" * 16]) == ["gemm", "conv"]
    assert task_labels(["scale", "scale", "gemm", "scale"], ["a" * 16, "b" * 16, "c" * 16, "a" * 16]) == [
        "scale aaaaaaaa", "scale bbbbbbbb", "gemm", "scale aaaaaaaa"]
    long = task_labels(["x" * 30, "x" * 30], ["a" * 16, "b" * 16])
    assert long == ["x" * 10 + "… aaaaaaaa", "x" * 10 + "… bbbbbbbb"]  # the name cut, the key whole, 20 cells


def test_relative_times_then_the_date_beyond_a_week():
    assert relative_time(NOW - timedelta(seconds=20), now=NOW) == "just now"
    assert relative_time(NOW - timedelta(minutes=3, seconds=10), now=NOW) == "3 min ago"
    assert relative_time(NOW - timedelta(hours=2, minutes=59), now=NOW) == "2 h ago"
    assert relative_time(NOW - timedelta(hours=30), now=NOW) == "yesterday"
    assert relative_time(NOW - timedelta(days=4, hours=1), now=NOW) == "4 days ago"
    assert relative_time(NOW - timedelta(days=8), now=NOW) == "2026-05-12"
    assert relative_time(pd.Timestamp(NOW - timedelta(minutes=5)), now=NOW) == "5 min ago"
    assert relative_time("2026-05-20T11:00:00", now=NOW) == "1 h ago"
    assert relative_time(NOW + timedelta(seconds=5), now=NOW) == "just now"  # a clock a little ahead
    assert relative_time(None) == relative_time(pd.NaT) == ""


def test_cells_keys_configs_and_cuts():
    assert short_key("0efbdfd8166f602c") == "0efbdfd8"
    assert config_text({"block": 64, "unroll": 2, "vec": True, "tile": [2, 4], "alpha": 0.123456}) == \
        "block=64 unroll=2 vec=true tile=[2,4] alpha=0.1235"
    assert config_text([["rule", 1]]) == '[["rule",1]]'
    assert device_text("NVIDIA GeForce RTX 3090") == "RTX 3090" and device_text("NVIDIA TITAN RTX") == "TITAN RTX"
    assert device_text("Intel(R) Xeon(R) Gold") == "Intel Xeon Gold"
    assert number(0.912345) == "0.9123" and number(40) == "40" and number(True) == "yes" and number(False) == ""
    assert size_bytes(141_000) == "138 KiB" and size_bytes(0) == "none"
    assert shorten("abcdefghij", 6) == "abcde…"
    assert shorten("replay-pnpoly-rtx3090-mcmc-seed0", 12, "start") == "…-mcmc-seed0"
    assert shorten("evolutionary+xgb", 14, "middle") == "evoluti…ry+xgb"
    assert shorten("short", 10, "middle") == "short"


LONG = "x" * 150


def _long_frames() -> dict[str, tuple[list[Col], pd.DataFrame]]:
    """Frames with every value as long as it gets, for each command's default layout."""
    stamp = datetime.now() - timedelta(days=3)
    camp = pd.DataFrame([{"campaign": "replay-" + LONG, "task": "task-" + LONG, "task_key": "f" * 16,
                          "device": "NVIDIA GeForce RTX 3060 Laptop GPU", "algorithm": "evolutionary+xgb",
                          "status": "simulated-budget", "trials": 123456, "reused": 98765, "evaluations": 222221,
                          "best_cost": 0.000123456, "best_cost_including_reused": 0.0001, "simulated_s": 1.0,
                          "created": stamp, "updated": stamp}] * 3)
    trials = pd.DataFrame([{"id": 1234567, "campaign": "c-" + LONG, "task": "task-" + LONG, "device": "NVIDIA " + LONG,
                            "status": "RUNTIME_ERROR", "cost": None, "config": {f"knob_{i}": i for i in range(40)},
                            "error": "Traceback (most recent call last):\n  File x\n" + LONG}] * 3)
    best = pd.DataFrame([{"task": LONG, "task_key": "a" * 16, "device": LONG, "rank": 10, "cost": 1.5,
                          "config": {f"k{i}": i for i in range(50)}, "candidate_key": "b" * 16}] * 2)
    transfer = pd.DataFrame([{"task": LONG, "task_key": "a" * 16, "device": LONG, "source": "transfer",
                              "from": ", ".join(f"{LONG} (similarity 0.9)" for _ in range(3)),
                              "config": {f"k{i}": i for i in range(50)}}])
    models = pd.DataFrame([{"id": 99999, "model": "graph-op-regression", "task": "task-" + LONG,
                            "device": "NVIDIA " + LONG, "campaign": "c-" + LONG, "n_samples": 123456,
                            "spearman": 0.123456, "top_k_recall": 0.5, "bytes": 10 ** 9, "pinned": True,
                            "created": stamp}] * 2)
    devices = pd.DataFrame([{"name": LONG, "kind": "simulated", "architecture": "Ada Lovelace Extra",
                             "compute_capability": "10.0", "sm_count": 144, "memory_bandwidth_gbs": 3352.0,
                             "boost_clock_mhz": 1980, "l2_kib": 51200, "key": "c" * 16}] * 2)
    similar = pd.DataFrame([{"device": LONG, "score": 0.123456, "property_score": 0.5, "rank_correlation": -0.25,
                             "common_configs": 4092, "why": "; ".join(["same architecture (Turing)"] * 10)}] * 2)
    return {"campaigns": (CAMPAIGN_COLUMNS, camp), "trials": (TRIAL_COLUMNS, trials), "best": (BEST_COLUMNS, best),
            "transfer": (BEST_COLUMNS, transfer), "models": (MODEL_COLUMNS, models),
            "devices": (DEVICE_COLUMNS, devices), "similar": (SIMILAR_COLUMNS, similar)}


@pytest.mark.parametrize("which", list(_long_frames()))
def test_default_layouts_fit_100_columns_one_line_per_row_even_with_long_values(which):
    columns, df = _long_frames()[which]
    console = Console(width=100, record=True, file=io.StringIO())
    title = "a title " + LONG
    print_table(df, title=title, columns=columns, console=console)
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 100, "\n".join(lines)
    head = next(i for i, line in enumerate(lines) if line.startswith("─")) - 1  # the header's line
    assert "".join("".join(lines[:head]).split()) == "".join(title.split()), "the title is folded, never cut"
    assert len(lines) == head + 2 + len(df), "\n".join(lines)  # title, header and rule, one line per row
    assert "…" in lines[head + 2]  # long values are cut, not folded


def test_a_wider_console_gives_the_flexible_columns_more_room():
    columns, df = _long_frames()["trials"]
    widths = []
    for width in (100, 160):
        console = Console(width=width, record=True, file=io.StringIO())
        print_table(df, columns=columns, console=console)
        lines = console.export_text().splitlines()
        assert max(map(len, lines)) <= width and len(lines) == 2 + len(df)
        widths.append(len(lines[2].rstrip()))
    assert widths[1] > widths[0] + 40


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """Two replay campaigns (one with the xgb cost model) and two devices' imported trials of a toy kernel."""
    tmp = tmp_path_factory.mktemp("tables")
    url = f"sqlite:///{tmp / 't.db'}"
    for args in (["--algorithm", "mcmc", "--cost-model", "xgb"], ["--algorithm", "random", "--cost-model", "none"]):
        r = run("tune", "replay", "--cache", "example:pnpoly-rtx3090", "--trials", 24, *args, "--db", url,
                "--no-progress", "--json")
        assert r.exit_code == 0, r.output
    db = open_database(url)
    import_kt(db, write_cache(tmp / "titan.json.gz", NAMES["turing"], turing_time))
    import_kt(db, write_cache(tmp / "r3090.json.gz", NAMES["ampere"], ampere_time))
    db.close()
    return url


def _table(r, rows: int, width: int = 100) -> list[str]:
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(map(len, lines)) <= width, r.stdout
    assert len(lines) == rows + 2, r.stdout  # header, rule, one line per row
    return lines


def test_campaigns_table(tuned):
    lines = _table(run("campaigns", "--db", tuned), 2)
    assert lines[0].split() == ["campaign", "task", "device", "algorithm", "status", "trials", "reused", "errors",
                                "best", "updated"]  # the recording's failed configurations: errors
    assert all(line.rstrip().endswith("just now") or line.rstrip().endswith("min ago") for line in lines[2:])
    assert " ms " in lines[2] + " " and "RTX 3090" in lines[2] and "NVIDIA" not in lines[2]
    assert "…" in lines[2]  # the long derived campaign names, cut
    assert "seed0" in lines[2] and "seed0" in lines[3]
    wide = run("campaigns", "--wide", "--db", tuned).stdout
    assert "replay-pnpoly-rtx3090-mcmc+xgb-seed0" in wide and "0efbdfd8166f602c" in wide  # full name, full key
    assert "simulated_s" in wide and "created" in wide
    assert run("campaigns", "list", "--db", tuned).stdout == run("campaigns", "--db", tuned).stdout


def test_trials_table_and_wider_terminal(tuned):
    lines = _table(run("trials", "--limit", 5, "--db", tuned), 5)
    assert lines[0].split() == ["id", "campaign", "device", "status", "cost", "config"]  # no error: none failed
    assert "between_method=" in lines[2] and " ms " in lines[2]
    camp = _table(run("trials", "--campaign", "replay-pnpoly-rtx3090-random-seed0", "--db", tuned), 24)
    assert "campaign" not in camp[0].split()  # the filter's value is not repeated on every row
    wide = _table(run("trials", "--limit", 5, "--db", tuned, env={"COLUMNS": "200"}), 5, width=200)
    assert max(map(len, wide)) > 100 and "use_method=" in wide[2]
    full = run("trials", "--limit", 2, "--wide", "--db", tuned).stdout
    assert "candidate_key" in full and "worker" in full and "0efbdfd8166f602c" in full


def test_a_campaigns_trials_name_who_measured_the_ones_it_looked_up(tmp_path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    for name in ("first", "second"):  # the same grid twice: the second looks up every trial the first measured
        r = run("tune", "replay", "--cache", "example:pnpoly-rtx3090", "--trials", 5, "--algorithm", "grid",
                "--cost-model", "none", "--campaign", name, "--db", url, "--no-progress", "--json")
        assert r.exit_code == 0, r.output
    first = _table(run("trials", "--campaign", "first", "--db", url), 5)
    assert "campaign" not in first[0].split()
    second = _table(run("trials", "--campaign", "second", "--db", url), 10)  # 5 looked up, 5 of its own budget
    assert second[0].split()[:2] == ["id", "campaign"]
    assert [line.split()[1] for line in second[2:]] == ["first"] * 5 + ["second"] * 5


def test_best_models_and_devices_tables(tuned):
    lines = _table(run("best", "--db", tuned), 3)
    assert lines[0].split() == ["task", "task", "key", "device", "cost", "config"]
    assert "0efbdfd8 " in r_join(lines) and "0efbdfd8166f602c" not in r_join(lines)
    assert "rank" in _table(run("best", "--k", 2, "--db", tuned), 6)[0]
    transfer = _table(run("best", "--task", "toy_kernel", "--device", NAMES["turing2"], "--db", tuned), 1)
    no_task = run("best", "--device", "H100", "--db", tuned)  # a known GPU without trials needs the task
    assert no_task.exit_code == 2 and "name the --task too" in no_task.stderr
    assert transfer[0].split()[-3:] == ["source", "from", "config"] and "transfer" in transfer[2]
    models = run("models", "--db", tuned)
    n = len(json.loads(run("models", "--format", "json", "--db", tuned).stdout))
    lines = _table(models, n)
    assert lines[0].split() == ["id", "model", "task", "device", "campaign", "samples", "spearman", "top-k", "recall",
                                "weights", "created"]  # no model is pinned: no pinned column
    assert "pruned" in r_join(lines[2:-1]) and "KiB" in lines[-1]  # only the latest model keeps its weights
    latest = _table(run("models", "--latest", "--db", tuned), 1)
    assert latest[2].split()[0] == lines[-1].split()[0]
    devices = _table(run("devices", "--db", tuned), 2)
    assert devices[0].split() == ["name", "kind", "arch", "cc", "SMs", "mem", "GB/s", "boost", "MHz", "L2", "KiB",
                                  "key"]
    assert NAMES["turing"] in r_join(devices)  # the devices table shows names in full
    similar = run("devices", "--similar-to", NAMES["turing"], "--db", tuned)
    assert similar.exit_code == 0 and max(map(len, similar.stdout.splitlines())) <= 100
    assert len(similar.stdout.splitlines()) == 1 + 2 + 1  # title, header, rule, the other GPU


def r_join(lines: list[str]) -> str:
    return "\n".join(lines)


def test_csv_and_json_keep_every_column_raw(tuned):
    camps = json.loads(run("campaigns", "--format", "json", "--db", tuned).stdout)
    assert set(camps[0]) >= {"campaign", "task", "task_key", "device", "algorithm", "status", "trials", "reused",
                             "best_cost", "simulated_s", "created", "updated"}
    assert len(camps[0]["task_key"]) == 16 and isinstance(camps[0]["best_cost"], float)
    assert camps[0]["device"] == NAMES["ampere"]
    csv = run("campaigns", "--format", "csv", "--db", tuned).stdout.splitlines()
    assert csv[0].startswith("campaign,task,task_key,device,algorithm,status,trials,reused,best_cost,simulated_s")
    trials = json.loads(run("trials", "--limit", 3, "--format", "json", "--db", tuned).stdout)
    assert set(trials[0]) >= {"id", "campaign", "task", "task_key", "device", "candidate_key", "config", "status",
                              "cost", "repeats", "predicted", "error", "build_s", "run_s", "simulated_s", "created",
                              "worker"}
    assert isinstance(trials[0]["config"], dict) and isinstance(trials[0]["cost"], float)
    best = json.loads(run("best", "--format", "json", "--db", tuned).stdout)
    assert set(best[0]) == {"task", "task_key", "device", "rank", "cost", "config", "candidate_key"}
    models = json.loads(run("models", "--format", "json", "--db", tuned).stdout)
    assert set(models[0]) == {"id", "model", "task", "device", "campaign", "n_samples", "bytes", "created", "pinned",
                              "spearman", "top_k_recall"}


def test_json_and_csv_output_keep_raw_values(capsys):
    from autotune.cli.listings import write_frame, write_pages

    df = pd.DataFrame({"cost": [1.0799999814e-05, float("nan")], "config": [{"a": 1}, {"a": 2}],
                       "created": pd.to_datetime(["2026-01-02 03:04:05.123456", None])})
    write_frame(df, "json")
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["cost"] == 1.0799999814e-05 and rows[1]["cost"] is None  # every digit; NaN as null
    assert rows[0]["created"] == "2026-01-02T03:04:05.123456" and rows[1]["created"] is None
    assert rows[0]["config"] == {"a": 1}
    empty = df.iloc[:0]
    for fmt in ("csv", "json"):  # an empty frame with a datetime column is still written
        write_pages(iter([empty]), fmt)
    assert capsys.readouterr().out == "cost,config,created\n[]\n"


def test_on_a_narrow_terminal_the_spare_columns_go_first_and_the_table_fits():
    """A table that cannot fit the console even with its text columns narrowed leaves out its spare columns,
    the highest first (the campaigns table's updated, then reused), rather than run past the edge."""
    from autotune.cli.tables import narrow_lines

    now = datetime.now()
    df = pd.DataFrame({"campaign": ["replay-pnpoly-rtx3090-evolutionary+xgb-seed0", "replay-pnpoly-random-seed0"],
                       "task": ["cn_pnpoly", "cn_pnpoly"], "device": ["NVIDIA GeForce RTX 3090"] * 2,
                       "algorithm": ["evolutionary+xgb", "random"], "status": ["finished"] * 2, "trials": [20, 20],
                       "reused": [0, 0], "errors": [0, 3], "best_cost": [9.3e-3, 1.08e-2], "updated": [now, now]})
    wide, head = narrow_lines(df, CAMPAIGN_COLUMNS, width=100)
    assert wide[head].split()[-2:] == ["best", "updated"] and "reused" in wide[head]
    for width, gone in ((80, {"updated"}), (76, {"updated", "reused"})):
        lines, head = narrow_lines(df, CAMPAIGN_COLUMNS, width=width)
        assert max(map(len, lines)) <= width, lines
        headers = set(lines[head].split())
        assert not headers & gone and {"campaign", "trials", "best"} <= headers
