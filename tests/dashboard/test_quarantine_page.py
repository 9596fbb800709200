"""The quarantine page (issue 26 point 6) on SQLite and PostgreSQL: a test the real planner
found flaky three times is listed with when it started, its evidence (each failing job and the
passing rerun of the same tree), its expiry and the release rule's progress; seen in Chromium at
1400 and 390 px (screenshots quarantine-<width>.png)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import Engine

from benchmarks.plan_sim import Injected
from stackbot.adapters.http_server import BackgroundServer
from stackbot.config import Settings
from stackbot.web import dashboard

# The session's one browser comes from tests/conftest.py: importing the fixture here would start
# a second Playwright in the same session, which Playwright refuses ("Sync API inside the asyncio
# loop") for every browser test that runs after this module.
from tests.support.browser import artifacts_dir
from tests.support.series_sim import series_sim, sim_client

FLAKY = "tests/unit_tests/test_layer_3.py::test_flaky_3"


def test_a_quarantined_test_is_shown_with_its_evidence_expiry_and_release_progress(
    engine: Engine, settings: Settings
) -> None:
    sim = series_sim(engine, settings, "series-first", prs=4, injected=Injected(flaky_at=[3]))
    for push in (None, 4, 4):
        sim.push(push)
        sim.drive()
    with sim_client(sim) as client:
        empty_before = client.get("/series/6307/flaky").text
        html = client.get("/quarantine").text
    assert 'href="/quarantine"' in empty_before
    # the node id breaks only between its parts (after a /, before ::)
    assert f'data-nodeid="{FLAKY}"' in html and "flaky 3 times" in html
    assert "tests/<wbr>unit_tests/<wbr>test_layer_3.py<wbr>::test_flaky_3</code>" in html
    assert html.count('href="/jobs/') == 6  # three failing jobs, three passing reruns
    assert re.search(r"<td data-label=\"release\" class=\"num\">[0-2] / 30 clean runs</td>", html)
    assert "3 times within 14 days" in html and "30 days after it started" in html


# Inline boxes that must never break across lines: a job link, a date, a PR number, a SHA.
_SPLIT = """() => Array.from(document.querySelectorAll(
    'td a.job, td .when, td a.pr, td code.sha, td .pill'))
  .filter(e => e.getClientRects().length > 1).map(e => e.textContent)"""
# Each cell of the first quarantined test: its width and whether its content scrolls sideways.
_CELLS = """() => Array.from(document.querySelectorAll('#quarantined tbody tr:first-child td'))
  .map(td => [td.dataset.label || td.className, td.getBoundingClientRect().width,
              td.scrollWidth > td.clientWidth + 1])"""


@pytest.mark.browser
def test_the_quarantine_page_reads_at_both_widths(
    engine: Engine,
    settings: Settings,
    browser: Any,
) -> None:
    """At 390 px each quarantined test reads as a block of labelled lines, full width (not
    seven squeezed columns scrolling sideways); no job link or date breaks across lines and
    the page does not scroll sideways, at 390 and 1400 px."""
    sim = series_sim(engine, settings, "series-first", prs=4, injected=Injected(flaky_at=[3]))
    for push in (None, 4, 4):
        sim.push(push)
        sim.drive()
    app = FastAPI(docs_url=None, redoc_url=None)
    app.state.engine, app.state.settings = sim.engine, sim.settings
    dashboard.install(app)
    server = BackgroundServer(port=0, name="quarantine")
    with server.serving(app):
        for width in (1400, 390):
            context = browser.new_context(viewport={"width": width, "height": 900})
            page = context.new_page()
            page.goto(server.url + "/quarantine")
            assert page.locator("#quarantined tbody tr").count() == 1
            wide = page.evaluate("document.documentElement.scrollWidth")
            split = page.evaluate(_SPLIT)
            cells = page.evaluate(_CELLS)
            table = page.locator("#quarantined").bounding_box()
            page.screenshot(path=str(artifacts_dir() / f"quarantine-{width}.png"), full_page=True)
            context.close()
            assert wide <= width, f"the quarantine page is {wide} px wide at {width} px"
            assert split == [], f"at {width} px these break across lines: {split}"
            assert table is not None and table["x"] + table["width"] <= width
            assert [label for label, _, scrolls in cells if scrolls] == [], cells
            if width == 390:
                narrow = [(label, w) for label, w, _ in cells if w < 0.9 * table["width"]]
                assert narrow == [], f"cells narrower than the table at 390 px: {narrow}"
