"""Default tables cut long campaign names so that each row's name stays told apart from the others, and the
cut text still names its campaign: `--campaign` takes it as the table showed it ('…' for the text left out)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import open_database
from autotune.types import Device, Task

# derived names as `tune replay` makes them: two kernels' recordings on two GPUs, every name's end the same
NAMES = ["replay-RTX_3090-evolutionary+xgb-seed0", "replay-RTX_2080_Ti-evolutionary+xgb-seed0",
         "replay-Xgemm-RTX_3090-evolutionary+xgb-seed0", "replay-Xgemm-RTX_2080_Ti-evolutionary+xgb-seed0"]
TASKS = [Task("replay", "cn_pnpoly"), Task("replay", "cn_pnpoly"), Task("replay", "Xgemm"), Task("replay", "Xgemm")]
DEVICES = [Device(n, "cuda") for n in ("NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 2080 Ti")] * 2


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": ""})


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    """Four campaigns named as above, each with a stored cost model."""
    url = f"sqlite:///{tmp_path_factory.mktemp('names') / 'n.db'}"
    db = open_database(url)
    for name, task, device in zip(NAMES, TASKS, DEVICES):
        row, _ = db.open_campaign(name, task, device, "evolutionary+xgb", {})
        db.save_cost_model("xgb", b"{}", {"spearman": 0.5}, 24, task, device, row.id)
    db.close()
    return url


def test_cuts_keep_what_tells_the_values_apart_and_name_one_value_each():
    from autotune.cli.tables import distinct_cuts
    from autotune.progress import cut_matches

    for width in (12, 14, 16, 20, 30):
        cuts = distinct_cuts(NAMES + ["short"], width)
        assert cuts["short"] == "short" and all(len(c) <= width for c in cuts.values()), cuts
        assert len(set(cuts.values())) == len(cuts), cuts
        for name, cut in cuts.items():  # each cut text could be its own value and no other
            assert [n for n in cuts if cut_matches(cut, n)] == [name], (width, cut)
    assert distinct_cuts(NAMES, 14)["replay-RTX_3090-evolutionary+xgb-seed0"] == "replay-RTX_30…"
    assert distinct_cuts(["a" * 40], 10) == {"a" * 40: "aaaaa…aaaa"}  # alone: its start and end, evenly
    assert cut_matches("re…x…0", "replay-x-0") and not cut_matches("re…x…0", "replay-0")


def test_the_campaigns_table_tells_campaigns_apart_and_its_text_names_them(four):
    r = run("campaigns", "--db", four)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(map(len, lines)) <= 100 and len(lines) == 2 + len(NAMES), r.stdout
    shown = {line.split()[0]: line for line in lines[2:]}
    assert len(shown) == len(NAMES), r.stdout  # one text per campaign
    named = []
    for cut in shown:  # the text as the table shows it names one campaign
        out = run("models", "--campaign", cut, "--format", "json", "--db", four)
        assert out.exit_code == 0, (cut, out.output)
        named += [m["campaign"] for m in json.loads(out.stdout)]
    assert sorted(named) == sorted(NAMES)
    wide = run("campaigns", "--wide", "--db", four).stdout
    assert all(n in wide for n in NAMES)
    both = run("trials", "--campaign", "replay…seed0", "--db", four)  # a cut text that stands for several
    assert both.exit_code == 2 and "matches several campaigns" in both.stderr and both.stderr.count("\n") == 1


def test_the_models_table_has_the_task_and_device_of_each_model(four):
    r = run("models", "--db", four)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(map(len, lines)) <= 100 and len(lines) == 2 + len(NAMES), r.stdout
    assert lines[0].split()[:5] == ["id", "model", "task", "device", "campaign"], r.stdout
    rows = [line.split() for line in lines[2:]]
    assert [(row[2], row[3:5]) for row in rows] == [
        ("cn_pnpoly", ["RTX", "3090"]), ("cn_pnpoly", ["RTX", "2080"]), ("Xgemm", ["RTX", "3090"]),
        ("Xgemm", ["RTX", "2080"])], r.stdout
    campaigns = [line[lines[0].index("campaign"):].split()[0] for line in lines[2:]]
    assert len(set(campaigns)) == len(NAMES), r.stdout  # and each model's campaign told apart
    full = json.loads(run("models", "--format", "json", "--db", four).stdout)
    assert [m["campaign"] for m in full] == NAMES and {m["device"] for m in full} == {d.name for d in DEVICES}
