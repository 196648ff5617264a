"""Shared fixtures of the dashboard tests: a database with one campaign of every kind made by the real
drivers (replay, kernel, graph, parallel), a warm start across two devices, a campaign that reuses
another's trials, and large synthetic campaigns inserted in bulk."""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from autotune.db import open_database
from autotune.types import Device, Task

#: trials of the large campaign of the shared database
BULK_N = 100_000

#: the synthetic space: knob -> values (tile_x x tile_y x unroll x vector x order x threads = 1,048,576 points)
KNOBS = {"tile_x": [1, 2, 4, 8, 16, 32, 64, 128], "tile_y": [1, 2, 4, 8, 16, 32, 64, 128], "unroll": [1, 2, 4, 8],
         "vector": [1, 2, 4, 8], "order": ["ij", "ji"], "threads": list(range(1, 513))}
FAILURES = ("COMPILE_ERROR", "RUNTIME_ERROR", "TIMEOUT", "INVALID")


def _decode(indices: np.ndarray) -> dict[str, np.ndarray]:
    """Each knob's value index of every point (mixed radix over KNOBS)."""
    out = {}
    for name, values in KNOBS.items():
        indices, out[name] = np.divmod(indices, len(values))
    return out


def _costs(picks: dict[str, np.ndarray], noise: np.ndarray) -> np.ndarray:
    """A smooth cost with one optimum (tile 16x32, unroll 4, vector 4, ij, 256 threads), mostly tile-driven."""
    return 1e-3 * noise * (1.0 + 0.6 * (picks["tile_x"] - 4) ** 2 + 0.4 * (picks["tile_y"] - 5) ** 2
                           + 0.2 * (picks["unroll"] - 2) ** 2 + 0.1 * (picks["vector"] - 2) ** 2
                           + 0.3 * picks["order"] + 0.05 * np.abs(picks["threads"] + 1 - 256) / 256)


def insert_bulk_campaign(url: str, name: str, n: int, seed: int = 0, device: str = "Synthetic GPU") -> dict:
    """A finished campaign of ``n`` distinct trials (about 4% failures) on a synthetic kernel task, inserted
    in bulk (Database.insert_rows: one executemany) and linked to the campaign in one INSERT ... SELECT.
    Returns the campaign's name, its best cost and its status counts."""
    total = math.prod(len(v) for v in KNOBS.values())
    assert n <= total
    rng = np.random.default_rng(seed)
    # in the order of their keys: the unique index on (task, device, key) then grows at its end
    keyed = sorted((hashlib.blake2b(b"%d" % i, digest_size=8).hexdigest(), i)
                   for i in rng.choice(total, size=n, replace=False).tolist())
    indices = np.array([i for _, i in keyed])
    noise = rng.lognormal(0.0, 0.05, size=n)
    fail = rng.random(n)
    sim = rng.uniform(0.05, 0.5, size=n).tolist()
    task = Task("kernel", "synthetic", {"space": {k: len(v) for k, v in KNOBS.items()}})
    dev = Device(device, "cuda", {"model": device, "synthetic": True})
    db = open_database(url)
    try:
        row, _ = db.open_campaign(name, task, dev, "random", {"algorithm_options": {}, "seed": seed, "batch": 64,
                                                               "budget": {"trials": n}})
        tid, did = db.task_id(task), db.device_id(dev)
        picks = _decode(indices)
        costs = _costs(picks, noise).tolist()
        values = {k: [KNOBS[k][i] for i in v.tolist()] for k, v in picks.items()}
        statuses = [FAILURES[int(f * 100)] if f < 0.04 else "OK" for f in fail.tolist()]
        cid, day = row.id, datetime(2025, 1, 1)
        counts = dict(zip(*np.unique(statuses, return_counts=True)))
        best = min(c for c, st in zip(costs, statuses) if st == "OK")
        base = {"task_id": tid, "device_id": did, "campaign_id": cid, "predicted": None, "build_s": 0.0, "run_s": 0.0,
                "meta": {}, "worker": "bulk"}
        rows = [{**base, "candidate_key": keyed[i][0],
                 "candidate": {k: v[i] for k, v in values.items()}, "status": st,
                 "cost": costs[i] if st == "OK" else None, "times": [costs[i]] if st == "OK" else [],
                 "error": "" if st == "OK" else f"{st.lower()}: synthetic failure", "simulated_s": sim[i],
                 "created": day + timedelta(milliseconds=10 * i)}
                for i, st in enumerate(statuses)]
        with db.session() as s:
            if db.dialect == "sqlite":  # room for the indexes' pages: random keys would otherwise thrash the cache
                s.execute(text("PRAGMA cache_size=-262144"))
            for i in range(0, n, 50_000):
                db.insert_rows(s, rows[i:i + 50_000])
            s.execute(text("INSERT INTO campaign_trials (campaign_id, trial_id, reused) "
                           "SELECT :c, id, :r FROM trials WHERE campaign_id = :c ORDER BY id"), {"c": row.id, "r": False})
        db.set_campaign_status(row.id, "finished")
    finally:
        db.close()
    return {"name": name, "best": best, "counts": {str(k): int(v) for k, v in counts.items()}, "n": n}


@pytest.fixture(scope="session")
def bulk_campaign():
    """insert_bulk_campaign, for tests that make their own database."""
    return insert_bulk_campaign


def _graph_campaign(url: str, folder) -> bool:
    """A small graph campaign (resnet50, small) on the "fake" op-timing backend; False without onnx."""
    try:
        import onnx

        from autotune.runners.graph import BACKENDS
        from autotune.search_spaces.graphs import model_zoo
        from autotune.testing.graphs import fake_backend
    except ImportError:
        return False
    from autotune.drivers.graph import optimize_graph

    path = folder / "resnet50.onnx"
    onnx.save(model_zoo.build("resnet50", small=True), path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(BACKENDS, "fake", fake_backend)
        optimize_graph(path, device="fake", trials=24, batch=8, db=url, campaign="graph-demo", rounds=3)
    return True


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory) -> dict:
    """The shared database (SQLite, in a temporary folder): campaigns replay-demo (60 trials, XGBoost
    cost model: retrains stored), kernel-demo (a C softmax on this CPU), graph-demo, parallel-demo,
    toy-turing, toy-reuse (the same search: looks up toy-turing's trials, then measures its own) and
    toy-ampere-warm (a warm start from toy-turing's device), bulk-small (3,000 synthetic trials on a
    second device) and bulk-100k (BULK_N synthetic trials)."""
    from autotune.drivers.kernel import tune_template
    from autotune.drivers.parallel import parallelize
    from autotune.drivers.replay import tune_replay
    from autotune.testing.caches import ampere_time, turing_time, write_cache

    folder = tmp_path_factory.mktemp("dashboard")
    url = f"sqlite:///{folder / 'demo.db'}"
    tune_replay("example:pnpoly-rtx3090", trials=60, db=url, campaign="replay-demo")
    with pytest.MonkeyPatch.context() as mp:  # the kernel builds and the graph search work in this folder
        mp.setattr(tempfile, "tempdir", str(folder))
        tune_template("softmax", "16,96", "cpu", algorithm="random", cost_model=None, trials=6, batch=3, db=url,
                      threads=1, campaign="kernel-demo")
        graph = _graph_campaign(url, folder)
    parallelize("mlp-unity", "p100-4x4", 256, "mcmc", trials=30, seed=1, db=url, campaign="parallel-demo")
    turing = write_cache(folder / "turing.json.gz", "NVIDIA TITAN RTX", turing_time)
    ampere = write_cache(folder / "ampere.json.gz", "NVIDIA GeForce RTX 3090", ampere_time)
    tune_replay(turing, algorithm="random", cost_model=None, trials=24, db=url, campaign="toy-turing")
    # the same search again: its first 24 candidates are toy-turing's trials, looked up, then 6 of its own
    tune_replay(turing, algorithm="random", cost_model=None, trials=6, db=url, campaign="toy-reuse")
    tune_replay(ampere, algorithm="random", cost_model=None, trials=12, db=url, campaign="toy-ampere-warm",
                transfer_from="NVIDIA TITAN RTX", transfer_top=4)
    small = insert_bulk_campaign(url, "bulk-small", 3000, seed=1, device="Other Synthetic GPU")
    big = insert_bulk_campaign(url, "bulk-100k", BULK_N, seed=0)
    return {"url": url, "folder": folder, "graph": graph, "bulk": big, "bulk_small": small}


@pytest.fixture(scope="module")
def client(demo_db):
    """The dashboard over the shared database, through Starlette's test client (no warm-up thread)."""
    from starlette.testclient import TestClient

    from autotune.dashboard.app import create_app

    with TestClient(create_app(demo_db["url"], warm=False)) as c:
        yield c


# -- the browser tests' (tests/dashboard/test_dashboard_browser*.py; their helpers in browser_pages.py)

@pytest.fixture(scope="module")
def browser():
    """Headless Chromium, one per test module."""
    from browser_pages import chromium_path
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    """Where screenshots go: $AUTOTUNE_SCREENSHOTS when set, else a tmp folder of the module's."""
    out = os.environ.get("AUTOTUNE_SCREENSHOTS")
    folder = Path(out) if out else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder
