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
    """The dashboard app served by uvicorn in a background thread on a free port; yields its base URL."""
    import httpx
    import uvicorn

    from autotune.dashboard.app import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(create_app(demo_db["url"]), host="127.0.0.1", port=port, log_level="warning"))
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
