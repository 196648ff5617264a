"""`autotune import-kt A B`: every cache is read and checked before anything is stored, so a malformed one after
a good one creates no database file, and stores nothing in an existing database."""

import json

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import open_database, queries
from autotune.testing.caches import ampere_time, turing_time, write_cache

cli = CliRunner()


@pytest.mark.parametrize("bad", ["{}", "not json", json.dumps({"tune_params_keys": ["a"], "tune_params": {"a": [1]},
                                                                 "cache": {"1": {"a": 1}}})])
def test_a_malformed_cache_after_a_good_one_stores_nothing(tmp_path, bad):
    good = write_cache(tmp_path / "A100.json.gz", "A100", ampere_time)
    (tmp_path / "bad.json").write_text(bad)
    db = tmp_path / "new.db"
    r = cli.invoke(app, ["import-kt", good, str(tmp_path / "bad.json"), "--db", f"sqlite:///{db}"])
    assert r.exit_code == 2 and r.stdout == "" and r.stderr.startswith("error: cache file "), r.output
    assert len(r.stderr.splitlines()) == 1 and "bad.json" in r.stderr
    assert not db.exists()

    existing = f"sqlite:///{tmp_path / 'old.db'}"
    assert cli.invoke(app, ["import-kt", write_cache(tmp_path / "T4.json.gz", "T4", turing_time),
                            "--db", existing]).exit_code == 0
    r = cli.invoke(app, ["import-kt", good, str(tmp_path / "bad.json"), "--db", existing])
    assert r.exit_code == 2, r.output
    database = open_database(existing)
    assert queries.count_trials(database) == 32 == queries.count_trials(database, device="T4")  # none of A100's
    database.close()
