"""Names in the dashboard's query parameters resolve as the command line's --campaign and --task do: an
unknown name answers 404 with the closest stored names, a case-only difference or a key prefix is the
stored name, and an ambiguous name answers 400 naming the choices."""

from __future__ import annotations

import pytest
from dashboard_helpers import get
from starlette.testclient import TestClient

from autotune.dashboard.app import create_app


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
