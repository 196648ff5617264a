"""The dashboard in a real browser: headless Chromium (the system's, through Playwright) opens the
pages of the shared database of conftest.py served by uvicorn (the campaign list, a campaign of each
kind, a task, the cost models), checks that the plots drew and that the console stayed free of
errors, and pages through the 100,000-trial campaign's table, each page in under a second. Awkward
campaigns are in test_dashboard_browser_odd.py, many campaigns (the lists' paging) in
test_dashboard_browser_lists.py. Screenshots go to $AUTOTUNE_SCREENSHOTS when set, else to the test's tmp
folder. Without playwright or a Chromium the tests skip (browser_pages.py says what they need)."""

from __future__ import annotations

import json
import re
import time
from urllib.parse import quote

import pytest
from browser_pages import kpis, needs_browser, open_page, serve, show, texts, wait_table

pytestmark = needs_browser

#: the longest a page of the trial table may take, from the click to the table updated (seconds)
PAGE_LIMIT_S = 1.0


@pytest.fixture(scope="module")
def server(demo_db):
    yield from serve(demo_db["url"])


@pytest.fixture(scope="module")
def page(browser, server):
    """One browser page for the module's tests on the main database."""
    yield from open_page(browser, server)


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


def test_where_no_simulated_time_was_charged_the_chart_says_why_for_the_kind(page, demo_db, shots):
    """No simulated-time figure but for a replay (test_dashboard_browser_lists.py); where none was charged, the
    chart's note says why for the campaign's kind (a parallel campaign is a simulation that charges none)."""
    why = {"parallel-demo": "the simulator computes each strategy's iteration time", "kernel-demo": "ran for real"}
    if demo_db["graph"]:
        why["graph-demo"] = "a graph search times each graph's ops on the device"
    for name, text in why.items():
        show(page, "#/campaign/" + name, [], shots, f"no-sim-{name}")
        assert "simulated time" not in kpis(page), (name, kpis(page))
        shown = page.locator("#conv-sim-box").inner_text()
        assert text in shown and "simulated runs" not in shown, (name, shown)
    assert page.errors == [], page.errors


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
