"""The dashboard's trial table (/api/trials): keyset pages disjoint and complete in every sort order, the
failures after every cost, reused trials marked, status and text filters, pages bounded by the scan
limit, and bad parameters answered 400."""

from __future__ import annotations

import base64
import json

import pytest
from dashboard_helpers import get, history, pages

from autotune.dashboard import paging


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


def test_bad_parameters_answer_400(client):
    body = get(client, "trials", expect=400, campaign="replay-demo", status="bogus")
    assert "unknown status 'bogus'" in body["error"] and "TIMEOUT" in body["error"] and "OK" in body["error"]
    assert get(client, "trials", campaign="bulk-small", status="timeout", limit=5)["trials"]

    assert "unknown sort" in get(client, "trials", expect=400, campaign="replay-demo", sort="speed")["error"]
    assert "cursor" in get(client, "trials", expect=400, campaign="replay-demo", after="!!")["error"]
    assert "integer" in get(client, "trials", expect=400, campaign="replay-demo", limit="many")["error"]
    assert "missing" in get(client, "campaign", expect=400)["error"]


@pytest.mark.parametrize("cursor", [{"i": "a"}, {"c": 1.0, "i": "a"}, {"c": "x", "i": 3}, {"c": 1.0}, {"i": True},
                                    {"c": None, "i": 2.5}, [1, 2]])
def test_a_cursor_of_another_shape_answers_400(client, cursor):
    after = base64.urlsafe_b64encode(json.dumps(cursor).encode()).decode().rstrip("=")
    for sort in ("id", "cost"):
        body = get(client, "trials", expect=400, campaign="toy-turing", sort=sort, after=after)
        assert body["error"].startswith("bad page cursor")


def test_text_filters_match_names_and_values_of_any_characters(db_url, tmp_path):
    """name=value for a parameter named with markup, an ampersand or spaces, and text holding a quote
    (which a configuration's JSON writes escaped), on SQLite and PostgreSQL alike."""
    import gzip
    import itertools

    from starlette.testclient import TestClient

    from autotune.dashboard.app import create_app
    from autotune.drivers.replay import tune_replay

    params = {"<i>tile</i>": [1, 2, 4, 8], "b&amp; c": [16, 32, 64], "%{y}mode": ["<b>x</b>", 'say "hi"']}
    cache = {",".join(map(str, v)): {**dict(zip(params, v)), "time": 1.0 + i, "times": [1.0 + i]}
             for i, v in enumerate(itertools.product(*params.values()))}
    path = tmp_path / "odd.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"device_name": "GPU", "kernel_name": "k", "problem_size": [1], "tune_params_keys": list(params),
                   "tune_params": params, "cache": cache}, f)
    tune_replay(str(path), algorithm="random", cost_model=None, trials=24, db=db_url, campaign="odd")
    with TestClient(create_app(db_url, warm=False)) as c:
        def matched(q):
            found = get(c, "trials", campaign="odd", q=q, limit=200)
            assert found["count"] == len(found["trials"])
            return [t["candidate"] for t in found["trials"]]

        assert len(matched("<i>tile</i>=4")) == 6 and all(t["<i>tile</i>"] == 4 for t in matched("<i>tile</i>=4"))
        assert len(matched("b&amp; c = 32")) == 8
        assert len(matched("%{y}mode=<b>x</b>")) == 12
        assert len(matched('%{y}mode=say "hi"')) == 12
        assert len(matched('say "hi"')) == 12 and len(matched('"hi"')) == 12
        assert matched("<i>tile</i>=3") == []
