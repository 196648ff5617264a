"""What the dashboard's browser tests share: finding a Chromium, serving a database's dashboard with uvicorn,
opening a page that collects its console errors, going to a route and checking its plots drew, and writing a
small Kernel Tuner cache to replay. The ``browser`` and ``shots`` fixtures are in conftest.py.

Needs the playwright package and a Chromium: $AUTOTUNE_CHROMIUM, or chromium, chromium-browser or
google-chrome on PATH (Debian/Ubuntu: apt-get install -y chromium). Without them the tests skip
(``needs_browser``)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest


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


#: the mark of every browser test: skipped, with the reason, where playwright or a Chromium is missing
needs_browser = pytest.mark.skipif(missing() is not None, reason=missing() or "")


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


def wait_table(page, n: int) -> None:
    page.wait_for_selector(f'#trials[data-state="ready"][data-page="{n}"]', timeout=30_000)


def kpis(page) -> dict[str, str]:
    """A campaign page's figures, label -> value as shown."""
    return dict(page.evaluate("[...document.querySelectorAll('#campaign-head .kpi')].map(k => "
                              "[k.querySelector('.k').textContent, k.querySelector('.v').textContent])"))


def texts(page, selector: str) -> list[str]:
    return page.evaluate("s => [...document.querySelectorAll(s)].map(e => e.textContent)", selector)


def kt_cache(path: Path, device: str, kernel: str, params: dict, time_of) -> str:
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
