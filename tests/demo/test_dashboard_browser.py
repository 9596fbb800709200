"""The dashboard of a demo run in a real headless Chromium; screenshots are saved as artifacts."""

from __future__ import annotations

import pytest

from tests.demo.conftest import DemoRun
from tests.support.browser import artifacts_dir

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert not errors, errors


def test_index_lists_the_series(page, demo: DemoRun) -> None:  # type: ignore[no-untyped-def]
    page.goto(demo.url + "/")
    link = page.locator('a[href="/series/6307"]')
    assert link.count() == 1
    page.screenshot(path=str(artifacts_dir() / "dashboard-index.png"), full_page=True)


def test_series_page_draws_the_graph_and_tables(page, demo: DemoRun) -> None:  # type: ignore[no-untyped-def]
    page.goto(demo.url + "/series/6307")
    nodes = page.locator("#graph .node")
    assert nodes.count() >= 5
    states = {n.get_attribute("data-pr"): n.get_attribute("data-state") for n in nodes.all()}
    assert states["8748"] == "merged"  # the demo ended by landing the series
    assert states["8040"] == "superseded"
    assert states["8050"] == "conflict"
    edges = page.locator("#graph .edge")
    sources = {
        source.strip()
        for e in edges.all()
        for source in (e.get_attribute("data-source") or "").split(",")
    }
    # (#8748's base_branch edge went with its retarget onto main when the series landed)
    assert {"depends_on", "superseded"} <= sources
    # edges read in words, with the words that declared them as their tooltip
    depends = page.locator('#graph .edge[data-child="8035"][data-parent="8034"]')
    assert "#8034" in depends.inner_text() and "depends on" in (
        depends.get_attribute("title") or ""
    )
    rows = page.locator("#pulls tbody tr")
    assert rows.count() >= 6
    assert "maintainer-p" in page.locator('#pulls tr[data-pr="8748"]').inner_text()  # approver
    assert "waiting for a vetter" in page.locator('#pulls tr[data-pr="8050"]').inner_text()
    # the list is laid out: a real size, and nothing wider than the page
    box = page.locator("#graph").bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 50
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], width
    page.screenshot(path=str(artifacts_dir() / "dashboard-series.png"), full_page=True)


def test_a_job_log_is_readable(page, demo: DemoRun) -> None:  # type: ignore[no-untyped-def]
    page.goto(demo.url + "/jobs")
    finished = page.locator("table.jobs-finished tbody tr")
    assert finished.count() >= 4
    page.screenshot(path=str(artifacts_dir() / "dashboard-jobs.png"), full_page=True)
    page.locator("table.jobs-finished tbody tr a").first.click()
    page.wait_for_url("**/jobs/*")
    log = page.locator("#log")
    assert log.count() == 1
    assert (
        "torch" in log.inner_text() or "pytest" in log.inner_text() or "passed" in log.inner_text()
    )
    page.screenshot(path=str(artifacts_dir() / "dashboard-job.png"), full_page=True)


def test_a_run_page_shows_steps_and_the_allowlist(page, demo: DemoRun) -> None:  # type: ignore[no-untyped-def]
    page.goto(demo.url + "/pulls/8035")
    page.locator('a[href^="/runs/"]').first.click()
    page.wait_for_url("**/runs/*")
    text = page.inner_text("main")
    assert "Steps" in text and "Allowlist" in text
    assert "tools/process_group_usage_allowlist.json" in text
    page.screenshot(path=str(artifacts_dir() / "dashboard-run.png"), full_page=True)
