"""The dashboard in a real browser: headless Chromium (the system's, through Playwright) opens the
pages of the shared database of conftest.py served by uvicorn (the campaign list, a campaign of each
kind, a task, the cost models), checks that the plots drew and that the console stayed free of
errors, and pages through the 100,000-trial campaign's table, each page in under a second. Screenshots go to $AUTOTUNE_SCREENSHOTS when set, else to the test's tmp folder.

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


@pytest.fixture(scope="module")
def page(browser, server):
    """One browser page with its console errors and uncaught exceptions collected in ``page.errors``."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.errors = []
    pg.on("console", lambda m: pg.errors.append(f"console: {m.text}") if m.type == "error" else None)
    pg.on("pageerror", lambda e: pg.errors.append(f"pageerror: {e}"))
    pg.goto(server + "/#/")
    yield pg
    ctx.close()


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
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.errors = []
    pg.on("console", lambda m: pg.errors.append(f"console: {m.text}") if m.type == "error" else None)
    pg.on("pageerror", lambda e: pg.errors.append(f"pageerror: {e}"))
    pg.on("dialog", lambda d: (pg.errors.append(f"dialog: {d.message}"), d.dismiss()))
    pg.goto(odd_server + "/#/")
    yield pg
    ctx.close()


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
