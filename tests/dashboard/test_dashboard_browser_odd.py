"""The dashboard in a real browser on a small database of awkward campaigns: names holding HTML and Plotly's
own markup, only failures, looked-up trials, and one that grows and is deleted while its page is open."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from browser_pages import kt_cache, needs_browser, open_page, serve, show, texts, wait_table

pytestmark = needs_browser

#: a campaign, task, device and parameters named with HTML and Plotly's own markup (%{...} templates)
ODD = "<img src=x onerror=alert(1)> \"odd\" κ/#?"
ODD_DEVICE = "<img src=x onerror=alert('dev')> GPU"
ODD_PARAMS = {"<i>tile</i>": [1, 2, 4, 8], "b&amp;": [16, 32, 64], "%{y}mode": ["<b>x</b>", "plain"]}


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
    tune_replay(kt_cache(folder / "odd.json.gz", ODD_DEVICE, "<script>alert('task')</script>k", ODD_PARAMS,
                         lambda p: 1.0 + 0.1 * p["<i>tile</i>"] + 0.01 * p["b&amp;"] + (p["%{y}mode"] == "plain")),
                trials=24, campaign=ODD, **run)
    tune_replay(kt_cache(folder / "fail.json.gz", "Failing GPU", "failing", {"a": [1, 2, 3], "b": [1, 2]},
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
