"""The dashboard in a real browser: headless Chromium (the system's, through Playwright) opens the
pages of the shared database of conftest.py served by uvicorn (the campaign list, a campaign of each
kind, a task, the cost models), checks that the plots drew and that the console stayed free of
errors, and pages through the 100,000-trial campaign's table, each page in under a second. A small database of
awkward campaigns and one of many campaigns (the lists' paging, their filter and page kept in the URL hash
across Back) follow. Screenshots go to $AUTOTUNE_SCREENSHOTS when set, else to the test's tmp folder.

Needs the playwright package and a Chromium: $AUTOTUNE_CHROMIUM, or chromium, chromium-browser or
google-chrome on PATH (Debian/Ubuntu: apt-get install -y chromium). Without them the tests skip."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest

#: the longest a page of the trial table may take, from the click to the table updated (seconds)
PAGE_LIMIT_S = 1.0


def chromium_path() -> str | None:
    given = os.environ.get("AUTOTUNE_CHROMIUM")
    if given:
        return given if os.path.isfile(given) else shutil.which(given)
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def missing() -> str | None:
    """Why the browser tests cannot run here (None when they can): checked before any fixture is built."""
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (pip install playwright)"
    if chromium_path() is None:
        return ("no Chromium found: set AUTOTUNE_CHROMIUM, or install one (Debian/Ubuntu: apt-get install -y "
                "chromium); Playwright's own browser download is not used")
    return None


pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def server(demo_db):
    yield from serve(demo_db["url"])


def serve(url: str):
    """The dashboard app served by uvicorn in a background thread on a free port; yields its base URL."""
    import httpx
    import uvicorn

    from autotune.dashboard.app import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(create_app(url), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the dashboard server did not start"
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    while not all(c["complete"] for c in httpx.get(f"{base}/api/campaigns?limit=500").json()["campaigns"]):
        assert time.monotonic() < deadline, "the start-up warm-up did not read every campaign"
        time.sleep(0.1)  # the warm-up reads the histories: pages then show whole figures at once
    yield base
    srv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    out = os.environ.get("AUTOTUNE_SCREENSHOTS")
    folder = Path(out) if out else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_page(browser, url: str, dialogs: bool = False):
    """A browser page (a context, so a history, of its own) at ``url``'s campaign list, its console errors and
    uncaught exceptions collected in ``page.errors`` (and, with ``dialogs``, any dialog, dismissed: an alert()
    run from a name); yields it, then closes it."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.errors = []
    pg.on("console", lambda m: pg.errors.append(f"console: {m.text}") if m.type == "error" else None)
    pg.on("pageerror", lambda e: pg.errors.append(f"pageerror: {e}"))
    if dialogs:
        pg.on("dialog", lambda d: (pg.errors.append(f"dialog: {d.message}"), d.dismiss()))
    pg.goto(url + "/#/")
    yield pg
    ctx.close()


@pytest.fixture(scope="module")
def page(browser, server):
    """One browser page for the module's tests on the main database."""
    yield from open_page(browser, server)


def show(page, route: str, plots: list[str], shots: Path, shot: str) -> None:
    """Go to ``route`` (hash navigation in the one page), wait until it has drawn, check that each
    named plot is a Plotly plot with an SVG, and save a screenshot."""
    page.evaluate("r => { document.getElementById('view').dataset.ready = '0';"
                  " if (location.hash === r) route(); else location.hash = r; }", route)
    page.wait_for_function("r => location.hash === r && document.getElementById('view').dataset.ready === '1'",
                           arg=route, timeout=30_000)
    for pid in plots:
        page.wait_for_function(
            "id => { const e = document.getElementById(id); return e && e.classList.contains('js-plotly-plot') "
            "&& e.querySelector('svg.main-svg') && e.querySelector('svg.main-svg').childElementCount > 0 }",
            arg=pid, timeout=30_000)
    drawn = page.evaluate("[...document.querySelectorAll('.js-plotly-plot')].map(e => "
                          "[e.id, e.querySelectorAll('svg.main-svg').length, e.getBoundingClientRect().height])")
    assert all(n > 0 and h > 50 for _, n, h in drawn), drawn
    assert {pid for pid, _, _ in drawn} >= set(plots)
    page.screenshot(path=str(shots / f"{shot}.png"), full_page=True)
    assert page.errors == [], page.errors


CAMPAIGN_PLOTS = ["conv-n", "conv-elapsed_s", "statuses", "parcoords", "slices"]


def test_every_page_draws_its_plots_without_console_errors(page, demo_db, shots):
    show(page, "#/", [], shots, "campaigns")
    assert page.locator("#campaign-table tbody tr").count() >= 9
    show(page, "#/campaign/replay-demo", CAMPAIGN_PLOTS + ["conv-simulated_s", "importance", "campaign-models"],
         shots, "campaign-replay")
    show(page, "#/campaign/kernel-demo", CAMPAIGN_PLOTS, shots, "campaign-kernel")
    page.check("#conv-reused")  # the convergence redrawn over every evaluation, look-ups included
    page.wait_for_function("document.getElementById('conv-n').data[0].x.length > 0")
    assert page.errors == [], page.errors
    if demo_db["graph"]:
        show(page, "#/campaign/graph-demo", CAMPAIGN_PLOTS + ["importance", "graph-rules", "graph-usage"], shots,
             "campaign-graph")
        assert page.locator("#graph-steps tbody tr").count() >= 1
    show(page, "#/campaign/parallel-demo", CAMPAIGN_PLOTS + ["importance", "parallel-layout", "parallel-timeline"],
         shots, "campaign-parallel")
    show(page, "#/tasks", [], shots, "tasks")
    show(page, "#/task/toy_kernel", ["task-devices"], shots, "task-toy")
    assert page.locator("#task-devices-table tbody tr").count() == 2
    assert "warm start" in page.locator("#task-campaigns").inner_text()
    show(page, "#/models", ["models-plot"], shots, "models")


def test_unknown_campaign_page_names_the_closest(page, shots):
    page.evaluate("() => { document.getElementById('view').dataset.ready = '0'; location.hash = '#/campaign/replay-dem'; }")
    page.wait_for_function("document.getElementById('view').dataset.ready === 'error'", timeout=30_000)
    text = page.locator("#view .error").inner_text()
    assert "unknown campaign 'replay-dem'" in text and "replay-demo" in text
    page.screenshot(path=str(shots / "unknown-campaign.png"))
    # the failed request itself is the only console error (the browser logs every 404 response)
    assert all("404" in e for e in page.errors), page.errors
    page.errors.clear()


def wait_table(page, n: int) -> None:
    page.wait_for_selector(f'#trials[data-state="ready"][data-page="{n}"]', timeout=30_000)


def timed(page, action, n: int) -> float:
    t0 = time.perf_counter()
    action()
    wait_table(page, n)
    return time.perf_counter() - t0


def ids_and_costs(page) -> list[tuple[int, str]]:
    return page.evaluate("[...document.querySelectorAll('#trials tbody tr')].map(r => "
                         "[parseInt(r.cells[0].textContent), r.cells[2].textContent])")


def test_the_100k_trial_table_pages_in_under_a_second(page, demo_db, shots):
    show(page, "#/campaign/" + quote("bulk-100k"), CAMPAIGN_PLOTS + ["conv-simulated_s", "importance"], shots,
         "campaign-bulk")
    wait_table(page, 1)
    # "N+ trials" while the server's background pass is still counting the campaign (a busy machine)
    assert re.search(rf"{demo_db['bulk']['n']:,}\+? trials", page.locator("#trials-info").inner_text())
    times: dict[str, list[float]] = {"next by id": [], "sort by cost": [], "next by cost": [], "prev": []}
    seen: set[int] = set()
    rows = ids_and_costs(page)
    seen.update(i for i, _ in rows)
    for n in range(2, 8):
        times["next by id"].append(timed(page, lambda: page.click("#trials-next"), n))
        rows = ids_and_costs(page)
        assert len(rows) == 50 and not seen & {i for i, _ in rows}
        assert [i for i, _ in rows] == sorted(i for i, _ in rows)
        seen.update(i for i, _ in rows)
    times["prev"].append(timed(page, lambda: page.click("#trials-prev"), 6))
    times["sort by cost"].append(timed(page, lambda: page.select_option("#trials-sort", "cost"), 1))
    best = page.locator("#trials tbody tr").first.inner_text()
    for n in range(2, 6):
        times["next by cost"].append(timed(page, lambda: page.click("#trials-next"), n))
    assert best != page.locator("#trials tbody tr").first.inner_text()
    page.screenshot(path=str(shots / "campaign-bulk-by-cost.png"), full_page=True)
    (shots / "paging-times.json").write_text(json.dumps(times, indent=1))
    print("trial-table page times (s):", json.dumps({k: [round(v, 3) for v in vs] for k, vs in times.items()}))
    slow = {k: v for k, vs in times.items() for v in vs if v >= PAGE_LIMIT_S}
    assert not slow, times
    assert page.errors == [], page.errors


# -- a small database of awkward campaigns: names holding HTML, only failures, looked-up trials, one that grows

#: a campaign, task, device and parameters named with HTML and Plotly's own markup (%{...} templates)
ODD = "<img src=x onerror=alert(1)> \"odd\" κ/#?"
ODD_DEVICE = "<img src=x onerror=alert('dev')> GPU"
ODD_PARAMS = {"<i>tile</i>": [1, 2, 4, 8], "b&amp;": [16, 32, 64], "%{y}mode": ["<b>x</b>", "plain"]}


def _cache(path: Path, device: str, kernel: str, params: dict, time_of) -> str:
    """A Kernel Tuner cache of every point of ``params``, each timed (ms) or failed (text) by ``time_of``."""
    import gzip
    import itertools

    cache = {}
    for values in itertools.product(*params.values()):
        point = dict(zip(params, values))
        t = time_of(point)
        cache[",".join(map(str, values))] = {**point, "time": t, "times": [t] * 3 if isinstance(t, float) else [],
                                             "compile_time": 100.0, "benchmark_time": 10.0}
    with gzip.open(path, "wt") as f:
        json.dump({"device_name": device, "kernel_name": kernel, "problem_size": [64], "tune_params_keys": list(params),
                   "tune_params": params, "cache": cache}, f)
    return str(path)


@pytest.fixture(scope="module")
def odd_db(tmp_path_factory, bulk_campaign) -> dict:
    """Campaigns: ODD (HTML in every name), all-failed (compile and runtime errors only), grow (6 trials, on
    its own device: the live test resumes and deletes it), first and again (the same search: again looks
    first's trials up, then measures its own), after 1,000 bulk trials so that trial ids have 4 digits."""
    from autotune.drivers.replay import tune_replay
    from autotune.testing.caches import turing_time, write_cache

    folder = tmp_path_factory.mktemp("odd")
    url = f"sqlite:///{folder / 'odd.db'}"
    bulk_campaign(url, "bulk", 1000, seed=2)
    run = {"algorithm": "random", "cost_model": None, "db": url}
    tune_replay(_cache(folder / "odd.json.gz", ODD_DEVICE, "<script>alert('task')</script>k", ODD_PARAMS,
                       lambda p: 1.0 + 0.1 * p["<i>tile</i>"] + 0.01 * p["b&amp;"] + (p["%{y}mode"] == "plain")),
                trials=24, campaign=ODD, **run)
    tune_replay(_cache(folder / "fail.json.gz", "Failing GPU", "failing", {"a": [1, 2, 3], "b": [1, 2]},
                       lambda p: "CompilationFailedConfig" if p["b"] == 1 else "RuntimeFailedConfig"),
                trials=6, campaign="all-failed", **run)
    grow = write_cache(folder / "grow.json.gz", "Growing GPU", turing_time)
    tune_replay(grow, trials=6, campaign="grow", **run)
    titan = write_cache(folder / "titan.json.gz", "NVIDIA TITAN RTX", turing_time)
    tune_replay(titan, trials=8, campaign="first", **run)
    tune_replay(titan, trials=2, campaign="again", **run)  # looks first's 8 trials up, then measures 2
    return {"url": url, "grow": grow, "run": run}


@pytest.fixture(scope="module")
def odd_server(odd_db):
    yield from serve(odd_db["url"])


@pytest.fixture
def odd_page(browser, odd_server):
    """A browser page on odd_db's dashboard, with its console errors and any dialog (an alert() run from a
    name) collected in ``page.errors``."""
    yield from open_page(browser, odd_server, dialogs=True)


def texts(page, selector: str) -> list[str]:
    return page.evaluate("s => [...document.querySelectorAll(s)].map(e => e.textContent)", selector)


def test_names_holding_html_show_as_written_in_pages_and_plots(odd_page, shots):
    """Plotly reads its own HTML subset in axis titles, ticks and legends: a parameter named <i>tile</i> must
    not show as an italic "tile", b&amp; not as "b&", a category <b>x</b> not as a bold "x"."""
    route = "#/campaign/" + quote(ODD, safe="")
    show(odd_page, route, ["importance", "parcoords", "slices"], shots, "odd-campaign")
    assert odd_page.locator("#campaign-head h1").inner_text().startswith(ODD)
    names = set(ODD_PARAMS)
    assert set(texts(odd_page, "#importance .ytick text")) == names
    assert names <= set(texts(odd_page, "#parcoords .axis-title"))
    assert names <= set(texts(odd_page, "#slices .g-xtitle text, #slices [class^='g-x'][class$='title'] text"))
    assert {"<b>x</b>", "plain"} <= set(texts(odd_page, "#slices .xtick text, #slices [class*='xtick'] text"))
    task = odd_page.locator("#campaign-head a").first.get_attribute("href")
    show(odd_page, task, ["task-devices"], shots, "odd-task")
    assert ODD_DEVICE in texts(odd_page, "#task-devices .xtick text")
    assert odd_page.errors == [], odd_page.errors


def test_the_trial_table_shows_every_status_and_reused_tag_whole(odd_page, shots):
    for name in ("all-failed", "again", "bulk"):
        show(odd_page, "#/campaign/" + name, [], shots, f"odd-table-{name}")
        wait_table(odd_page, 1)
        clipped = odd_page.evaluate("[...document.querySelectorAll('#trials tbody tr')].flatMap(r => [r.cells[0], "
                                    "r.cells[1]]).filter(c => c.scrollWidth > c.clientWidth).map(c => c.textContent)")
        assert clipped == [], (name, clipped)
        if name == "again":
            assert odd_page.locator("#trials tbody tr .tag").count() == 8  # first's 8 trials, looked up


def test_a_live_page_follows_its_campaign_and_says_when_it_is_deleted(odd_page, odd_db, shots):
    """The live refresh (called here rather than waited for) brings the figures and the trial table up to
    date, offers to redraw the sample plots, and says so when the campaign is gone."""
    from autotune.db import open_database
    from autotune.drivers.replay import tune_replay

    show(odd_page, "#/campaign/grow", ["parcoords"], shots, "live-before")
    wait_table(odd_page, 1)
    assert odd_page.locator("#trials-info").inner_text().endswith(" 6 trials")
    tune_replay(odd_db["grow"], trials=14, campaign="grow", **odd_db["run"])  # resumed: 8 more
    odd_page.evaluate("liveRefresh()")
    odd_page.wait_for_function("document.getElementById('trials-info').textContent.endsWith(' 14 trials')",
                               timeout=30_000)
    assert odd_page.locator(".kpi").first.inner_text().startswith("14")
    assert "drawn over 6 evaluations; the campaign has 14 now" in odd_page.locator("#sample-stale").inner_text()
    odd_page.click("#sample-redraw")
    odd_page.wait_for_function("document.querySelector('#parcoords-box .muted').textContent.startsWith('all 14 ')",
                               timeout=30_000)
    assert odd_page.locator("#sample-stale").inner_text() == ""
    db = open_database(odd_db["url"])
    try:
        db.delete_campaign("grow")
    finally:
        db.close()
    odd_page.evaluate("liveRefresh()")
    assert "unknown campaign 'grow'" in odd_page.locator("#live-error").inner_text()
    assert odd_page.locator("#campaign-head h1").inner_text().startswith("grow")  # what it showed, kept
    odd_page.screenshot(path=str(shots / "live-deleted.png"), full_page=True)
    assert all("404" in e for e in odd_page.errors), odd_page.errors  # the refused request only


def test_a_page_left_lets_go_of_its_webgl_contexts(odd_page, shots):
    """The browser keeps a few WebGL contexts (16 in Chromium) and drops the oldest past them, with a console
    warning: a campaign page's parallel coordinates and slices must free theirs when the page is left."""
    show(odd_page, "#/campaign/" + quote(ODD, safe=""), ["parcoords", "slices"], shots, "gl-before")
    assert odd_page.evaluate("(window.leftCanvases = [...document.querySelectorAll('#view canvas')]).length") > 0
    show(odd_page, "#/tasks", [], shots, "gl-after")
    held = odd_page.evaluate("leftCanvases.filter(c => { const gl = c.getContext('webgl'); "
                             "return gl !== null && !gl.isContextLost(); }).length")
    assert held == 0


# -- a database of many campaigns, each on a task of its own, for the lists' paging, and a replay of known
# -- simulated time

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
    tune_replay(_cache(folder / "sim.json.gz", "Sim GPU", "sim", {"a": [1, 2, 3], "b": [1, 2, 3]},
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


def kpis(page) -> dict[str, str]:
    """A campaign page's figures, label -> value as shown."""
    return dict(page.evaluate("[...document.querySelectorAll('#campaign-head .kpi')].map(k => "
                              "[k.querySelector('.k').textContent, k.querySelector('.v').textContent])"))


def test_simulated_time_is_a_duration_where_charged_and_explained_by_kind_where_not(page, list_page, demo_db, shots):
    """The figure is written as the page writes costs (4 significant digits with a unit, no trailing zeros) and
    shown for a replay only, as the chart by simulated time; where none was charged, the chart's note says why
    for the campaign's kind (a parallel campaign is a simulation that charges none)."""
    show(list_page, "#/campaign/sim-099", ["conv-simulated_s"], shots, "sim-099")
    assert kpis(list_page)["simulated time"] == "990 ms"
    why = {"parallel-demo": "the simulator computes each strategy's iteration time", "kernel-demo": "ran for real"}
    if demo_db["graph"]:
        why["graph-demo"] = "a graph search times each graph's ops on the device"
    for name, text in why.items():
        show(page, "#/campaign/" + name, [], shots, f"no-sim-{name}")
        assert "simulated time" not in kpis(page), (name, kpis(page))
        shown = page.locator("#conv-sim-box").inner_text()
        assert text in shown and "simulated runs" not in shown, (name, shown)
    assert list_page.errors == [] and page.errors == [], (list_page.errors, page.errors)


def test_parallel_degrees_keep_the_dimension_apart_from_the_degree(page, shots):
    """b=16, not b16: a dimension named a0 split 16 ways must not read as a016."""
    show(page, "#/campaign/parallel-demo", ["parallel-layout"], shots, "parallel-degrees")
    labels = page.evaluate("document.getElementById('parallel-layout').data[0].text")
    assert labels and all(re.fullmatch(r"1|[^=·]+=[0-9]+(·[^=·]+=[0-9]+)*", t) for t in labels), labels
    assert re.search(r":[^ =·@:]+=[0-9]+", page.locator("#best-config").inner_text())


def test_the_importance_note_says_the_shares_can_add_up_past_100_percent(page, shots):
    """Main effects computed one parameter at a time: a parallel strategy's operators' degrees and first
    devices move together, so their shares add up to more than 100%, and the note says so with the sum."""
    show(page, "#/campaign/parallel-demo", ["importance"], shots, "importance-note")
    total = page.evaluate("fetch('/api/importance?campaign=parallel-demo').then(r => r.json())"
                          ".then(i => i.params.reduce((a, p) => a + p.share, 0))")
    assert total > 1.005
    shown = " ".join(texts(page, "#importance-box .muted"))
    assert "can add up to more than 100%" in shown and f"(here {int(total * 100 + 0.5)}%)" in shown, shown


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
