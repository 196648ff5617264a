"""`autotune import` is one validated transaction: a bad line anywhere leaves the database as it was."""

import json

import pytest

from autotune.db import open_database, queries
from autotune.db.logs import export_lines, import_file, import_kt
from autotune.errors import UsageError


@pytest.fixture(scope="module")
def lines(tmp_path_factory):
    """2,000 exported trial lines of the bundled cache, each given a campaign."""
    db = open_database(f"sqlite:///{tmp_path_factory.mktemp('src') / 'src.db'}")
    try:
        import_kt(db, "example:pnpoly-rtx3090")
        out = []
        for d in [d for d in map(json.loads, export_lines(db)) if "candidate" in d][:2000]:  # trial lines alone
            d["campaign"] = {"name": "imported-run", "algorithm": "random", "options": {},
                             "created": "2026-01-01T00:00:00"}
            out.append(d)
        return out
    finally:
        db.close()


def write(path, dicts, replace=None):
    texts = [json.dumps(d) for d in dicts]
    for i, text in (replace or {}).items():
        texts[i] = text
    path.write_text("\n".join(texts) + "\n")
    return path


def snapshot(db):
    with db.session() as s:
        from sqlalchemy import func, select

        from autotune.db.models import CampaignRow, CampaignTrialRow, DeviceRow, TaskRow, TrialRow

        return tuple(s.scalar(select(func.count()).select_from(m))
                     for m in (TrialRow, CampaignRow, CampaignTrialRow, TaskRow, DeviceRow))


def test_a_valid_file_imports_every_line_with_its_campaign(tmp_path, lines):
    db = open_database(f"sqlite:///{tmp_path / 'a.db'}")
    assert import_file(db, write(tmp_path / "ok.jsonl", lines)) == (2000, 2000)
    assert len(queries.convergence(db, "imported-run")) == 2000
    assert import_file(db, tmp_path / "ok.jsonl") == (2000, 0)  # idempotent
    db.close()


BAD_VALUES = {
    "a corrupt line": "{not json",
    "a JSON list": "[1, 2, 3]",
    "NaN cost": ("cost", float("nan")),
    "infinite cost": ("cost", float("inf")),
    "negative cost": ("cost", -1.0),
    "negative time": ("times", [0.001, -0.5]),
    "non-numeric time": ("times", ["x"]),
    "cost for a failed trial": ("status", "RUNTIME_ERROR"),
    "unknown status": ("status", "GREAT"),
    "campaign without algorithm": ("campaign", {"name": "c", "options": {}, "created": "2026-01-01T00:00:00"}),
    "candidate not an object": ("candidate", [1, 2]),
    "bad date": ("created", "yesterday"),
    "edited task": ("task", {"key": "x", "kind": "kt", "name": "n", "params": {}}),
    "edited device": ("device", {"key": "x", "name": "n", "kind": "gpu", "properties": {}}),
    "huge integer": "HUGE",
    "deep nesting": "[" * 100000 + "]" * 100000,
}


@pytest.mark.parametrize("what", list(BAD_VALUES))
def test_a_bad_line_at_1500_of_2000_imports_nothing(tmp_path, lines, what):
    db = open_database(f"sqlite:///{tmp_path / 'a.db'}")
    before = snapshot(db)
    bad = BAD_VALUES[what]
    if bad == "HUGE":
        text = json.dumps(lines[1499]).replace('"cost": ', '"cost": ' + "9" * 5000 + ", \"_\": ", 1)
    elif isinstance(bad, str):
        text = bad
    else:
        text = json.dumps({**lines[1499], bad[0]: bad[1]})
    path = write(tmp_path / "bad.jsonl", lines, {1499: text})
    with pytest.raises(UsageError, match=r"bad\.jsonl:1500 .*nothing was imported"):
        import_file(db, path)
    assert snapshot(db) == before
    db.close()


def test_a_failure_after_some_batches_were_written_imports_nothing(tmp_path, lines, monkeypatch):
    """Rows are sent in batches inside one transaction: a database error on the third batch undoes the first two."""
    from autotune.errors import DatabaseError

    db = open_database(f"sqlite:///{tmp_path / 'a.db'}")
    before = snapshot(db)
    calls = []
    real = db.insert_rows

    def failing_insert(s, rows):
        calls.append(len(rows))
        if len(calls) == 3:
            from sqlalchemy.exc import OperationalError

            raise OperationalError("INSERT", {}, Exception("disk full"))
        return real(s, rows)

    monkeypatch.setattr(db, "insert_rows", failing_insert)
    with pytest.raises(DatabaseError, match="disk full"):
        import_file(db, write(tmp_path / "ok.jsonl", lines), batch=500)
    assert calls == [500, 500, 500]
    monkeypatch.undo()
    assert snapshot(db) == before
    db.close()


def test_a_campaign_stored_for_another_task_is_refused(tmp_path, lines):
    db = open_database(f"sqlite:///{tmp_path / 'a.db'}")
    import_file(db, write(tmp_path / "first.jsonl", lines[:10]))
    before = snapshot(db)
    other = json.loads(json.dumps(lines[10]))
    from autotune.types import Task

    other["task"]["params"] = {"other": 1}
    other["task"]["key"] = Task(other["task"]["kind"], other["task"]["name"], other["task"]["params"]).key
    with pytest.raises(UsageError, match="another task or device; nothing was imported"):
        import_file(db, write(tmp_path / "clash.jsonl", [other]))
    assert snapshot(db) == before
    db.close()
