"""`autotune export` then `autotune import` moves a tuning log losslessly (SQLite and PostgreSQL): every table a
user sees (campaigns, trials, a campaign's history with its look-ups, in order, best, export-configs, cost
models) reads the same in the database imported into; a file imported twice, or into a database holding some
of it, duplicates nothing; a file cut short imports nothing; a file of the older format still imports."""

from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from autotune.campaign import Campaign
from autotune.db import open_database, queries
from autotune.db.logs import export_file, export_items, import_file
from autotune.db.models import CampaignRow, CampaignTrialRow, CostModelRow, TrialRow
from autotune.errors import UsageError
from autotune.testing.fakes import FakeRunner, small_knob_space
from autotune.transfer.export import c_header, export_configs


@pytest.fixture
def target_url(db_url, tmp_path):
    """An empty database of the same kind as ``db_url``'s, to import into."""
    if db_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'target.db'}"
        return
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(db_url)  # the server of db_url's database, which the postgres_url fixture made
    conn = psycopg.connect(host=u.host, port=u.port or 5432, user=u.username, dbname=u.database,
                           password=u.password, autocommit=True, connect_timeout=3)
    name = f"autotune_test_{uuid.uuid4().hex[:12]}"
    conn.execute(f'CREATE DATABASE "{name}"')
    yield u.set(database=name).render_as_string(hide_password=False)
    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    conn.close()


def _log(url):
    """Two campaigns of one task and device, the second looking up some of the first's trials between its own
    measurements, and a stored cost model of each (one pinned, one whose bytes were dropped)."""
    db = open_database(url)
    space = small_knob_space()  # knobs x, y, mode: not in alphabetical order
    for name, seed, trials in (("first", 0, 12), ("second", 1, 14)):
        Campaign(name, space, "random", FakeRunner(space), db, trials=trials, batch=3, seed=seed, progress=False).run()
    from autotune.testing.fakes import FAKE_DEVICE

    first, second = db.campaign("first").id, db.campaign("second").id
    dropped = db.save_cost_model("xgb", b'{"weights": 1}', {"spearman": 0.5}, 9, space.task, FAKE_DEVICE, first)
    db.save_cost_model("xgb", b'{"weights": 2}', {"spearman": 0.75}, 12, space.task, FAKE_DEVICE, first)
    db.pin_cost_model(db.save_cost_model("xgb", b'{"weights": 3}', {}, 14, space.task, FAKE_DEVICE, second))
    assert dropped
    return db, space


def _seen(db, space) -> dict:
    """Everything a user reads of the log, ids and all."""
    out = {"campaigns": queries.campaigns(db, include_reused=True).to_dict("records"),
           "trials": [(r["id"], r["campaign"], list(r["config"].items()), r["status"], r["cost"], r["created"], r["worker"])
                      for r in queries.trials(db).to_dict("records")],
           "best": [(r["cost"], list(r["config"].items())) for r in queries.best(db).to_dict("records")],
           "header": c_header(export_configs(db, space.task.key)),
           "models": queries.cost_models(db).to_json(orient="records", date_format="iso")}
    for name in ("first", "second"):
        camp = db.campaign(name)
        out[name] = {"history": [(m.candidate.key, reused) for m, reused in db.campaign_history(camp.id)],
                     "convergence": queries.convergence(db, name, include_reused=True).to_dict("records"),
                     "trials": queries.trials(db, campaign=name)[["campaign", "candidate_key"]].values.tolist()}
    return out


def _counts(db) -> tuple:
    with db.session() as s:
        return tuple(s.scalar(select(func.count()).select_from(m))
                     for m in (TrialRow, CampaignRow, CampaignTrialRow, CostModelRow))


def test_an_imported_log_reads_as_the_original(db_url, target_url, tmp_path):
    src, space = _log(db_url)
    before = _seen(src, space)
    assert before["campaigns"][1]["reused"] > 0  # the second campaign looked up some of the first's trials
    assert space.names != sorted(space.names) and [k for k, _ in before["trials"][0][2]] == space.names
    history = before["second"]["history"]
    assert any(r for _, r in history) and not all(r for _, r in history[:sum(r for _, r in history)])  # interleaved
    a = tmp_path / "a.jsonl"
    export_file(src, a)
    dst = open_database(target_url)
    assert import_file(dst, a) == (len(before["trials"]), len(before["trials"]))
    after = _seen(dst, space)
    for key in before:
        assert after[key] == before[key], key
    b = tmp_path / "b.jsonl"
    export_file(dst, b)
    assert a.read_text() == b.read_text()
    for name in ("first", "second"):  # the algorithm states, from which a resumed run goes on
        assert dst.load_state(dst.campaign(name).id) == src.load_state(src.campaign(name).id) is not None
    for m in queries.cost_models(src).itertuples():  # the models' bytes too
        with src.session() as s, dst.session() as t:
            assert s.get(CostModelRow, m.id).data == t.get(CostModelRow, m.id).data
    src.close()
    dst.close()


def test_configurations_keep_their_knobs_in_the_space_order(db_url, target_url, tmp_path):
    """Tables and the C header of export-configs list the knobs as the space does (x, y, mode), not sorted."""
    src, space = _log(db_url)
    path = tmp_path / "a.jsonl"
    export_file(src, path)
    dst = open_database(target_url)
    import_file(dst, path)
    assert [list(c) for c in queries.trials(dst)["config"]] == [space.names] * len(queries.trials(src))
    assert list(queries.best(dst)["config"][0]) == space.names
    header = c_header(export_configs(dst, space.task.key))
    assert [line.split()[1] for line in header.splitlines() if line.startswith("#define FAKE_QUADRATIC_")][1:4] == \
        ["FAKE_QUADRATIC_X", "FAKE_QUADRATIC_Y", "FAKE_QUADRATIC_MODE"]
    assert header == c_header(export_configs(src, space.task.key))
    src.close()
    dst.close()


@pytest.mark.parametrize("task_filter", [False, True])
def test_devices_keep_their_order_so_a_name_stands_for_the_same_device(db_url, target_url, tmp_path, task_filter):
    """A device name stored as two devices stands for the one stored last (export-configs answers with it): that
    stays so after an import, also where the older device's trials came after the newer one's."""
    from autotune.types import Device

    src = open_database(db_url)
    space = small_knob_space()
    old, new = Device("gpu", "simulated", {"driver": 1}), Device("gpu", "simulated", {"driver": 2})
    src.device_id(old)  # stored first, measured last
    for device in (new, old):
        src.add_trials(space.task, device, FakeRunner(space, device=device).measure(space.task, list(space.enumerate())))
    path = tmp_path / "a.jsonl"
    export_file(src, path, **({"task": space.task.key} if task_filter else {}))
    dst = open_database(target_url)
    import_file(dst, path)
    for db in (src, dst):
        rows = export_configs(db, space.task.key)["devices"]
        assert [(r["key"], "superseded_by" in r) for r in rows] == [(new.key, False), (old.key, True)] or \
            [(r["key"], "superseded_by" in r) for r in rows] == [(old.key, True), (new.key, False)]
    assert queries.trials(dst)["id"].tolist() == queries.trials(src)["id"].tolist()
    src.close()
    dst.close()


def test_importing_twice_or_over_part_of_the_log_duplicates_nothing(db_url, target_url, tmp_path):
    src, space = _log(db_url)
    before = _seen(src, space)
    whole, part = tmp_path / "whole.jsonl", tmp_path / "first.jsonl"
    export_file(src, whole)
    export_file(src, part, campaign="first")
    dst = open_database(target_url)
    n_first = len(queries.trials(src, campaign="first"))
    assert import_file(dst, part) == (n_first, n_first)
    assert import_file(dst, whole) == (len(before["trials"]), len(before["trials"]) - n_first)
    counts = _counts(dst)
    assert counts == _counts(src)
    assert import_file(dst, whole) == (len(before["trials"]), 0) and import_file(dst, part) == (n_first, 0)
    assert _counts(dst) == counts
    after = _seen(dst, space)
    for key in ("campaigns", "best", "header", "models", "first", "second"):
        assert after[key] == before[key], key
    src.close()
    dst.close()


def test_a_campaign_exports_with_what_it_looked_up(db_url, target_url, tmp_path):
    """``--campaign``: the trials it evaluated, those it looked up too, with the campaign that measured each."""
    src, space = _log(db_url)
    path = tmp_path / "second.jsonl"
    n = export_file(src, path, campaign="second")
    assert n == len(queries.trials(src, campaign="second"))
    dst = open_database(target_url)
    import_file(dst, path)
    assert queries.trials(dst, campaign="second")[["campaign", "candidate_key"]].values.tolist() == \
        queries.trials(src, campaign="second")[["campaign", "candidate_key"]].values.tolist()
    got = queries.campaigns(dst).set_index("campaign")
    want = queries.campaigns(src).set_index("campaign")
    assert got.loc["second"].to_dict() == want.loc["second"].to_dict()
    assert _seen(dst, space)["second"] == _seen(src, space)["second"]
    assert queries.trials(dst, campaign="first").empty  # the first's history was not exported
    src.close()
    dst.close()


def test_a_file_cut_short_or_with_lines_taken_out_imports_nothing(db_url, tmp_path):
    src, _ = _log(db_url)
    path = tmp_path / "a.jsonl"
    export_file(src, path)
    lines = path.read_text().splitlines(keepends=True)
    dst = open_database(f"sqlite:///{tmp_path / 'dst.db'}")
    empty = _counts(dst)
    cases = {"cut.jsonl": (lines[:-1], "ends before the last line autotune export writes"),
             "cut-in-a-line.jsonl": (lines[:-3] + [lines[-3][:40]], "not JSON"),
             "one-out.jsonl": (lines[:1] + lines[2:], "lines were taken out or added"),  # a campaign's line
             "two-begins.jsonl": (lines[:-1] + lines, "before the one above it ended")}
    for name, (kept, why) in cases.items():
        (tmp_path / name).write_text("".join(kept))
        with pytest.raises(UsageError, match=f"{why}.*nothing was imported"):
            import_file(dst, tmp_path / name)
        assert _counts(dst) == empty, name
    (tmp_path / "twice.jsonl").write_text("".join(lines + lines))  # two whole exports, one after the other
    import_file(dst, tmp_path / "twice.jsonl")
    assert _counts(dst) == _counts(src)
    src.close()
    dst.close()


def test_a_file_of_the_older_format_still_imports(tmp_path):
    """Lines of "autotune-trials/1" (sorted keys, campaigns without status, no histories) import as they did:
    each trial is linked to its campaign, whose status says it was imported."""
    src, space = _log(f"sqlite:///{tmp_path / 'src.db'}")
    old = []
    for line, is_trial in export_items(src):
        if is_trial:
            d = json.loads(line)
            d["format"] = "autotune-trials/1"
            for k in ("status", "updated"):
                d["campaign"].pop(k)
            old.append(json.dumps(d, sort_keys=True))
    path = tmp_path / "old.jsonl"
    path.write_text("\n".join(old) + "\n")
    dst = open_database(f"sqlite:///{tmp_path / 'dst.db'}")
    assert import_file(dst, path) == (len(old), len(old))
    rows = queries.campaigns(dst).set_index("campaign")
    assert set(rows["status"]) == {"imported"}
    assert rows["trials"].to_dict() == queries.campaigns(src).set_index("campaign")["trials"].to_dict()
    assert len(queries.convergence(dst, "second")) == rows.loc["second", "trials"]
    src.close()
    dst.close()


def test_export_to_standard_output_is_the_file_and_counts_trials(tmp_path):
    from autotune.cli.main import app

    url = f"sqlite:///{tmp_path / 'src.db'}"
    src, _ = _log(url)
    n = len(queries.trials(src))
    src.close()
    cli = CliRunner()
    path = tmp_path / "a.jsonl"
    r = cli.invoke(app, ["export", "-o", str(path), "--db", url])
    assert r.exit_code == 0 and r.stderr == f"wrote {n} trials to {path}\n", r.output
    r = cli.invoke(app, ["export", "-o", "-", "--db", url])
    assert r.exit_code == 0 and r.stdout == path.read_text() and r.stderr == f"wrote {n} trials to standard output\n"


def test_a_failed_import_is_one_line_and_leaves_no_new_database_file(tmp_path):
    from autotune.cli.main import app

    url = f"sqlite:///{tmp_path / 'src.db'}"
    _log(url)[0].close()
    cli = CliRunner()
    path = tmp_path / "a.jsonl"
    assert cli.invoke(app, ["export", "-o", str(path), "--db", url]).exit_code == 0
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))
    new = tmp_path / "new.db"
    r = cli.invoke(app, ["import", str(cut), "--db", f"sqlite:///{new}"])
    assert r.exit_code == 2 and r.stderr.startswith("error: ") and len(r.stderr.splitlines()) == 1, r.output
    assert "cut short" in r.stderr and not list(tmp_path.glob("new.db*"))
    assert cli.invoke(app, ["import", str(path), "--db", f"sqlite:///{new}"]).exit_code == 0
    r = cli.invoke(app, ["import", str(cut), "--db", f"sqlite:///{new}"])
    assert r.exit_code == 2 and new.exists()  # a database that was there stays
