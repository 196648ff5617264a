"""The dashboard's JSON endpoints (Starlette TestClient, no browser) over the shared database of
conftest.py: figures and convergence agree with the trials, paging is disjoint and complete in every
sort order, filters filter, unknown names answer 404 with the closest names, and the command line
refuses bad databases with one sentence."""

from __future__ import annotations

import itertools
import math
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from sqlalchemy import create_engine, text
from starlette.testclient import TestClient
from typer.testing import CliRunner

from autotune.cli.main import app as cli_app
from autotune.dashboard import data as dashboard_data
from autotune.dashboard import paging
from autotune.dashboard.app import create_app


@pytest.fixture(scope="module")
def client(demo_db):
    with TestClient(create_app(demo_db["url"], warm=False)) as c:
        yield c


def get(client, path, expect=200, **params):
    r = client.get(f"/api/{path}", params=params)
    assert r.status_code == expect, r.text[:500]
    return r.json()


def history(url: str, name: str) -> list[tuple]:
    """(trial id, cost, own, simulated_s, status) of every evaluation of a campaign, in its order, read
    with plain SQL."""
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT t.id, t.cost, t.campaign_id = c.id, t.simulated_s, t.status FROM campaign_trials l "
            "JOIN campaigns c ON c.id = l.campaign_id JOIN trials t ON t.id = l.trial_id "
            "WHERE c.name = :n ORDER BY l.id"), {"n": name}).all()
    engine.dispose()
    return [(i, cost, bool(own), sim, st) for i, cost, own, sim, st in rows]


def expected_points(rows) -> list[tuple]:
    best, out = math.inf, []
    for n, (tid, cost, _, _, _) in enumerate(rows, 1):
        if cost is not None and cost < best:
            best = cost
            out.append((n, tid, cost))
    return out


def test_campaign_list_counts_own_trials_and_reused_look_ups_apart(client, demo_db):
    listed = {c["name"]: c for c in get(client, "campaigns", limit=100)["campaigns"]}
    assert {"replay-demo", "kernel-demo", "parallel-demo", "toy-reuse", "bulk-100k"} <= set(listed)
    for name in ("toy-reuse", "replay-demo", "bulk-small"):
        rows = history(demo_db["url"], name)
        own = [r for r in rows if r[2]]
        c = listed[name]
        assert (c["measured"], c["reused"]) == (len(own), len(rows) - len(own))
        assert c["best_cost"] == min(r[1] for r in own if r[1] is not None)
        assert c["best_cost_including_reused"] == min(r[1] for r in rows if r[1] is not None)
    assert listed["toy-reuse"]["reused"] == 24 and listed["toy-reuse"]["measured"] == 6
    assert listed["bulk-100k"]["measured"] == demo_db["bulk"]["n"]
    assert listed["bulk-100k"]["best_cost"] == pytest.approx(demo_db["bulk"]["best"])
    page = get(client, "campaigns", q="toy", limit=2)
    assert page["total"] == 3 and len(page["campaigns"]) == 2
    assert all("toy" in c["name"] for c in page["campaigns"])


@pytest.mark.parametrize("name", ["replay-demo", "toy-reuse", "parallel-demo", "bulk-small", "bulk-100k"])
def test_convergence_improves_monotonically_and_ends_at_the_best(client, demo_db, name):
    conv = get(client, "convergence", campaign=name)
    rows = history(demo_db["url"], name)
    for key, kept in (("all", rows), ("own", [r for r in rows if r[2]])):
        series = conv[key]
        pts = series["points"]
        assert [(p["n"], p["trial"], p["cost"]) for p in pts] == expected_points(kept)
        assert all(a["cost"] > b["cost"] and a["n"] < b["n"] for a, b in itertools.pairwise(pts))
        assert all(a["simulated_s"] <= b["simulated_s"] and a["elapsed_s"] <= b["elapsed_s"] for a, b in itertools.pairwise(pts))
        assert series["n"] == series["end"]["n"] == len(kept)
        assert series["best"] == pts[-1]["cost"] == min(r[1] for r in kept if r[1] is not None)
        own_sim = sum(r[3] for r in kept if r[2])  # look-ups cost no simulated time
        assert series["end"]["simulated_s"] == pytest.approx(own_sim)
    assert conv["own"]["best"] == get(client, "campaign", campaign=name)["best_cost"]


def pages(client, name, limit, **filters) -> list[list[dict]]:
    out, after = [], None
    while True:
        page = get(client, "trials", campaign=name, limit=limit, **filters, **({"after": after} if after else {}))
        out.append(page["trials"])
        after = page["next"]
        if after is None:
            return out
        assert len(out) < 10_000


@pytest.mark.parametrize("sort", ["id", "-id", "cost", "-cost"])
def test_pages_are_disjoint_and_cover_every_trial_in_order(client, demo_db, sort):
    rows = history(demo_db["url"], "bulk-small")
    got = pages(client, "bulk-small", 170, sort=sort)
    assert all(len(p) == 170 for p in got[:-1])
    flat = [t for p in got for t in p]
    ids = [t["id"] for t in flat]
    assert len(ids) == len(set(ids)) == len(rows) and set(ids) == {r[0] for r in rows}
    if sort in ("id", "-id"):
        assert ids == sorted(ids, reverse=sort == "-id")
    else:
        costs = [t["cost"] for t in flat if t["cost"] is not None]
        assert costs == sorted(costs, reverse=sort == "-cost")
        n_ok = len(costs)
        assert all(t["cost"] is None for t in flat[n_ok:])  # failures after every cost, by id
        assert [t["id"] for t in flat[n_ok:]] == sorted(t["id"] for t in flat[n_ok:])


def test_a_page_that_ends_the_costs_exactly_is_followed_by_the_failures(client, demo_db):
    n_ok = demo_db["bulk_small"]["counts"]["OK"]
    limit = next(d for d in range(200, 1, -1) if n_ok % d == 0)
    got = pages(client, "bulk-small", limit, sort="cost")
    assert len(got[n_ok // limit - 1]) == limit and got[n_ok // limit - 1][-1]["cost"] is not None
    assert len([t for p in got for t in p]) == 3000 and got[n_ok // limit][0]["cost"] is None
    toy = pages(client, "toy-turing", 8, sort="cost")  # 24 trials, no failure: three pages, no empty fourth
    assert [len(p) for p in toy] == [8, 8, 8]


def test_reused_trials_are_in_the_table_and_marked(client, demo_db):
    flat = [t for p in pages(client, "toy-reuse", 7) for t in p]
    assert len(flat) == 30 and sum(t["reused"] for t in flat) == 24
    counted = get(client, "trials", campaign="toy-reuse", limit=5)
    assert counted["count"] == 30 and counted["count_exact"]


def test_status_and_text_filters(client, demo_db):
    counts = demo_db["bulk_small"]["counts"]
    flat = [t for p in pages(client, "bulk-small", 50, status="TIMEOUT") for t in p]
    assert len(flat) == counts["TIMEOUT"] and {t["status"] for t in flat} == {"TIMEOUT"}
    first = get(client, "trials", campaign="bulk-small", status="TIMEOUT", sort="cost")
    assert first["count"] == counts["TIMEOUT"] and {t["status"] for t in first["trials"]} == {"TIMEOUT"}
    ok = get(client, "trials", campaign="bulk-small", status="OK", sort="-cost", limit=20)
    assert ok["count"] == counts["OK"] and all(t["cost"] is not None for t in ok["trials"])
    tile = [t for p in pages(client, "bulk-small", 200, q="tile_x=16") for t in p]
    assert tile and all(t["candidate"]["tile_x"] == 16 for t in tile)
    every = [t for p in pages(client, "bulk-small", 200) for t in p]
    assert len(tile) == sum(t["candidate"]["tile_x"] == 16 for t in every)
    order = get(client, "trials", campaign="bulk-small", q="order=ji", limit=200)
    assert order["trials"] and all(t["candidate"]["order"] == "ji" for t in order["trials"])
    failed = [t for p in pages(client, "bulk-small", 200, q="SYNTHETIC FAILURE") for t in p]
    assert len(failed) == sum(v for k, v in counts.items() if k != "OK")
    assert get(client, "trials", campaign="bulk-small", q="no-such-text")["trials"] == []


def test_a_filtered_page_stops_at_the_scan_limit_and_goes_on_from_there(client, demo_db, monkeypatch):
    monkeypatch.setattr(paging, "SCAN_LIMIT", 200)
    counts = demo_db["bulk_small"]["counts"]
    for sort in ("id", "cost"):
        got = pages(client, "bulk-small", 25, status="RUNTIME_ERROR", sort=sort)
        flat = [t for p in got for t in p]
        assert len(flat) == len({t["id"] for t in flat}) == counts["RUNTIME_ERROR"]
        assert len(got) > counts["RUNTIME_ERROR"] / 25 + 1  # partial pages: each looked at 200 trials at most
    first = get(client, "trials", campaign="bulk-small", q="tile_x=128", sort="cost", limit=50)
    assert first["partial"] or len(first["trials"]) == 50


def test_the_large_campaign_pages_from_anywhere(client, demo_db):
    page = get(client, "trials", campaign="bulk-100k", sort="cost", limit=100)
    assert page["trials"][0]["cost"] == pytest.approx(demo_db["bulk"]["best"]) and page["count"] == demo_db["bulk"]["n"]
    nxt = get(client, "trials", campaign="bulk-100k", sort="cost", limit=100, after=page["next"])
    assert nxt["trials"][0]["cost"] >= page["trials"][-1]["cost"]
    last = get(client, "trials", campaign="bulk-100k", sort="-id", limit=10)
    assert [t["id"] for t in last["trials"]] == sorted((t["id"] for t in last["trials"]), reverse=True)


def test_sample_and_importance_are_bounded_and_find_the_tiles(client, demo_db):
    s = get(client, "sample", campaign="bulk-100k")
    assert len(s["trials"]) <= dashboard_data.SAMPLE_SIZE and s["n"] == demo_db["bulk"]["n"]
    assert len({t["id"] for t in s["trials"]}) == len(s["trials"])
    assert min(t["cost"] for t in s["trials"] if t["cost"] is not None) == pytest.approx(demo_db["bulk"]["best"])
    assert {p["name"] for p in s["params"]} == {"tile_x", "tile_y", "unroll", "vector", "order", "threads"}
    assert sum(not t["best"] for t in s["trials"]) > 1000
    imp = get(client, "importance", campaign="bulk-100k")
    assert {p["name"] for p in imp["params"][:2]} == {"tile_x", "tile_y"} and imp["n"] > 1000
    assert all(0.0 <= p["share"] <= 1.0 for p in imp["params"])
    small = get(client, "sample", campaign="replay-demo")
    assert len(small["trials"]) == 60  # a small campaign is shown whole


def test_task_page_compares_devices_and_shows_transfer(client):
    toy = get(client, "task", task="toy_kernel")
    assert {d["device"] for d in toy["devices"]} == {"NVIDIA TITAN RTX", "NVIDIA GeForce RTX 3090"}
    costs = [d["best_cost"] for d in toy["devices"]]
    assert costs == sorted(costs)  # fastest first
    turing = next(d for d in toy["devices"] if d["device"] == "NVIDIA TITAN RTX")
    assert turing["best_cost"] == pytest.approx(0.001)
    by_name = {c["name"]: c for c in toy["campaigns"]}
    assert by_name["toy-turing"]["transfer"] is None
    warm = by_name["toy-ampere-warm"]["transfer"]
    assert warm["algorithm"].startswith("warm-start") and warm["options"]["top_k"] == 4
    synthetic = get(client, "task", task="synthetic")
    assert len(synthetic["devices"]) == 2 and synthetic["devices"][0]["trials"] in (3000, 100_000)
    assert get(client, "task", task=toy["key"])["name"] == "toy_kernel"
    assert {t["name"] for t in get(client, "tasks")["tasks"]} >= {"toy_kernel", "synthetic", "cn_pnpoly"}


def test_graph_and_parallel_views(client, demo_db):
    if demo_db["graph"]:
        g = get(client, "graph", campaign="graph-demo")
        assert g["best"]["cost"] == get(client, "campaign", campaign="graph-demo")["best_cost"]
        assert all(isinstance(s[0], str) for s in g["best"]["steps"])
        assert sum(g["best"]["rule_counts"].values()) == len(g["best"]["steps"])
        assert g["initial"] is not None and g["initial"]["cost"] >= g["best"]["cost"]
    p = get(client, "parallel", campaign="parallel-demo")
    assert p["best"]["devices"] == 16 and p["best"]["cost"] == get(client, "campaign", campaign="parallel-demo")["best_cost"]
    layout = p["best"]["layout"]
    assert layout and all(0 <= o["start"] <= o["end"] < 16 and o["devices"] == o["end"] - o["start"] + 1 for o in layout)
    assert p["timeline"][-1]["trial"] == p["best"]["trial"]
    assert [t["cost"] for t in p["timeline"]] == sorted((t["cost"] for t in p["timeline"]), reverse=True)


def test_cost_models_of_a_campaign_and_of_all(client):
    mine = get(client, "cost-models", campaign="replay-demo")["models"]
    assert len(mine) >= 5 and all(m["campaign"] == "replay-demo" for m in mine)
    assert [m["n_samples"] for m in mine] == sorted(m["n_samples"] for m in mine)
    assert any("spearman" in m["metrics"] for m in mine)
    every = get(client, "cost-models")["models"]
    assert len(every) >= len(mine)


def test_unknown_names_answer_404_with_the_closest(client):
    for path in ("campaign", "convergence", "trials", "sample", "importance", "graph", "parallel", "cost-models"):
        body = get(client, path, expect=404, campaign="replay-dem")
        assert "unknown campaign 'replay-dem'" in body["error"] and body["suggestions"][0] == "replay-demo"
    body = get(client, "task", expect=404, task="toy_kernal")
    assert "toy_kernel" in body["suggestions"]


def test_names_resolve_as_on_the_command_line(client):
    """A case-only difference or a key prefix of 6+ characters is the stored campaign or task, as
    `autotune trials --campaign/--task` take them; the answer carries the stored name."""
    exact = get(client, "campaign", campaign="replay-demo")
    assert get(client, "campaign", campaign="REPLAY-DEMO")["name"] == "replay-demo"
    assert get(client, "convergence", campaign="Replay-Demo")["own"] == get(client, "convergence", campaign="replay-demo")["own"]
    assert get(client, "trials", campaign="REPLAY-DEMO", limit=5)["count"] == exact["evaluations"]
    assert all(m["campaign"] == "replay-demo" for m in get(client, "cost-models", campaign="replay-DEMO")["models"])
    toy = get(client, "task", task="toy_kernel")
    assert get(client, "task", task="TOY_KERNEL")["key"] == toy["key"]
    for n in (6, 8):
        assert get(client, "task", task=toy["key"][:n])["key"] == toy["key"]
    body = get(client, "task", expect=404, task=toy["key"][:5])  # too short to be taken as a key prefix
    assert "unknown task" in body["error"]


def test_unknown_names_suggest_as_the_command_line_does(client):
    body = get(client, "campaign", expect=404, campaign="REPLAY-DEM")
    assert body["suggestions"][0] == "replay-demo" and "closest: replay-demo" in body["error"]
    assert get(client, "task", expect=404, task="TOY_KERNAL")["suggestions"] == ["toy_kernel"]


@pytest.fixture(scope="module")
def shared_names(tmp_path_factory):
    """Two tasks named own.objective (their params differ), and campaigns Run and RUN, on one device."""
    from autotune.db import open_database
    from autotune.types import Device, Task

    url = f"sqlite:///{tmp_path_factory.mktemp('names') / 'names.db'}"
    db = open_database(url)
    try:
        dev = Device("Synthetic GPU", "cuda", {"model": "Synthetic GPU"})
        tasks = [Task("kernel", "own.objective", {"size": n}) for n in (1, 2)]
        db.open_campaign("Run", tasks[0], dev, "random", {})
        db.open_campaign("RUN", tasks[1], dev, "random", {})
    finally:
        db.close()
    with TestClient(create_app(url, warm=False)) as c:
        yield c, [t.key for t in tasks]


def test_a_name_several_tasks_share_is_refused_naming_their_keys(shared_names):
    client, keys = shared_names
    body = get(client, "task", expect=400, task="own.objective")
    assert "several tasks" in body["error"] and all(k in body["error"] for k in keys)
    assert sorted(body["candidates"]) == sorted(keys)
    assert get(client, "task", expect=400, task="OWN.OBJECTIVE")["candidates"] == body["candidates"]
    for k in keys:
        assert get(client, "task", task=k)["key"] == k
        assert get(client, "task", task=k[:10])["key"] == k


def test_a_case_only_difference_from_two_campaigns_is_ambiguous(shared_names):
    client, _ = shared_names
    assert get(client, "campaign", campaign="RUN")["name"] == "RUN"
    body = get(client, "campaign", expect=400, campaign="run")
    assert "ambiguous" in body["error"] and "Run" in body["error"] and "RUN" in body["error"]


def test_bad_parameters_answer_400(client):
    body = get(client, "trials", expect=400, campaign="replay-demo", status="bogus")
    assert "unknown status 'bogus'" in body["error"] and "TIMEOUT" in body["error"] and "OK" in body["error"]
    assert get(client, "trials", campaign="bulk-small", status="timeout", limit=5)["trials"]

    assert "unknown sort" in get(client, "trials", expect=400, campaign="replay-demo", sort="speed")["error"]
    assert "cursor" in get(client, "trials", expect=400, campaign="replay-demo", after="!!")["error"]
    assert "integer" in get(client, "trials", expect=400, campaign="replay-demo", limit="many")["error"]
    assert "missing" in get(client, "campaign", expect=400)["error"]


def test_page_and_plotly_are_served_locally(client):
    index = client.get("/")
    assert index.status_code == 200 and "/static/app.js" in index.text and "/vendor/plotly.min.js" in index.text
    js = client.get("/vendor/plotly.min.js")
    assert js.status_code == 200 and len(js.content) > 1_000_000 and b"plotly" in js.content[:2000].lower()
    for name in ("app.js", "style.css"):
        assert client.get(f"/static/{name}").status_code == 200


def test_a_running_campaign_is_followed_live(tmp_path):
    from autotune.drivers.replay import tune_replay
    from autotune.testing.caches import turing_time, write_cache

    cache = write_cache(tmp_path / "t.json.gz", "NVIDIA TITAN RTX", turing_time)
    url = f"sqlite:///{tmp_path / 'live.db'}"
    tune_replay(cache, algorithm="random", cost_model=None, trials=8, db=url, campaign="live")
    with TestClient(create_app(url, warm=False)) as c:
        assert get(c, "convergence", campaign="live")["own"]["n"] == 8
        assert get(c, "trials", campaign="live", limit=50)["count"] == 8
        tune_replay(cache, algorithm="random", cost_model=None, trials=20, db=url, campaign="live")  # resumed
        conv = get(c, "convergence", campaign="live")
        assert conv["own"]["n"] == 20 and conv["own"]["best"] == min(r[1] for r in history(url, "live"))
        assert get(c, "campaign", campaign="live")["measured"] == 20
        assert len(get(c, "sample", campaign="live")["trials"]) == 20


# -- the command line ---------------------------------------------------------------------------------
def test_bad_databases_are_one_sentence_and_exit_2(tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    cases = [(f"sqlite:///{tmp_path / 'missing.db'}", "no database file"), ("nosuch://x", "unsupported backend"),
             (f"sqlite:///{empty}", "no autotune schema"), ("sqlite:///", "names no file")]
    for url, words in cases:
        r = CliRunner().invoke(cli_app, ["dashboard", "--db", url, "--port", "1"])
        assert r.exit_code == 2, (url, r.output)
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and words in lines[0] and "Traceback" not in r.output, (url, r.output)
    assert not (tmp_path / "missing.db").exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_port_in_use_is_a_usage_error(demo_db):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = CliRunner().invoke(cli_app, ["dashboard", "--db", demo_db["url"], "--port", str(port)])
    assert r.exit_code == 2 and f"port {port}" in r.output and "in use" in r.output


def test_the_command_serves_until_ctrl_c(demo_db, tmp_path):
    import httpx

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", "from autotune.cli.main import main; main()", "dashboard",
                             "--db", demo_db["url"], "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        line = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/" in line, line + proc.stderr.read()
        deadline = time.monotonic() + 20
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/api/campaigns", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the dashboard did not answer"
                time.sleep(0.1)
        assert r.status_code == 200 and r.json()["total"] >= 9
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "dashboard stopped" in out and "Traceback" not in err
    assert os.listdir(tmp_path) == []


def test_postgresql_serves_the_same_answers(postgres_url, tmp_path, bulk_campaign):
    """The reads on PostgreSQL (skipped without a server): figures, convergence, paging in both orders,
    filters (ILIKE on the configuration's JSON text), the sample and a task's devices."""
    from autotune.drivers.replay import tune_replay
    from autotune.testing.caches import turing_time, write_cache

    small = bulk_campaign(postgres_url, "bulk-pg", 1500, seed=3)
    cache = write_cache(tmp_path / "t.json.gz", "NVIDIA TITAN RTX", turing_time)
    tune_replay(cache, algorithm="random", cost_model=None, trials=16, db=postgres_url, campaign="toy")
    tune_replay(cache, algorithm="random", cost_model=None, trials=4, db=postgres_url, campaign="toy-again")
    with TestClient(create_app(postgres_url, warm=False)) as c:
        listed = {x["name"]: x for x in get(c, "campaigns")["campaigns"]}
        assert listed["toy-again"]["reused"] == 16 and listed["toy-again"]["measured"] == 4
        assert listed["bulk-pg"]["best_cost"] == pytest.approx(small["best"])
        rows = history(postgres_url, "bulk-pg")
        conv = get(c, "convergence", campaign="bulk-pg")
        assert [(p["n"], p["trial"], p["cost"]) for p in conv["all"]["points"]] == expected_points(rows)
        for sort in ("id", "-cost"):
            flat = [t for p in pages(c, "bulk-pg", 200, sort=sort) for t in p]
            assert sorted(t["id"] for t in flat) == sorted(r[0] for r in rows)
        tile = [t for p in pages(c, "bulk-pg", 200, q="tile_y=32") for t in p]
        assert tile and all(t["candidate"]["tile_y"] == 32 for t in tile)
        assert len([t for p in pages(c, "bulk-pg", 200, status="TIMEOUT") for t in p]) == small["counts"].get("TIMEOUT", 0)
        assert len(get(c, "sample", campaign="bulk-pg")["trials"]) == 1500
        assert get(c, "task", task="toy_kernel")["devices"][0]["trials"] == 20
        assert get(c, "campaign", expect=404, campaign="bulk-pq")["suggestions"][0] == "bulk-pg"


def test_figures_being_read_by_another_thread_answer_at_once_marked_incomplete(demo_db):
    from autotune.dashboard.data import DashboardData, open_dashboard_db

    data = DashboardData(open_dashboard_db(demo_db["url"]))
    try:
        row = data._campaign_row("bulk-small")[0]
        summ, complete = data.summary_of(row.id)
        assert complete and summ.all.n == 3000
        with summ.lock:  # as while the warm-up reads a large history
            t0 = time.perf_counter()
            listed = {c["name"]: c for c in data.campaigns()["campaigns"]}
            page = data.trials("bulk-small", limit=5)
            assert time.perf_counter() - t0 < 5
        assert listed["bulk-small"]["complete"] is False and listed["toy-turing"]["complete"] is True
        assert data.campaign("bulk-small")["complete"] and not page["count_exact"]
    finally:
        data.db.close()


def test_a_database_failing_under_the_dashboard_answers_503_in_one_line(tmp_path):
    from autotune.drivers.replay import tune_replay
    from autotune.testing.caches import turing_time, write_cache

    url = f"sqlite:///{tmp_path / 'gone.db'}"
    tune_replay(write_cache(tmp_path / "t.json.gz", "NVIDIA TITAN RTX", turing_time), algorithm="random",
                cost_model=None, trials=4, db=url, campaign="c")
    with TestClient(create_app(url, warm=False)) as c:
        assert get(c, "trials", campaign="c")["count"] == 4
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE campaign_trials"))
        engine.dispose()
        body = get(c, "trials", expect=503, campaign="c")
        assert body["error"].startswith("database error on sqlite:///") and "\n" not in body["error"]
