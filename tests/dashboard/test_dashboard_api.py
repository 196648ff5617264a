"""The dashboard's JSON endpoints (Starlette TestClient, no browser) over the shared database of
conftest.py: a campaign's figures and convergence agree with its trials, the plots' sample and parameter
importance, the task, graph, parallel and cost-model views, the page and Plotly served locally, and the
same answers on PostgreSQL. The trial table's paging is in test_dashboard_trials.py, names in
test_dashboard_names.py, a database changing under the dashboard in test_dashboard_live.py and the
command in test_dashboard_cli.py."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess

import pytest
from dashboard_helpers import expected_points, get, history, pages
from starlette.testclient import TestClient

from autotune.cli.tables import PlainCost, seconds
from autotune.dashboard import data as dashboard_data
from autotune.dashboard.app import STATIC, create_app


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


def test_task_list_pages_with_its_total_and_filters(client):
    """The tasks page pages as the campaign list does: a page, its offset and the total, by name."""
    every = get(client, "tasks", limit=500)
    assert every["total"] == len(every["tasks"]) >= 4
    names = [t["name"] for t in every["tasks"]]
    assert names == sorted(names)
    paged = [t for off in range(0, every["total"], 2) for t in get(client, "tasks", limit=2, offset=off)["tasks"]]
    assert paged == every["tasks"]
    page = get(client, "tasks", limit=2, offset=2)
    assert (page["offset"], page["limit"], page["total"], len(page["tasks"])) == (2, 2, every["total"], 2)
    synthetic = get(client, "tasks", q="SYNTH")
    assert [t["name"] for t in synthetic["tasks"]] == ["synthetic"] and synthetic["total"] == 1
    assert get(client, "tasks", q="%")["total"] == 0  # % is a plain character
    assert get(client, "tasks", limit=10_000)["limit"] == 500
    get(client, "tasks", expect=400, limit="many")


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


def test_page_and_plotly_are_served_locally(client):
    index = client.get("/")
    assert index.status_code == 200 and "/static/app.js" in index.text and "/vendor/plotly.min.js" in index.text
    js = client.get("/vendor/plotly.min.js")
    assert js.status_code == 200 and len(js.content) > 1_000_000 and b"plotly" in js.content[:2000].lower()
    for name in ("app.js", "style.css"):
        assert client.get(f"/static/{name}").status_code == 200


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
        kernels = get(c, "tasks", q="KERNEL", limit=1)  # both tasks are of kind kernel: a page of one of two
        assert kernels["total"] == 2 and [t["name"] for t in kernels["tasks"]] == ["synthetic"]
        tasks = get(c, "tasks", q="Toy_K")
        assert tasks["total"] == 1 and [(t["name"], t["campaigns"]) for t in tasks["tasks"]] == [("toy_kernel", 2)]
        assert get(c, "campaign", expect=404, campaign="bulk-pq")["suggestions"][0] == "bulk-pg"


def test_the_campaign_filter_matches_its_text_as_it_is(client):
    every = get(client, "campaigns", limit=500)["total"]
    assert every >= 9 and get(client, "campaigns", q="%")["total"] == 0  # no name holds a %
    toy = get(client, "campaigns", q="y_k")["campaigns"]  # the task toy_kernel, not y-k or yak
    assert toy and all(c["task"] == "toy_kernel" for c in toy)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the page's script")
def test_the_page_writes_costs_as_the_command_line_tables_do():
    """The page's fmtCost (static/app.js) and the tables' `seconds` give the same text for every cost: seconds
    with a unit, rounded before the unit is chosen, and no unit for a minimized function's values."""
    source = (STATIC / "app.js").read_text()
    script = "".join(re.search(rf"^function {name}\(.*?^}}\n", source, re.S | re.M).group(0) for name in ("sig", "fmtCost"))
    values = [0.0, 1.3072e-05, 0.0087337, 0.99996, 1.0, 2.5, 12.3456, 999.96, 12345.6, 3.2e-10, 1e-14, 0.068, 123456.0,
              7.77777e-07]
    script += f"console.log(JSON.stringify({json.dumps(values)}.flatMap((v) => [fmtCost(v), fmtCost(v, 'function')])))"
    page = json.loads(subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True).stdout)
    assert page == [text for v in values for text in (seconds(v), seconds(PlainCost(v)))]
