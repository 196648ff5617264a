import importlib.util
import json

import pandas as pd
import pytest
from sqlalchemy import func, select

from autotune.db import open_database, queries
from autotune.db.logs import export_file, import_file, import_kt
from autotune.db.models import TrialRow
from autotune.errors import UsageError
from autotune.runners.replay import ReplayRunner
from autotune.search_spaces.replay import ReplaySpace
from autotune.testing.fakes import FAKE_DEVICE, FakeRunner, small_knob_space
from autotune.types import Measurement, Status


@pytest.fixture
def db(db_url):
    d = open_database(db_url)
    yield d
    d.close()


def _measure_all(space):
    runner = FakeRunner(space, fail={space.candidate({"x": 2, "y": 2, "mode": "a"}).key})
    return runner.measure(space.task, list(space.enumerate()))


def test_trials_are_unique_per_task_device_candidate(db):
    space = small_knob_space()
    ms = _measure_all(space)
    assert db.add_trials(space.task, FAKE_DEVICE, ms) == len(ms)
    assert db.add_trials(space.task, FAKE_DEVICE, ms[:10]) == 0  # a second write of the same trials adds nothing
    assert db.count_trials() == len(ms)
    tid, did = db.task_id(space.task), db.device_id(FAKE_DEVICE)
    found = db.lookup(tid, did, [m.candidate.key for m in ms[:5]] + ["nope"])
    assert set(found) == {m.candidate.key for m in ms[:5]}
    for m in ms[:5]:
        got = found[m.candidate.key]
        assert got.candidate.payload == m.candidate.payload and got.status == m.status and got.times == m.times


def test_failures_are_stored_with_their_error(db):
    space = small_knob_space()
    ms = _measure_all(space)
    db.add_trials(space.task, FAKE_DEVICE, ms)
    failed = queries.trials(db, status="runtime_error")
    assert len(failed) == 1 and failed.iloc[0]["error"] == "planted failure"
    assert pd.isna(failed.iloc[0]["cost"])
    with pytest.raises(ValueError, match="valid: OK"):
        queries.trials(db, status="nonsense")


def test_queries_best_top_and_filters(db):
    space = small_knob_space()
    ms = _measure_all(space)
    db.add_trials(space.task, FAKE_DEVICE, ms)
    ok = sorted((m for m in ms if m.ok), key=lambda m: m.cost)
    top = queries.trials(db, top=3)
    assert list(top["cost"]) == pytest.approx([m.cost for m in ok[:3]])
    best = queries.best(db, task=space.task.name, k=2)
    assert list(best["config"]) == [ok[0].candidate.payload, ok[1].candidate.payload]
    with pytest.raises(UsageError, match="unknown device 'other-device'; closest: fake-device"):
        queries.trials(db, device="other-device")  # as the command line says it, not an empty frame
    assert len(queries.trials(db, task=space.task.key)) == len(ms)


def test_queries_take_the_database_url_as_best_config_does(db, db_url, tmp_path):
    from autotune.campaign import Campaign

    space = small_knob_space()
    Campaign("by-url", space, "random", FakeRunner(space), db, trials=6, batch=3, progress=False).run()
    assert list(queries.trials(db_url, top=2)["id"]) == list(queries.trials(db, top=2)["id"])
    assert list(queries.campaigns(db=db_url)["campaign"]) == ["by-url"]
    assert len(queries.best(db_url)) == 1 and queries.count_trials(db_url) == 6
    assert len(queries.convergence(db_url, "by-url")) == 6 and queries.lookups(db_url, "by-url") == 0
    assert sum(len(p) for p in queries.trial_pages(db_url, page=4)) == 6
    missing = tmp_path / "missing.db"
    with pytest.raises(UsageError, match=r"no database file .*autotune\.queries\.trials reads an existing database"):
        queries.trials(f"sqlite:///{missing}")
    assert not missing.exists()


def test_import_kt_and_lossless_export_import(db, tmp_path, sqlite_url):
    task, device, n, added = import_kt(db, "example:pnpoly-rtx3090")
    assert n == added == 4092
    assert import_kt(db, "example:pnpoly-rtx3090")[3] == 0  # idempotent
    counts = queries.trials(db).groupby("status").size().to_dict()
    assert counts["OK"] == 4092 - 318 and counts["RUNTIME_ERROR"] + counts.get("COMPILE_ERROR", 0) == 318
    a = tmp_path / "a.jsonl"
    assert export_file(db, a) == 4092
    other = open_database(f"sqlite:///{tmp_path / 'other.db'}")
    assert import_file(other, a) == (4092, 4092)
    b = tmp_path / "b.jsonl"
    export_file(other, b)
    assert a.read_text() == b.read_text()
    assert import_file(other, a) == (4092, 0)


def test_campaign_trials_round_trip_with_their_campaign(db, tmp_path):
    from autotune.campaign import Campaign

    space = ReplaySpace("example:pnpoly-rtx3090")
    Campaign("rt", space, "random", ReplayRunner(space.cache), db, trials=40, seed=3).run()
    a = tmp_path / "a.jsonl"
    export_file(db, a, campaign="rt")
    other = open_database(f"sqlite:///{tmp_path / 'o.db'}")
    import_file(other, a)
    b = tmp_path / "b.jsonl"
    export_file(other, b, campaign="rt")
    assert a.read_text() == b.read_text()
    assert len(queries.convergence(other, "rt")) == 40
    line = next(d for d in map(json.loads, a.read_text().splitlines()) if "candidate" in d)  # the first trial's
    assert line["campaign"]["name"] == "rt" and line["device"]["name"] == "NVIDIA GeForce RTX 3090"


def test_bad_import_lines_are_rejected_with_the_line(db, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "autotune-trials/1"}\n')
    with pytest.raises(UsageError, match="bad.jsonl:1"):
        import_file(db, bad)


def test_outdated_schema_says_how_to_upgrade_and_upgrade_works(sqlite_url):
    from sqlalchemy import create_engine
    from typer.testing import CliRunner

    from autotune.cli.main import app
    from autotune.db.migrate import upgrade

    upgrade(create_engine(sqlite_url), "0001")  # a database made by an older autotune
    with pytest.raises(UsageError, match="older than .*autotune db upgrade --db"):
        open_database(sqlite_url)
    r = CliRunner().invoke(app, ["db", "upgrade", "--db", sqlite_url])
    from autotune.db.migrate import head_revision

    assert r.exit_code == 0 and f"0001 -> {head_revision()}" in r.stdout
    open_database(sqlite_url).close()


@pytest.mark.parametrize("url,match", [
    ("nosuch://x/y", "unsupported backend"),
    ("not a url", "malformed"),
    ("sqlite:///", "names no file"),
    ("postgresql+psycopg://nobody@127.0.0.1:1/none",
     "cannot open database" if importlib.util.find_spec("psycopg") else "needs a driver that is not installed"),
    ("sqlite:////nonexistent-dir/x/y.db", "cannot open database"),
])
def test_bad_urls_are_usage_errors(url, match):
    with pytest.raises(UsageError, match=match):
        open_database(url)


def test_a_file_path_given_for_the_url_is_answered_with_its_sqlite_url(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from autotune.cli.main import app
    from autotune.db import open_existing_database

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "a.db"
    open_database(f"sqlite:///{path}").close()
    with pytest.raises(UsageError, match=f"an SQLite file of that path is sqlite:///{path}$"):
        open_existing_database(str(path))
    with pytest.raises(UsageError, match="an SQLite file of that path is sqlite:///new.db$"):
        open_database("new.db")
    r = CliRunner().invoke(app, ["campaigns", "--db", "a.db"])
    assert r.exit_code == 2 and r.stderr.strip() == (
        "error: database URL 'a.db' is malformed: it names no backend; an SQLite file of that path is sqlite:///a.db")
    assert not (tmp_path / "new.db").exists()  # nothing created


def test_record_batch_is_one_transaction(db):
    """A batch whose state cannot be stored leaves no trial behind."""
    space = small_knob_space()
    camp, _ = db.open_campaign("tx", space.task, FAKE_DEVICE, "random", {})
    tid, did = db.task_id(space.task), db.device_id(FAKE_DEVICE)
    ms = [Measurement(c, Status.OK, times=[1.0]) for c in list(space.enumerate())[:3]]
    with pytest.raises(Exception):
        db.record_batch(tid, did, camp.id, ms, state={"bad": float("nan")} if db.dialect == "postgresql" else {"bad": object()})
    with db.session() as s:
        assert s.scalar(select(func.count(TrialRow.id))) == 0


def test_campaign_objectives_list_every_evaluation_in_order_without_their_configurations(db):
    """What a long search reads back at its end: each evaluation's trial, key and objective (inf for a
    failure), in the campaign's order; then only the trials it needs, whole."""
    from autotune.campaign import Campaign

    space = small_knob_space()
    failing = space.candidate({"x": 2, "y": 2, "mode": "a"})
    Campaign("obj", space, "random", FakeRunner(space, fail={failing.key}), db, seed=1,
             warmup=[failing]).run()
    history = [m for m, _ in db.campaign_history(db.campaign("obj").id)]
    rows = db.campaign_objectives(db.campaign("obj").id)
    assert [k for _, k, _ in rows] == [m.candidate.key for m in history] and len(rows) == space.size()
    assert [o for _, _, o in rows] == [m.objective for m in history]
    assert rows[0][1] == failing.key and rows[0][2] == float("inf")
    loaded = db.measurements_by_id([rows[0][0], rows[1][0], rows[1][0]])
    assert set(loaded) == {rows[0][0], rows[1][0]}
    assert loaded[rows[1][0]].candidate.payload == history[1].candidate.payload and not loaded[rows[0][0]].ok
    assert db.measurements_by_id([]) == {}


def test_a_campaign_name_of_another_task_or_device_is_refused_naming_what_differs(db):
    from autotune.types import Device, Task

    task, other_task = Task("kernel", "gemm", {"n": 1}), Task("kernel", "gemm", {"n": 2})
    db.open_campaign("c", task, FAKE_DEVICE, "random", {})
    with pytest.raises(UsageError) as refused:
        db.open_campaign("c", other_task, FAKE_DEVICE, "random", {})
    # the same task name: the parameters that differ say which is which
    assert f"(task gemm [{task.key[:8]}], not gemm [{other_task.key[:8]}]: n 1, not 2)" in str(refused.value)
    with pytest.raises(UsageError, match=r"\(task gemm \[\w+\], not softmax \[\w+\]\)"):
        db.open_campaign("c", Task("kernel", "softmax", {"n": 1}), FAKE_DEVICE, "random", {})
    with pytest.raises(UsageError, match=r"\(device fake-device, not other-gpu\)"):
        db.open_campaign("c", task, Device("other-gpu", "cuda", {}), "random", {})
    cpu = Device("cpu-x", "cpu", {"cores": 4, "cflags": ["-O3"]})
    db.open_campaign("on-cpu", task, cpu, "random", {})
    with pytest.raises(UsageError, match=r"\(device cpu-x, not cpu-x: cores 4, not 2; cflags -O3, not -O0 -O3\)"):
        db.open_campaign("on-cpu", task, Device("cpu-x", "cpu", {"cores": 2, "cflags": ["-O0", "-O3"]}), "random", {})
