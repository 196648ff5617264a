"""`autotune predict`: a warm-started campaign's model, a recorded space's points only, damaged or untrained models."""

from __future__ import annotations

import gzip
import json
import sqlite3
import zlib

import numpy as np
import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.cost_models.metrics import rank_correlation
from autotune.db import open_database
from autotune.db.logs import import_kt
from autotune.testing.caches import NAMES, ampere_time, turing_time, write_cache

cli = CliRunner()


def run(*args):
    return cli.invoke(app, [str(a) for a in args])


def constrained_cache(path, device_name, time_fn):
    """A cache of 4x4x2 knob values of which only the points with a * b <= 256 are recorded (the kernel's
    constraint): the product of tune_params holds points that are not in the space."""
    params = {"a": [1, 2, 4, 8], "b": [16, 32, 64, 128], "c": [0, 1]}
    cache = {}
    for a in params["a"]:
        for b in params["b"]:
            for c in params["c"]:
                if a * b > 256:
                    continue
                t = time_fn(a, b, c) / (a * b / 16)  # the largest tiles are the fastest, and not all are valid
                cache[f"{a},{b},{c}"] = {"a": a, "b": b, "c": c, "time": t, "times": [t], "compile_time": 100.0,
                                         "benchmark_time": 10.0}
    doc = {"device_name": device_name, "kernel_name": "tiles", "problem_size": [64], "tune_params_keys": list(params),
           "tune_params": params, "cache": cache}
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return str(path), cache


@pytest.fixture
def warm(tmp_path):
    """Two GPUs' recordings in the database, and a campaign on a third warm-started from them."""
    url = f"sqlite:///{tmp_path / 'p.db'}"
    db = open_database(url)
    import_kt(db, write_cache(tmp_path / "titan.json.gz", NAMES["turing"], turing_time))
    import_kt(db, write_cache(tmp_path / "r3090.json.gz", NAMES["ampere"], ampere_time))
    db.close()
    target = write_cache(tmp_path / "ti.json.gz", NAMES["turing2"], lambda a, b, c: 1.1 * turing_time(a, b, c))
    r = run("tune", "replay", "--cache", target, "--transfer-from", "auto", "--trials", 24, "--campaign", "w",
            "--db", url, "--no-progress")
    assert r.exit_code == 0, r.output
    return url, tmp_path


def test_predict_ranks_with_a_warm_started_campaigns_model(warm):
    url, _ = warm
    models = json.loads(run("models", "--campaign", "w", "--format", "json", "--db", url).stdout)
    assert models and {m["model"] for m in models} == {"xgb-pooled"}
    r = run("predict", "--campaign", "w", "--top", 32, "--format", "json", "--db", url)
    assert r.exit_code == 0, r.output
    ranked = json.loads(r.stdout)
    assert len(ranked) == 32 and {x["model"] for x in ranked} == {max(m["id"] for m in models)}
    # the model ranks the target's space much as the target's times do (a model loaded without its weights
    # would score at random)
    scores = np.array([x["score"] for x in ranked])
    speed = np.array([-np.log(turing_time(x["config"]["a"], x["config"]["b"], x["config"]["c"])) for x in ranked])
    assert rank_correlation(scores, speed) > 0.5
    r = run("predict", "--campaign", "w", "--top", 3, "--db", url)
    assert r.exit_code == 0 and f"on {NAMES['turing2']}" in r.stdout


def listed(url, *args) -> list[str]:
    r = run("predict", "--campaign", "t", "--top", 100, *args, "--format", "json", "--db", url)
    assert r.exit_code == 0, r.output
    return [",".join(str(x["config"][k]) for k in ("a", "b", "c")) for x in json.loads(r.stdout)]


@pytest.fixture
def recorded(tmp_path):
    """A campaign of 20 trials over a recording of 26 points (the 4x4x2 knob values with a * b <= 256)."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    path, cache = constrained_cache(tmp_path / "tiles.json.gz", NAMES["ampere"], ampere_time)
    r = run("tune", "replay", "--cache", path, "--algorithm", "random", "--trials", 20, "--campaign", "t",
            "--db", url, "--no-progress")
    assert r.exit_code == 0, r.output
    return url, path, cache


def test_predict_lists_only_the_points_of_a_recorded_space(recorded, tmp_path):
    url, path, cache = recorded
    # every point of the recording, measured or not (not the 32 combinations of tune_params, which include
    # tiles the kernel cannot run); --untried: the 6 the campaign did not measure
    every = listed(url)
    assert len(every) == len(set(every)) == len(cache) == 26 and set(every) == set(cache)
    untried = listed(url, "--untried")
    assert len(untried) == 6 and set(untried) < set(every)
    r = run("predict", "--campaign", "t", "--db", url)
    assert r.exit_code == 0 and "the best 10 of the 26 points of the recording" in r.stdout
    # without the recording's file, the configurations of the task the database holds
    (tmp_path / "tiles.json.gz").rename(tmp_path / "moved.json.gz")
    known = listed(url)
    assert len(known) == 20 and set(known) <= set(cache)
    r = run("predict", "--campaign", "t", "--db", url)
    assert r.exit_code == 0 and "the best 10 of the 20 configurations of the task in the database" in r.stdout


def test_a_configuration_the_recording_excludes_is_refused_naming_its_values(recorded, tmp_path):
    url, path, cache = recorded

    def refused(config: str, *words):
        r = run("predict", "--campaign", "t", "--config", config, "--db", url)
        assert r.exit_code == 2 and "Traceback" not in r.output and len(r.stderr.strip().splitlines()) == 1, r.output
        assert all(w in r.stderr for w in words), r.stderr

    refused('{"a": 8, "b": 64, "c": 0}', "not among the 26 points of the recording", "none has a=8 with b=64")
    refused('{"a": 3, "b": 64, "c": 0}', "a=3 is not a value of knob 'a'")
    # every point of the recording ranks, measured or not
    points = [json.dumps({k: rec[k] for k in "abc"}) for rec in cache.values()]
    r = run("predict", "--campaign", "t", *[x for p in points for x in ("--config", p)],
            "--format", "json", "--db", url)
    assert r.exit_code == 0 and len(json.loads(r.stdout)) == 26, r.output
    (tmp_path / "tiles.json.gz").rename(tmp_path / "moved.json.gz")
    refused('{"a": 8, "b": 64, "c": 0}', "not among the 20 configurations of the task in the database", "--cache file")


def test_a_damaged_or_untrained_model_is_one_line_and_status_2(warm):
    url, tmp_path = warm
    models = json.loads(run("models", "--campaign", "w", "--format", "json", "--db", url).stdout)
    latest = models[-1]["id"]
    db = sqlite3.connect(tmp_path / "p.db")
    with db:
        db.execute("UPDATE cost_models SET pinned = 1 WHERE id = ?", (latest,))
        db.execute("INSERT INTO cost_models (name, data, metrics, n_samples, format, created, task_id, device_id, "
                   "campaign_id, pinned) SELECT name, ?, metrics, n_samples, format, created, task_id, device_id, "
                   "campaign_id, 1 FROM cost_models WHERE id = ?", (b"garbage", latest))
        bad = db.execute("SELECT max(id) FROM cost_models").fetchone()[0]
        db.execute("INSERT INTO cost_models (name, data, metrics, n_samples, format, created, task_id, device_id, "
                   "campaign_id, pinned) SELECT 'xgb', ?, metrics, 3, format, created, task_id, device_id, "
                   "campaign_id, 1 FROM cost_models WHERE id = ?",
                   (zlib.compress(b'{"autotune_xgb": {"options": {}, "trained": false}}'), latest))
        untrained = db.execute("SELECT max(id) FROM cost_models").fetchone()[0]
    db.close()
    r = run("predict", "--model", bad, "--db", url)
    assert r.exit_code == 2 and f"model {bad} cannot be read" in r.stderr and "Traceback" not in r.output
    r = run("predict", "--model", untrained, "--db", url)
    assert r.exit_code == 2 and "stored untrained" in r.stderr
    assert run("predict", "--model", latest, "--db", url).exit_code == 0
