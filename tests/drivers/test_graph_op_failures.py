"""An op that cannot be timed alone: its failure is stored with the op costs of the device (never as a cost),
and every later search on the device fails the graphs holding it with the stored reason, without timing it again."""

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from autotune.cli.main import app
from autotune.db import open_database, queries
from autotune.drivers.graph import optimize_graph
from autotune.runners.graph import BACKENDS
from autotune.search_spaces.graphs import model_zoo
from autotune.testing.graphs import FakeOpRunner, fake_backend
from autotune.types import Measurement, Status

REASON = "fake: no Sigmoid kernel"


class FakeNoSigmoidRunner(FakeOpRunner):
    """The fake op runner, failing every Sigmoid op (as onnxruntime does an op it cannot run alone)."""

    asked: list[str] = []  # op types asked for, over every instance (a search makes a fresh backend)

    def measure(self, task, candidates):
        FakeNoSigmoidRunner.asked += [c.payload["op"] for c in candidates]
        return [Measurement(c, Status.RUNTIME_ERROR, error=REASON) if c.payload["op"] == "Sigmoid" else m
                for c, m in zip(candidates, super().measure(task, candidates))]


@pytest.fixture
def no_sigmoid(monkeypatch):
    monkeypatch.setitem(BACKENDS, "fake", lambda threads=1: replace(fake_backend(), op_runner=FakeNoSigmoidRunner()))
    monkeypatch.setattr(FakeNoSigmoidRunner, "asked", [])


@pytest.fixture(scope="module")
def nasrnn(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "nasrnn.onnx"
    onnx.save(model_zoo.build("nasrnn", small=True), path)
    return path


def _op_trials(db):
    """The op trials of the fake device (the graph trials of a timed campaign share its name)."""
    trials = queries.trials(db, device="fake-op-runner")
    return trials[trials["campaign"].isna()]


def test_a_failed_op_timing_is_stored_and_reused_never_timed_again(no_sigmoid, nasrnn, tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    first = optimize_graph(nasrnn, device="fake", trials=8, batch=8, db=url, campaign="a", rounds=3)
    assert FakeNoSigmoidRunner.asked.count("Sigmoid") >= 1
    db = open_database(url)
    graphs = queries.trials(db, campaign="a")
    # every graph of NasRNN holds a Sigmoid: the input graph fails, and with it the search
    assert len(graphs) == first["trials"] >= 1 and (graphs["status"] == "RUNTIME_ERROR").all()
    assert first["ops_failed"] and {f["op"] for f in first["ops_failed"]} == {"Sigmoid"}
    assert {f["error"] for f in first["ops_failed"]} == {f"RUNTIME_ERROR: {REASON}"}
    assert graphs["error"].str.contains(f"op Sigmoid .* could not be timed alone \\(RUNTIME_ERROR: {REASON}\\)").all()
    # the failure is an op trial of the device, with its reason and no cost, beside the op costs
    ops = _op_trials(db)
    failed = ops[ops["status"] == "RUNTIME_ERROR"]
    assert len(failed) == FakeNoSigmoidRunner.asked.count("Sigmoid") and (failed["task"] == "Sigmoid").all()
    assert failed["cost"].isna().all() and (failed["error"] == REASON).all()
    assert len(ops) == first["ops_measured"] and ops["candidate_key"].is_unique

    FakeNoSigmoidRunner.asked.clear()
    second = optimize_graph(nasrnn, device="fake", trials=8, batch=8, db=url, campaign="b", rounds=3, seed=1)
    assert "Sigmoid" not in FakeNoSigmoidRunner.asked and second["ops_measured"] == 0  # known: not timed again
    assert second["ops_failed"] == first["ops_failed"]
    assert len(_op_trials(db)) == len(ops)
    again = queries.trials(db, campaign="b")
    assert (again["status"] == "RUNTIME_ERROR").all()
    assert again["error"].str.contains(f"could not be timed alone \\(RUNTIME_ERROR: {REASON}\\)").all()

    # `autotune trials` lists the failure with the op costs of the device
    r = CliRunner().invoke(app, ["trials", "--device", "fake-op-runner", "--status", "RUNTIME_ERROR", "--format", "json",
                                 "--db", url])
    assert r.exit_code == 0, r.output
    rows = [row for row in json.loads(r.output) if row["campaign"] is None]
    assert len(rows) == len(failed) and {row["error"] for row in rows} == {REASON}


def test_graph_costs_an_older_version_estimated_on_the_device_itself_are_detected_and_said(nasrnn, db_url,
                                                                                           monkeypatch, capsys):
    """Older versions stored graph costs resting partly on estimated ops on the device itself; every graph trial
    has carried ``meta.ops_estimated`` since graph trials were first stored, so a campaign on the device finds
    those it would look up as measurements, says so on standard error and counts them in its report."""
    from sqlalchemy import update

    from autotune.db.models import TrialRow

    monkeypatch.setitem(BACKENDS, "fake", fake_backend)
    url = db_url
    optimize_graph(nasrnn, device="fake", trials=8, batch=8, db=url, campaign="old", rounds=3)
    db = open_database(url)
    old = queries.trials(db, campaign="old")
    with db.session() as s:  # as an older version stored them: OK costs with estimated ops, on the device itself
        s.execute(update(TrialRow).where(TrialRow.id.in_([int(i) for i in old["id"][:3]]))
                  .values(meta={"ops_estimated": 2, "ops_measured": 400}))
    capsys.readouterr()
    r = optimize_graph(nasrnn, device="fake", trials=16, batch=8, db=url, campaign="new", rounds=3)
    assert r["op_costs"] == "timed" and r["estimated_on_device"] == 3 and queries.lookups(db, "new") >= 3
    note = [x for x in capsys.readouterr().err.splitlines() if x.startswith("note: ")]
    assert note == ["note: 3 graph costs of nasrnn stored on 'fake-op-runner' rest partly on estimated op costs "
                    "(stored so by an older version; their meta.ops_estimated counts those ops) and are looked up as "
                    "measurements: campaigns 'old' (3); `autotune campaigns delete NAME --with-trials` removes a "
                    "campaign's"]
    capped = optimize_graph(nasrnn, device="fake", trials=8, batch=8, db=url, campaign="capped", rounds=3,
                            max_measure=3)
    assert capped["estimated_on_device"] == 0  # its own device: it looks up nothing of the device itself
    assert not [x for x in capsys.readouterr().err.splitlines() if x.startswith("note: ")]
