"""A graph search killed with SIGKILL and rerun ends exactly as an uninterrupted one (campaign resume)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from sqlalchemy import func, select
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import open_database, queries
from autotune.db.models import CampaignRow, CampaignTrialRow
from autotune.runners.graph import BACKENDS
from autotune.search_spaces.graphs import model_zoo
from autotune.testing.graphs import fake_backend

TRIALS = 100
COMPARED = ["best_config", "best_cost", "rules_applied", "predicted_cost_before_s", "predicted_cost_after_s",
            "nodes_searched", "nodes_after", "kept", "trials", "evaluated", "status", "task"]


def _committed(db, campaign: str) -> int:
    with db.session() as s:
        return s.scalar(select(func.count(CampaignTrialRow.id)).join(CampaignRow, CampaignRow.id == CampaignTrialRow.campaign_id)
                        .where(CampaignRow.name == campaign)) or 0


def _history(db, campaign: str) -> list:
    return [(m.candidate.key, m.candidate.payload, m.cost, reused)
            for m, reused in db.campaign_history(db.campaign(campaign).id)]


def _args(model, out, url):
    return ["optimize-graph", str(model), "-o", str(out), "--device", "fake", "--campaign", "g1", "--db", url,
            "--trials", str(TRIALS), "--batch", "8", "--rounds", "5", "--json"]


def _run(args) -> dict:
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    return json.loads(r.output.strip().splitlines()[-1])


def test_sigkill_mid_search_then_rerun_ends_as_an_uninterrupted_run(tmp_path, monkeypatch):
    monkeypatch.setitem(BACKENDS, "fake", fake_backend)  # op times as a fixed function of each op: exact repeats
    model = tmp_path / "resnet50.onnx"
    onnx.save(model_zoo.build("resnet50", small=True), model)
    url = f"sqlite:///{tmp_path / 'killed.db'}"
    db = open_database(url)  # the schema exists before the process starts writing
    args = _args(model, tmp_path / "killed.onnx", url)
    proc = subprocess.Popen([sys.executable, "-m", "autotune.testing.graphs", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONHASHSEED": "random"})
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and _committed(db, "g1") < 16:
        time.sleep(0.005)
    assert proc.poll() is None, "the search ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    committed = _history(db, "g1")
    assert 16 <= len(committed) < TRIALS

    resumed = _run(args)  # the same command again
    assert resumed["resumed"]
    ref_url = f"sqlite:///{tmp_path / 'ref.db'}"
    ref = _run(_args(model, tmp_path / "ref.onnx", ref_url))
    assert not ref["resumed"]
    assert {k: resumed[k] for k in COMPARED} == {k: ref[k] for k in COMPARED}
    assert ref["rules_applied"] and ref["kept"]
    assert (tmp_path / "killed.onnx").read_bytes() == (tmp_path / "ref.onnx").read_bytes()
    after = _history(db, "g1")
    assert after[: len(committed)] == committed  # nothing committed was lost or changed
    assert after == _history(open_database(ref_url), "g1") and len(after) == TRIALS  # same trials, same order

    # every evaluated graph is listed by `autotune trials --campaign g1`
    r = CliRunner().invoke(app, ["trials", "--campaign", "g1", "--format", "json", "--db", url])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert len(rows) == TRIALS == resumed["evaluated"]
    assert sorted(row["candidate_key"] for row in rows) == sorted(k for k, *_ in after)
    assert [] in [row["config"] for row in rows]  # the input graph itself is the first trial
    assert queries.trials(db, campaign="g1")["task"].eq("resnet50").all()
