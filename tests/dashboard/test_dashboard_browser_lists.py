"""The dashboard in a real browser on a database of many campaigns, each on a task of its own: the lists page
through them, keep their filter and page in the URL hash across Back and a reload; and a replay of known
simulated time."""

from __future__ import annotations

import pytest
from browser_pages import kpis, kt_cache, needs_browser, open_page, serve, show, texts

pytestmark = needs_browser

#: campaigns (and tasks) of list_db besides sim-099: more than one page of the lists (50 rows)
LIST_N = 60


@pytest.fixture(scope="module")
def list_db(tmp_path_factory) -> dict:
    """Campaigns list-000 ... list-059, each on a task of its own (listed-000 ...; no trials), and sim-099: a
    replay of 9 recorded points of 100 ms of compile and 10 ms of benchmark time each, 0.99 simulated seconds."""
    from autotune.db import open_database
    from autotune.drivers.replay import tune_replay
    from autotune.types import Device, Task

    folder = tmp_path_factory.mktemp("lists")
    url = f"sqlite:///{folder / 'lists.db'}"
    tune_replay(kt_cache(folder / "sim.json.gz", "Sim GPU", "sim", {"a": [1, 2, 3], "b": [1, 2, 3]},
                         lambda p: 1.0 + p["a"] + 0.1 * p["b"]),
                trials=9, campaign="sim-099", algorithm="random", cost_model=None, db=url)
    db = open_database(url)
    try:
        device = Device("List CPU", "cpu", {})
        for i in range(LIST_N):
            db.open_campaign(f"list-{i:03d}", Task("knobs", f"listed-{i:03d}", {"i": i}), device, "random", {})
    finally:
        db.close()
    return {"url": url}


@pytest.fixture(scope="module")
def list_server(list_db):
    yield from serve(list_db["url"])


@pytest.fixture
def list_page(browser, list_server):
    """A browser page of each test's own on list_db's dashboard."""
    yield from open_page(browser, list_server)


def test_simulated_time_is_a_duration_where_charged(list_page, shots):
    """The figure is written as the page writes costs (4 significant digits with a unit, no trailing zeros) and
    shown for a replay, as the chart by simulated time (where none was charged: test_dashboard_browser.py)."""
    show(list_page, "#/campaign/sim-099", ["conv-simulated_s"], shots, "sim-099")
    assert kpis(list_page)["simulated time"] == "990 ms"
    assert list_page.errors == [], list_page.errors


def pager_text(page) -> str:
    return " ".join(texts(page, "#view .pager span"))


def test_the_task_list_pages_through_every_task(list_page, shots):
    total = LIST_N + 1  # and sim-099's task
    show(list_page, "#/tasks", [], shots, "tasks-1")
    first = texts(list_page, "#tasks-table tbody tr td:first-child")
    assert len(first) == 50 and pager_text(list_page) == f"1–50 of {total}", (len(first), pager_text(list_page))
    list_page.click("#tasks-pager button:has-text('Next')")
    list_page.wait_for_function(f"document.querySelector('#view .pager span').textContent === '51–{total} of {total}'")
    rest = texts(list_page, "#tasks-table tbody tr td:first-child")
    assert len(rest) == total - 50 and not set(first) & set(rest)
    assert list_page.evaluate("location.hash") == "#/tasks?page=2"
    list_page.fill("#task-search", "listed-05")
    list_page.wait_for_function("document.querySelector('#view .pager span').textContent === '1–10 of 10'")
    assert list_page.evaluate("location.hash") == "#/tasks?q=listed-05"
    assert list_page.errors == [], list_page.errors


def test_back_from_a_campaign_returns_to_the_list_page_and_filter(list_page, shots):
    """The campaign list's filter and page live in the URL hash: Back (and a reload) return to them."""
    show(list_page, "#/", [], shots, "campaigns-1")
    list_page.click("#view .pager button:has-text('Next')")
    list_page.wait_for_function("document.querySelector('#view .pager span').textContent.startsWith('51–')")
    assert list_page.evaluate("location.hash") == "#/?page=2"
    list_page.fill("#campaign-search", "list-0")  # list-000 ... list-059
    list_page.wait_for_function(f"document.querySelector('#view .pager span').textContent === '1–50 of {LIST_N}'")
    assert list_page.evaluate("location.hash") == "#/?q=list-0"
    list_page.click("#view .pager button:has-text('Next')")
    last = f"51–{LIST_N} of {LIST_N}"
    list_page.wait_for_function(f"document.querySelector('#view .pager span').textContent === '{last}'")
    assert list_page.evaluate("location.hash") == "#/?q=list-0&page=2"
    rows = texts(list_page, "#campaign-table tbody tr td:first-child")
    list_page.click("#campaign-table tbody tr a")
    list_page.wait_for_function("location.hash.startsWith('#/campaign/') && document.getElementById('view').dataset.ready === '1'")
    list_page.go_back()
    back = ("location.hash === '#/?q=list-0&page=2' && document.getElementById('view').dataset.ready === '1' "
            f"&& document.querySelector('#view .pager span').textContent === '{last}'")
    list_page.wait_for_function(back)
    assert list_page.input_value("#campaign-search") == "list-0"
    assert texts(list_page, "#campaign-table tbody tr td:first-child") == rows
    list_page.reload()
    list_page.wait_for_function(back)
    assert texts(list_page, "#campaign-table tbody tr td:first-child") == rows
    assert list_page.errors == [], list_page.errors


def test_a_list_answer_after_a_link_was_followed_leaves_the_address_alone(list_page, shots):
    """The list keeps its filter and page in the hash only while the hash is its own: an answer (a refresh, a
    page) that arrives after the address moved on, before the hashchange ran, must not write the list back."""
    show(list_page, "#/", [], shots, "list-then-link")
    moved = list_page.evaluate("async () => { const answer = liveRefresh(); "
                               "history.pushState(null, '', '#/campaign/sim-099'); await answer; return location.hash; }")
    assert moved == "#/campaign/sim-099"
    assert list_page.errors == [], list_page.errors
