"""Export of tuned configurations (JSON, C header compiled with gcc) and the transfer CLI commands."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import open_database, queries
from autotune.db.logs import import_kt
from autotune.search_spaces.kernels.macros import macro_name
from autotune.testing.caches import NAMES, ampere_time, turing_time, write_cache
from autotune.transfer.export import c_header, export_configs, fallback_config
from autotune.errors import UsageError
from autotune.transfer.dispatch import best_config
from autotune.types import Candidate, Device, Measurement, Status, Task

cli = CliRunner()


def test_fallback_minimises_the_worst_ratio():
    c = [Candidate({"v": i}) for i in range(3)]
    # device A: 1, 2, 1.5; device B: 3, 1, 1.5 -> ratios A (1, 2, 1.5), B (3, 1, 1.5): worst 3, 2, 1.5
    a = [Measurement(c[0], Status.OK, cost=1.0), Measurement(c[1], Status.OK, cost=2.0), Measurement(c[2], Status.OK, cost=1.5)]
    b = [Measurement(c[0], Status.OK, cost=3.0), Measurement(c[1], Status.OK, cost=1.0), Measurement(c[2], Status.OK, cost=1.5)]
    fb = fallback_config({"a": a, "b": b})
    assert fb["config"] == {"v": 2} and fb["worst_ratio"] == 1.5


def test_c_header_comments_say_only_what_is_known():
    doc = {"task": "f", "task_key": "k", "cost_unit": "", "devices": [{"device": "cpu", "config": {"v": 1}, "cost": 2.5}],
           "fallback": {"config": {"v": 1}, "worst_ratio": None, "basis": "no configuration measured on all devices"}}
    text = c_header(doc)
    assert "best measured cost 2.5 */" in text  # a minimized function's value has no unit
    assert "None" not in text and "worst ratio" not in text
    doc.update(cost_unit="s", fallback={**doc["fallback"], "worst_ratio": 1.25, "basis": "measured on all 1 devices"})
    text = c_header(doc)
    assert "best measured cost 2.5 s */" in text and "worst ratio to each device's best 1.25 */" in text


def test_c_header_compiles_and_matches_the_database_best(recorded):
    db, _, task, tmp = recorded
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    doc = export_configs(db, task)
    header = tmp / "cfg.h"
    header.write_text(c_header(doc))
    prog = tmp / "main.c"
    prefix = macro_name(task.name)
    prog.write_text(f'#include <stdio.h>\n#include "cfg.h"\nint main(void) {{ printf("%s %d %d %d\\n", {prefix}_DEVICE, '
                    f'{prefix}_A, {prefix}_B, {prefix}_C); return 0; }}\n')
    best = queries.best(db, task=task.key)
    assert len(best) == 2
    for _, row in best.iterrows():
        exe = tmp / f"main_{macro_name(row['device'])}"
        subprocess.run(["gcc", "-Wall", "-Werror", f"-DAUTOTUNE_DEVICE_{macro_name(row['device'])}", "-I", str(tmp),
                        str(prog), "-o", str(exe)], check=True)
        out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
        assert out[0] == row["device"].split()[0]
        cfg = row["config"]
        assert [int(x) for x in out[-3:]] == [cfg["a"], cfg["b"], cfg["c"]]
    subprocess.run(["gcc", "-Wall", "-Werror", "-I", str(tmp), str(prog), "-o", str(tmp / "fb")], check=True)
    out = subprocess.run([str(tmp / "fb")], capture_output=True, text=True, check=True).stdout.split()
    fb = doc["fallback"]["config"]
    assert out[0] == "fallback" and [int(x) for x in out[1:]] == [fb["a"], fb["b"], fb["c"]]


def test_cli_export_devices_best_and_tune_with_transfer(recorded):
    db, url, task, tmp = recorded
    res = cli.invoke(app, ["export-configs", "--task", task.name, "--format", "json", "--db", url])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert {d["device"] for d in doc["devices"]} == {NAMES["turing"], NAMES["ampere"]}
    res = cli.invoke(app, ["export-configs", "--task", task.name, "--devices", NAMES["turing"], "--format", "c-header",
                           "-o", str(tmp / "one.h"), "--db", url])
    assert res.exit_code == 0 and "AUTOTUNE_DEVICE_NVIDIA_TITAN_RTX" in (tmp / "one.h").read_text()
    res = cli.invoke(app, ["export-configs", "--task", task.name, "--format", "yaml", "--db", url])
    assert res.exit_code == 2 and "unknown format" in res.output
    res = cli.invoke(app, ["devices", "--json", "--db", url])
    assert res.exit_code == 0 and len(json.loads(res.stdout)["devices"]) == 2
    res = cli.invoke(app, ["devices", "--similar-to", NAMES["turing2"], "--json", "--db", url])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["similar"][0]["device"] == NAMES["turing"]
    res = cli.invoke(app, ["best", "--task", task.name, "--device", NAMES["turing2"], "--format", "json", "--db", url])
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout)[0]
    assert row["source"] == "transfer" and NAMES["turing"] in row["from"] and row["config"] == {"a": 4, "b": 64, "c": 1}
    # tuning the 2080 Ti warm-started from the TITAN RTX measures the TITAN's best first
    cache = write_cache(tmp / "ti.json.gz", NAMES["turing2"], lambda a, b, c: 2 * turing_time(a, b, c))
    res = cli.invoke(app, ["tune", "replay", "--cache", cache, "--transfer-from", "auto", "--trials", "4", "--batch", "2",
                           "--no-progress", "--json", "--db", url])
    assert res.exit_code == 0, res.output
    assert "warm start from: " + NAMES["turing"] in res.output
    trials = queries.trials(db, device=NAMES["turing2"])
    assert trials.iloc[0]["config"] == {"a": 4, "b": 64, "c": 1}
    res = cli.invoke(app, ["tune", "replay", "--cache", cache, "--transfer-from", "No Such GPU", "--trials", "2",
                           "--no-progress", "--db", url])
    assert res.exit_code == 2 and "no successful measurement" in res.output


def test_a_warm_started_campaign_keeps_its_sources_for_workers_and_resumes(recorded):
    from autotune.campaign.resume import resume_command
    from autotune.drivers.scale import join_campaign

    db, url, _, tmp = recorded
    cache = write_cache(tmp / "ti.json.gz", NAMES["turing2"], lambda a, b, c: 2 * turing_time(a, b, c))
    args = ["tune", "replay", "--cache", cache, "--trials", "4", "--batch", "2", "--no-progress", "--db", url,
            "--campaign", "warm"]
    assert cli.invoke(app, [*args, "--transfer-from", "auto"]).exit_code == 0
    recipe = db.campaign("warm").options["recipe"]
    assert recipe["args"]["transfer_from"] == "auto" and recipe["args"]["transfer_top"] == 8
    assert "--transfer-from auto --campaign warm" in resume_command("warm", recipe, db)
    out = join_campaign("warm", url)  # a worker warm-starts from the same sources: the same algorithm
    assert out["trials"] == 4 and out["measured_here"] == 0
    res = cli.invoke(app, [*args, "--transfer-from", NAMES["turing"]])
    assert res.exit_code == 2 and "was warm-started with --transfer-from 'auto'" in res.output, res.output
    res = cli.invoke(app, [*args, "--trials", "6", "--transfer-from", "auto"])
    assert res.exit_code == 0 and db.campaign("warm").status == "finished"
    assert len(queries.trials(db, campaign="warm")) == 6


def _warm_from(output: str) -> str:
    return next(line for line in output.splitlines() if line.startswith("warm start from: "))


def test_a_resumed_or_joined_warm_start_uses_the_devices_it_started_from(recorded, capsys):
    """`auto` is resolved once, when the campaign starts: a resume and a worker after a third GPU's import
    (which `auto` would now pick over the RTX 3090) warm-start from the TITAN RTX and the RTX 3090 again."""
    from autotune.drivers.scale import join_campaign

    db, url, _, tmp = recorded
    cache = write_cache(tmp / "ti.json.gz", NAMES["turing2"], lambda a, b, c: 2 * turing_time(a, b, c))
    args = ["tune", "replay", "--cache", cache, "--transfer-from", "auto", "--batch", "2", "--no-progress", "--db", url]
    res = cli.invoke(app, [*args, "--trials", "4"])
    started = f"warm start from: {NAMES['turing']}, {NAMES['ampere']}"
    assert res.exit_code == 0 and _warm_from(res.output) == started, res.output
    name = "replay-ti-warm-start+evolutionary-seed0"
    import_kt(db, write_cache(tmp / "t4.json.gz", "Tesla T4", lambda a, b, c: 3 * turing_time(a, b, c)))
    fresh = cli.invoke(app, [*args, "--trials", "4", "--campaign", "new"])  # a new campaign resolves auto now
    assert _warm_from(fresh.output) == f"warm start from: {NAMES['turing']}, Tesla T4", fresh.output
    res = cli.invoke(app, [*args, "--trials", "6"])  # the same command again: a resume
    assert res.exit_code == 0 and "resumed" in res.output and _warm_from(res.output) == started, res.output
    capsys.readouterr()
    out = join_campaign(name, url)
    assert out["trials"] == 6 and _warm_from(capsys.readouterr().err) == started
    kept = db.campaign(name).options["recipe"]["sources"]  # the devices' keys, with their names
    assert list(kept.values()) == [NAMES["turing"], NAMES["ampere"]] and all(len(k) > 8 for k in kept)


def test_a_warm_started_campaign_whose_source_devices_are_gone_is_refused(recorded):
    """A resume whose stored source devices no longer measured the task is refused, naming them; a campaign
    stored before the sources were kept (no "sources" in its recipe) resolves --transfer-from as it did."""
    from sqlalchemy import delete, select, update

    from autotune.db.models import CampaignRow, DeviceRow, TrialRow

    db, url, _, tmp = recorded
    cache = write_cache(tmp / "ti.json.gz", NAMES["turing2"], lambda a, b, c: 2 * turing_time(a, b, c))
    args = ["tune", "replay", "--cache", cache, "--batch", "2", "--no-progress", "--db", url, "--campaign", "warm"]
    assert cli.invoke(app, [*args, "--trials", "4", "--transfer-from", NAMES["ampere"].lower()]).exit_code == 0
    options = db.campaign("warm").options
    with db.session() as s:
        gone = s.scalar(select(DeviceRow.id).where(DeviceRow.name == NAMES["ampere"]))
        s.execute(delete(TrialRow).where(TrialRow.device_id == gone))
    res = cli.invoke(app, [*args, "--trials", "6", "--transfer-from", NAMES["ampere"].lower()])
    assert res.exit_code == 2, res.output
    assert f"campaign 'warm' was warm-started from {NAMES['ampere']!r}" in res.output
    assert "--fresh" in res.output and len(queries.trials(db, campaign="warm")) == 4
    import_kt(db, write_cache(tmp / "r3090.json.gz", NAMES["ampere"], ampere_time))  # a stored-before campaign:
    old = {**options, "recipe": {k: v for k, v in options["recipe"].items() if k != "sources"}}
    with db.session() as s:
        s.execute(update(CampaignRow).where(CampaignRow.name == "warm").values(options=old))
    res = cli.invoke(app, [*args, "--trials", "6", "--transfer-from", NAMES["ampere"].lower()])
    assert res.exit_code == 0 and _warm_from(res.output) == f"warm start from: {NAMES['ampere']}", res.output


def test_replay_default_names_of_two_kernels_recorded_on_one_gpu_do_not_collide(tmp_path):
    url = f"sqlite:///{tmp_path / 'k.db'}"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = write_cache(tmp_path / "a" / "RTX_Titan.json.gz", NAMES["turing"], turing_time)
    other = write_cache(tmp_path / "b" / "RTX_Titan.json.gz", NAMES["turing"], turing_time, kernel="other_kernel")
    names = []
    for cache in (first, other, other):
        res = cli.invoke(app, ["tune", "replay", "--cache", cache, "--trials", "3", "--no-progress", "--json",
                               "--db", url])
        assert res.exit_code == 0, res.output
        names.append(json.loads(res.stdout.strip().splitlines()[-1])["campaign"])
    assert names[0] == "replay-RTX_Titan-evolutionary+xgb-seed0"
    assert names[1] == names[2] == "replay-other_kernel-RTX_Titan-evolutionary+xgb-seed0"  # and resumes


def test_a_device_name_stored_twice_exports_its_newest_device_and_colliding_names_are_refused(tmp_path):
    """A GPU measured again after a driver update is a second device of the same name: the header holds the
    newer one's best (as best_config answers the name), not whichever was stored first; two names that would
    share one AUTOTUNE_DEVICE_ macro, and a device whose every measurement failed, are refused, never dropped."""
    db = open_database(f"sqlite:///{tmp_path / 'd.db'}")
    try:
        task, *_ = import_kt(db, write_cache(tmp_path / "titan.json.gz", NAMES["turing"], turing_time))
        c = [Candidate({"a": a, "b": 64, "c": 1}) for a in (1, 2, 4, 8)]
        old = Device("GPU X", "cuda", {"driver_version": 1})
        new = Device("GPU X", "cuda", {"driver_version": 2})
        db.add_trials(task, old, [Measurement(x, Status.OK, cost=1.0 + i) for i, x in enumerate(c)])  # best a=1
        db.add_trials(task, new, [Measurement(x, Status.OK, cost=4.0 - i) for i, x in enumerate(c)])  # best a=8
        doc = export_configs(db, task)
        rows = {r["key"]: r for r in doc["devices"]}
        assert rows[old.key]["superseded_by"] == new.key and "superseded_by" not in rows[new.key]
        assert best_config(task, "GPU X", db=db).config == rows[new.key]["config"] == {"a": 8, "b": 64, "c": 1}
        text = c_header(doc)
        block = text[text.index("defined(AUTOTUNE_DEVICE_GPU_X)"):]
        assert text.count("defined(AUTOTUNE_DEVICE_GPU_X)") == 1 and "#define TOY_KERNEL_A 8" in block.split("#elif")[0]
        # the fallback is over the devices the header answers for, not the superseded row
        assert doc["fallback"]["basis"] == "measured on all 2 devices"
        db.add_trials(task, Device("GPU-X", "cuda", {}), [Measurement(c[0], Status.OK, cost=1.0)])
        with pytest.raises(UsageError, match="device 'GPU X' and device 'GPU-X' would both be the macro AUTOTUNE_DEVICE_GPU_X"):
            c_header(export_configs(db, task))
        assert "GPU-X" in c_header(export_configs(db, task, [NAMES["turing"], "GPU-X"]))
        db.add_trials(task, Device("GPU F", "cuda", {}), [Measurement(c[0], Status.RUNTIME_ERROR)])
        with pytest.raises(UsageError, match="'GPU F' has no successful measurement"):
            export_configs(db, task, [NAMES["turing"], "GPU F"])
    finally:
        db.close()


def test_an_interrupted_export_leaves_the_file_that_was_there(recorded, monkeypatch):
    import os

    _, url, task, tmp = recorded
    out = tmp / "cfg.h"
    out.write_text("/* the header shipped last time */\n")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    res = cli.invoke(app, ["export-configs", "--task", task.name, "--format", "c-header", "-o", str(out), "--db", url])
    assert res.exit_code != 0
    assert out.read_text() == "/* the header shipped last time */\n"
    assert sorted(p.name for p in tmp.iterdir() if p.name.startswith(".cfg.h")) == []  # no half-written file left
    monkeypatch.undo()
    res = cli.invoke(app, ["export-configs", "--task", task.name, "--format", "c-header", "-o", str(out), "--db", url])
    assert res.exit_code == 0 and "#define TOY_KERNEL_A" in out.read_text()
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_devices_similar_to_lists_the_other_devices_and_says_which_was_compared(recorded):
    """The device asked about is not its own answer: neither itself, nor its name stored again (a driver
    update), nor, for a GPU named from the known table, the stored GPU of that model; table and JSON agree."""
    from autotune.db.transfer import find_device

    db, url, task, _ = recorded
    titan = find_device(db, NAMES["turing"])
    again = Device(titan.name, titan.kind, {**titan.properties, "driver_version": 2})
    c = [Candidate({"a": a, "b": 64, "c": 1}) for a in (1, 2, 4, 8, 16)]
    db.add_trials(task, again, [Measurement(x, Status.OK, cost=1.0 + i) for i, x in enumerate(c)])
    for asked, key in ((NAMES["turing"], again.key), (titan.key[:8], titan.key), ("TITAN RTX", None)):
        res = cli.invoke(app, ["devices", "--similar-to", asked, "--json", "--db", url])
        assert res.exit_code == 0, res.output
        out = json.loads(res.stdout)
        assert out["key"] == key and [r["device"] for r in out["similar"]] == [NAMES["ampere"]], (asked, out)
    # COLUMNS unset (pytest-xdist sets 80): --wide then prints each row on one line, as a pipe or a file gets it
    res = cli.invoke(app, ["devices", "--similar-to", NAMES["turing"], "--wide", "--db", url], env={"COLUMNS": ""})
    assert res.exit_code == 0 and f"devices similar to {NAMES['turing']} (key {again.key[:8]})" in res.stdout
    assert res.stdout.count(NAMES["turing"]) == 1 and NAMES["ampere"] in res.stdout


def test_the_devices_listing_does_not_load_the_similarity_statistics(recorded):
    """`autotune devices` alone lists rows of the database: scipy (a second of start-up) loads only for
    --similar-to."""
    import subprocess
    import sys

    _, url, _, _ = recorded
    code = ("import sys\nfrom autotune.cli.main import app\ntry:\n    app(['devices', '--db', sys.argv[1]])\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "assert not [m for m in sys.modules if m.startswith('scipy')]\n")
    r = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and NAMES["turing"] in r.stdout, r.stdout + r.stderr[-2000:]


def test_devices_similar_to_names_the_task_whose_measured_times_it_compared(recorded):
    """Rank correlations and common configurations are those of one task: the title and the JSON name it, and
    name none where only the devices' properties were compared."""
    db, url, task, _ = recorded
    for extra in ([], ["--task", task.key[:8]]):
        res = cli.invoke(app, ["devices", "--similar-to", NAMES["turing"], "--db", url, *extra])
        assert res.exit_code == 0, res.output
        title = " ".join(res.stdout.split("\n─")[0].rsplit("\n", 1)[0].split())  # the lines above the header
        assert f"measured times of task {task.name} [{task.key[:8]}]" in title, res.stdout
        out = json.loads(cli.invoke(app, ["devices", "--similar-to", NAMES["turing"], "--json", "--db", url,
                                          *extra]).stdout)
        assert out["task"] == {"name": task.name, "key": task.key} and out["similar"][0]["common_configs"] > 0
    res = cli.invoke(app, ["devices", "--similar-to", "NVIDIA H100 80GB HBM3", "--db", url])  # measured nothing
    assert res.exit_code == 0 and "measured times" not in res.stdout, res.output
    out = json.loads(cli.invoke(app, ["devices", "--similar-to", "NVIDIA H100 80GB HBM3", "--json", "--db", url]).stdout)
    assert out["task"] is None and out["key"] is None


def test_export_configs_writes_what_its_options_ask_for(recorded):
    """A header file name or --prefix asks for a C header; --prefix with JSON, and a --devices naming no device,
    are refused; a device name stands for its device stored last that measured the task."""
    from autotune.db.transfer import find_device

    db, url, task, tmp = recorded
    export = ["export-configs", "--task", task.name, "--db", url]
    assert cli.invoke(app, [*export, "-o", str(tmp / "cfg.h")]).exit_code == 0
    assert (tmp / "cfg.h").read_text().startswith("/* Tuned configurations of toy_kernel")
    res = cli.invoke(app, [*export, "--prefix", "toy"])
    assert res.exit_code == 0 and "#define TOY_DEVICE" in res.stdout
    assert cli.invoke(app, [*export, "-o", str(tmp / "cfg.json")]).exit_code == 0
    assert json.loads((tmp / "cfg.json").read_text())["task"] == task.name
    res = cli.invoke(app, [*export, "--prefix", "toy", "--format", "json"])
    assert res.exit_code == 2 and "--prefix names the macros of a C header" in res.output
    res = cli.invoke(app, [*export, "--devices", " , "])
    assert res.exit_code == 2 and "names no device" in res.output
    titan = find_device(db, NAMES["turing"])  # stored again after a driver update, measuring another task only
    again = Device(titan.name, titan.kind, {**titan.properties, "driver_version": 2})
    db.add_trials(Task("function", "other", {}), again, [Measurement(Candidate({"x": 1}), Status.OK, cost=1.0)])
    res = cli.invoke(app, [*export, "--devices", NAMES["turing"]])
    assert res.exit_code == 0, res.output
    assert [r["key"] for r in json.loads(res.stdout)["devices"]] == [titan.key]
