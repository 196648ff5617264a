"""Deleting and renaming campaigns (Database.delete_campaign, rename_campaign, `autotune campaigns
delete|rename`) and pinning cost models, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import socket
from datetime import timedelta

import pytest
from sqlalchemy import create_engine, func, inspect, select, text, update
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import open_database, queries
from autotune.db.models import (
    AlgorithmStateRow,
    CampaignClaimRow,
    CampaignPendingRow,
    CampaignRow,
    CampaignTrialRow,
    CostModelRow,
    TrialRow,
    utcnow,
)
from autotune.errors import UsageError
from autotune.testing.fakes import FAKE_DEVICE, FakeRunner, small_knob_space
from autotune.types import Device


@pytest.fixture
def db(db_url):
    d = open_database(db_url)
    yield d
    d.close()


def _populate(db):
    """Campaign 'alpha' measures 6 trials (2 cost models, one pinned; a state, a claim, a reservation);
    'beta' measures 4 others and reuses 2 of alpha's. Returns (alpha id, beta id, alpha's trial keys,
    the pinned model's id)."""
    space = small_knob_space()
    cands = list(space.enumerate())
    ms = FakeRunner(space).measure(space.task, cands[:12])
    a, _ = db.open_campaign("alpha", space.task, FAKE_DEVICE, "random", {})
    b, _ = db.open_campaign("beta", space.task, FAKE_DEVICE, "random", {})
    tid, did = db.task_id(space.task), db.device_id(FAKE_DEVICE)
    db.record_batch(tid, did, a.id, ms[:6], state={"step": 1}, worker="elsewhere:1:a")
    db.record_batch(tid, did, b.id, ms[6:10], reused=ms[:2], state={"step": 2}, worker="elsewhere:2:b")
    db.reserve(a.id, "elsewhere:1:a", [cands[20]])
    db.heartbeat(a.id, "elsewhere:1:a")
    with db.session() as s:  # a worker not heard of for an hour: dead
        s.execute(update(CampaignClaimRow).values(heartbeat=utcnow() - timedelta(hours=1)))
    db.save_cost_model("xgb", b"old", {"spearman": 0.1}, 4, space.task, FAKE_DEVICE, a.id)
    pinned = db.save_cost_model("xgb", b"kept", {"spearman": 0.5}, 6, space.task, FAKE_DEVICE, a.id)
    db.pin_cost_model(pinned, True)
    db.save_cost_model("xgb", b"beta", {"spearman": 0.3}, 4, space.task, FAKE_DEVICE, b.id)
    return a.id, b.id, {m.candidate.key for m in ms[:6]}, pinned


def _count(db, model, *where):
    with db.session() as s:
        return s.scalar(select(func.count()).select_from(model).where(*where))


def test_delete_keeps_the_measured_trials_unlinked(db):
    a, b, keys, pinned = _populate(db)
    done = db.delete_campaign("alpha")
    assert done == {"campaign": "alpha", "links": 6, "trials_deleted": 0, "trials_kept": 6, "models_deleted": 1,
                    "models_kept": 1}
    assert _count(db, CampaignRow, CampaignRow.id == a) == 0
    for model in (CampaignTrialRow, AlgorithmStateRow, CampaignClaimRow, CampaignPendingRow):
        assert _count(db, model, model.campaign_id == a) == 0, model
    # alpha's trials stay, with no campaign; beta's links to two of them stay
    with db.session() as s:
        kept = s.execute(select(TrialRow.candidate_key, TrialRow.campaign_id).where(TrialRow.candidate_key.in_(keys))).all()
    assert {k for k, _ in kept} == keys and {c for _, c in kept} == {None}
    assert _count(db, TrialRow) == 10
    assert _count(db, CampaignTrialRow, CampaignTrialRow.campaign_id == b) == 6
    # the pinned model is kept, detached; beta's model untouched
    with db.session() as s:
        models = s.execute(select(CostModelRow.id, CostModelRow.campaign_id, CostModelRow.pinned)).all()
    assert sorted((i == pinned, c, p) for i, c, p in models) == [(False, b, False), (True, None, True)]
    beta = queries.campaigns(db).set_index("campaign").loc["beta"]
    assert beta["trials"] == 4 and beta["reused"] == 2
    assert len(queries.trials(db, campaign="beta")) == 6
    with pytest.raises(UsageError, match="unknown campaign 'alpha'"):
        db.delete_campaign("alpha")


def test_delete_with_trials_removes_them_and_every_link_to_them(db):
    _, b, keys, _ = _populate(db)
    done = db.delete_campaign("alpha", with_trials=True)
    assert done["trials_deleted"] == 6 and done["trials_kept"] == 0
    assert _count(db, TrialRow) == 4 and _count(db, TrialRow, TrialRow.candidate_key.in_(keys)) == 0
    assert _count(db, CampaignTrialRow, CampaignTrialRow.campaign_id == b) == 4  # its two look-ups went too
    beta = queries.campaigns(db).set_index("campaign").loc["beta"]
    assert beta["trials"] == 4 and beta["reused"] == 0
    # a deleted name can be used again, for a fresh campaign
    space = small_knob_space()
    row, resumed = db.open_campaign("alpha", space.task, FAKE_DEVICE, "random", {})
    assert not resumed and db.campaign_history(row.id) == []


def test_delete_and_rename_of_an_unknown_name_suggest_the_closest(db):
    _populate(db)
    with pytest.raises(UsageError, match=r"unknown campaign 'alpah'; closest: alpha"):
        db.delete_campaign("alpah")
    with pytest.raises(UsageError, match=r"unknown campaign 'bet'; closest: beta"):
        db.rename_campaign("bet", "gamma")
    assert _count(db, CampaignRow) == 2


def test_rename_moves_everything_and_refuses_an_existing_name(db):
    a, _, _, _ = _populate(db)
    with pytest.raises(UsageError, match="campaign 'beta' already exists"):
        db.rename_campaign("alpha", "beta")
    with pytest.raises(UsageError, match="must be non-empty"):
        db.rename_campaign("alpha", " ")
    db.rename_campaign("alpha", "gamma")
    row = db.campaign("gamma")
    assert row.id == a and db.load_state(a) == {"step": 1}
    assert len(queries.trials(db, campaign="gamma")) == 6
    assert set(queries.cost_models(db, campaign="gamma")["id"]) == set(
        queries.cost_models(db)[lambda df: df["campaign"] == "gamma"]["id"])
    with pytest.raises(UsageError, match="unknown campaign 'alpha'"):
        db.campaign("alpha")


def test_pin_cost_model_and_latest(db):
    *_, pinned = _populate(db)
    models = queries.cost_models(db)
    assert models.set_index("id")["pinned"].to_dict() == {pinned - 1: False, pinned: True, pinned + 1: False}
    latest = queries.cost_models(db, latest=True)
    assert list(latest["id"]) == [pinned, pinned + 1]  # the latest per campaign
    db.pin_cost_model(pinned, False)
    assert not queries.cost_models(db)["pinned"].any()
    with pytest.raises(UsageError, match="no stored model 999"):
        db.pin_cost_model(999, True)


def test_latest_outside_campaigns_is_per_task_and_device(db):
    space = small_knob_space()
    first = db.save_cost_model("xgb", b"1", {}, 1, space.task, FAKE_DEVICE)
    second = db.save_cost_model("xgb", b"2", {}, 2, space.task, FAKE_DEVICE)
    other = db.save_cost_model("xgb", b"3", {}, 3, space.task, Device("other", "cpu"))
    assert list(queries.cost_models(db, latest=True)["id"]) == [second, other]
    assert first < second


def test_migration_0005_adds_pinned_false_to_existing_models(db_url):
    from autotune.db.migrate import upgrade

    engine = create_engine(db_url)
    try:
        upgrade(engine, "0004")
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO cost_models (name, n_samples, metrics, data, format, created) "
                              "VALUES ('xgb', 3, '{}', :d, 'json', CURRENT_TIMESTAMP)"), {"d": b"x"})
        assert "pinned" not in {c["name"] for c in inspect(engine).get_columns("cost_models")}
        upgrade(engine)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT pinned FROM cost_models")).scalar() in (False, 0)
    finally:
        engine.dispose()
    d = open_database(db_url)
    try:
        assert queries.cost_models(d)["pinned"].tolist() == [False]
    finally:
        d.close()


# -- the command line ------------------------------------------------------------------------------

cli = CliRunner()


def run(*args, **kw):
    return cli.invoke(app, [str(a) for a in args], **kw)


def test_cli_delete_confirms_refuses_without_a_terminal_and_keeps_trials(db, db_url, monkeypatch):
    _populate(db)
    r = run("campaigns", "delete", "alpha", "--db", db_url)
    assert r.exit_code == 2 and "pass --yes" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert _count(db, CampaignRow) == 2
    monkeypatch.setattr("autotune.cli.query._stdin_is_tty", lambda: True)
    r = run("campaigns", "delete", "alpha", "--db", db_url, input="n\n")
    assert r.exit_code == 1 and "nothing deleted" in r.stderr and _count(db, CampaignRow) == 2
    assert "delete campaign 'alpha'" in r.stdout and "6 measured trials stay" in r.stdout
    r = run("campaigns", "delete", "ALPHA", "--db", db_url, input="y\n")  # case only: the stored name
    assert r.exit_code == 0, r.output
    assert "deleted campaign 'alpha'" in r.stdout and "6 measured trials kept" in r.stdout
    assert _count(db, CampaignRow) == 1 and _count(db, TrialRow) == 10
    names = json.loads(run("campaigns", "--format", "json", "--db", db_url).stdout)
    assert [c["campaign"] for c in names] == ["beta"]


def test_cli_delete_refuses_live_workers_unless_forced(db, db_url):
    a, _, _, _ = _populate(db)
    db.heartbeat(a, f"{socket.gethostname()}:{os.getpid()}:live")  # this very process: alive
    r = run("campaigns", "delete", "alpha", "--yes", "--db", db_url)
    assert r.exit_code == 2 and "1 live worker" in r.stderr and "--force" in r.stderr
    assert _count(db, CampaignRow) == 2
    r = run("campaigns", "delete", "alpha", "--yes", "--force", "--with-trials", "--db", db_url)
    assert r.exit_code == 0, r.output
    assert "6 trials deleted" in r.stdout and _count(db, TrialRow) == 4


def test_cli_rename_refuses_live_workers_unless_forced(db, db_url):
    # a running worker keeps the name it started with: renamed under it, its Ctrl-C would print a resume
    # command that starts a new campaign of the old name
    a, _, _, _ = _populate(db)
    db.heartbeat(a, f"{socket.gethostname()}:{os.getpid()}:live")  # this very process: alive
    r = run("campaigns", "rename", "alpha", "gamma", "--db", db_url)
    assert r.exit_code == 2 and "1 live worker" in r.stderr and "rename --force" in r.stderr, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and db.campaign("alpha").id == a
    with pytest.raises(UsageError, match=r"force=True"):
        db.rename_campaign("alpha", "gamma")
    r = run("campaigns", "rename", "alpha", "gamma", "--force", "--db", db_url)
    assert r.exit_code == 0 and "renamed campaign 'alpha' to 'gamma'" in r.stdout, r.output
    assert db.campaign("gamma").id == a


def test_cli_rename_and_unknown_names(db, db_url):
    _populate(db)
    r = run("campaigns", "rename", "alpha", "beta", "--db", db_url)
    assert r.exit_code == 2 and "campaign 'beta' already exists" in r.stderr
    r = run("campaigns", "--db", db_url, "rename", "alpha", "gamma")  # --db before the subcommand
    assert r.exit_code == 0 and "renamed campaign 'alpha' to 'gamma'" in r.stdout
    r = run("campaigns", "delete", "gama", "--yes", "--db", db_url)
    assert r.exit_code == 2 and "unknown campaign 'gama'; closest: gamma" in r.stderr
    r = run("campaigns", "list", "--format", "csv", "--db", db_url)
    assert r.exit_code == 0 and r.stdout.splitlines()[0].startswith("campaign,task,task_key,device")
    assert {line.split(",")[0] for line in r.stdout.splitlines()[1:]} == {"gamma", "beta"}


def test_cli_models_pin_unpin_and_latest(db, db_url):
    _, _, _, pinned = _populate(db)
    r = run("models", "--unpin", pinned, "--pin", pinned - 1, "--db", db_url)
    assert r.exit_code == 0, r.output
    assert f"unpinned model {pinned}" in r.stdout and f"pinned model {pinned - 1}" in r.stdout
    models = json.loads(run("models", "--format", "json", "--db", db_url).stdout)
    assert {m["id"]: m["pinned"] for m in models} == {pinned - 1: True, pinned: False, pinned + 1: False}
    latest = json.loads(run("models", "--latest", "--format", "json", "--db", db_url).stdout)
    assert [(m["id"], m["campaign"]) for m in latest] == [(pinned, "alpha"), (pinned + 1, "beta")]
    r = run("models", "--pin", 12345, "--pin", pinned, "--db", db_url)
    assert r.exit_code == 2 and "no stored model 12345" in r.stderr
    assert json.loads(run("models", "--format", "json", "--db", db_url).stdout)[1]["pinned"] is False  # nothing done
    r = run("models", "--latest", "--db", db_url)
    lines = r.stdout.splitlines()
    # the pinned column shows only where a listed model is pinned: neither of the latest two is
    assert r.exit_code == 0 and lines[0].split()[:2] == ["id", "model"] and "pinned" not in lines[0]
    assert len(lines) == 4 and max(map(len, lines)) <= 100  # header, rule, two models
    header = run("models", "--db", db_url).stdout.splitlines()[0]  # model pinned - 1 is pinned
    assert "pinned" in header and "campaign" in header
