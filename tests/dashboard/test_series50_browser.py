"""A generated 50-PR series in a real Chromium (SQLite and PostgreSQL): every PR's verdict on
the series page is the one its comment and check runs start with, the stack-order list and the
test grid hold every PR, conflicts are a list of pairs, and no page is wider than its viewport
at 1400 and 390 px. Screenshots are saved as artifacts (series50-<width>.png)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import Engine
from sqlmodel import Session, select

from stackbot.adapters.http_server import BackgroundServer
from stackbot.config import load_settings
from stackbot.db.engine import session_scope
from stackbot.db.models import PullRequest, Repository, Series
from stackbot.domain.report import render_sticky_comment
from stackbot.domain.report_checks import (
    render_approval_check,
    render_check_run,
    render_integration_check,
)
from stackbot.domain.report_view import PrReportView
from stackbot.services.report_views import build_report_views
from stackbot.web import dashboard, exposure
from tests.support.browser import artifacts_dir
from tests.support.dashboard_data import REPO, seed_series

pytestmark = pytest.mark.browser
PRS = 50
FIRST = 8034
LAYER = "megatron/core/transformer/transformer_layer.py"


@pytest.fixture
def answers() -> list[tuple[str, int, bool]]:
    """(path, status, whether the request was conditional) of every GET the site answered."""
    return []


@pytest.fixture
def site(
    engine: Engine, tmp_path: Path, answers: list[tuple[str, int, bool]]
) -> Iterator[tuple[str, list[PrReportView]]]:
    seed_series(engine, prs=PRS, first=FIRST, log_dir=tmp_path / "jobs")
    pairs = [
        {"a": FIRST + i, "b": FIRST + i + 7, "conflicts": [{"path": LAYER, "type": "contents"}]}
        for i in range(3, 40, 9)
    ]
    with session_scope(engine) as session:
        series = session.exec(select(Series)).one()
        series.conflict_matrix = {
            "base": "0" * 40,
            "heads": {str(FIRST + i): "1" * 40 for i in range(PRS)},
            "pairs": pairs,
            "with_base": {},
        }
        session.add(series)
    settings = load_settings(data_dir=tmp_path / "data", public_url="http://bot.test")
    with Session(engine) as session:
        views = build_report_views(
            session, settings, repo=REPO, numbers=[FIRST + i for i in range(PRS)]
        )
    app = FastAPI(docs_url=None, redoc_url=None)  # as create_app: the dashboard serves /docs
    app.state.engine = engine
    app.state.settings = settings
    exposure.install(app, settings)
    dashboard.install(app)

    @app.middleware("http")
    async def record(request: Any, call_next: Any) -> Any:
        response = await call_next(request)
        if request.method == "GET":
            conditional = "if-none-match" in request.headers
            answers.append((request.url.path, response.status_code, conditional))
        return response

    server = BackgroundServer(port=0, name="series50")
    with server.serving(app):
        yield server.url, views


def _verdict_label(text: str) -> str:
    """The bold verdict of a comment's or a check-run summary's first line."""
    return text.split("**")[1]


def test_fifty_prs_read_the_same_everywhere_and_fit(site: Any, browser: Any) -> None:
    url, views = site
    assert len(views) == PRS
    expected: dict[int, str] = {}
    for view in views:
        comment = render_sticky_comment(view).splitlines()[1]  # the line after the marker
        label = _verdict_label(comment)
        checks = [render_approval_check(view), render_integration_check(view)]
        checks += [render_check_run(view, row.test_set, row.shape) for row in view.tests]
        for check in checks:
            if check is not None:
                assert _verdict_label(check.summary.splitlines()[0]) == label
        expected[view.pr.number] = label
    assert len(set(expected.values())) >= 4  # a realistic mix, not one verdict everywhere
    errors: list[str] = []
    for width in (1400, 390):
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        try:
            page.goto(url + "/series/6307")
            shown = {
                int(row.get_attribute("data-pr") or 0): row.locator(".pill").first.inner_text()
                for row in page.locator("#pulls tbody tr").all()
            }
            # closed and superseded PRs show their state (merged, superseded) instead
            for number, label in expected.items():
                if label != "closed":
                    assert shown[number] == label, (number, shown[number], label)
            assert page.locator("#graph .node").count() == PRS
            assert page.locator("#grid tbody tr").count() >= PRS - 20
            assert page.locator("ul.pairs li").count() == 5
            assert page.locator("table.matrix").count() == 0  # 50×50 would not read
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= width, f"the series page is {wide} px wide at {width} px"
            page.screenshot(path=str(artifacts_dir() / f"series50-{width}.png"), full_page=True)
            for path in (f"/pulls/{FIRST + 1}", "/jobs", "/jobs/1", "/tasks", "/", "/runs/1"):
                page.goto(url + path)
                wide = page.evaluate("document.documentElement.scrollWidth")
                assert wide <= width, f"{path} is {wide} px wide at {width} px"
        finally:
            context.close()
        assert not errors, errors


def test_docs_work_offline(site: Any, browser: Any) -> None:
    """Swagger UI from stackbot's own files: every request to another host is refused."""
    url, _ = site
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    elsewhere: list[str] = []

    def only_local(route: Any) -> None:
        if route.request.url.startswith(url):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    try:
        page.goto(url + "/docs")
        page.wait_for_selector(".swagger-ui .opblock", timeout=30_000)
        assert page.locator(".swagger-ui .opblock").count() >= 5
        favicon = page.request.get(url + "/favicon.ico")
        assert favicon.ok and "svg" in favicon.headers["content-type"]
    finally:
        context.close()
    assert elsewhere == []


def test_live_updates_patch_the_page_without_reloading(
    site: Any,
    browser: Any,
    engine: Engine,
    answers: list[tuple[str, int, bool]],
) -> None:
    url, _ = site
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    try:
        page.goto(url + "/series/6307")
        page.evaluate("window.__not_reloaded = 42")
        page.mouse.move(1, 1)  # away from anything with a tooltip
        # A write the page does not show: the change token moves, the page is asked for
        # again only conditionally and answered 304 (no body).
        with session_scope(engine) as session:
            session.add(Repository(full_name="someone/else", clone_url="file:///nowhere"))
        deadline = time.monotonic() + 60  # a busy machine (two test workers) answers late
        while ("/series/6307", 304, True) not in answers and time.monotonic() < deadline:
            page.wait_for_timeout(200)
        assert ("/series/6307", 304, True) in answers, answers
        assert [a for a in answers if a[0] == "/series/6307" and a[1] == 200 and a[2]] == []
        with session_scope(engine) as session:
            pull = session.exec(select(PullRequest).where(PullRequest.number == FIRST)).one()
            pull.title = "A title changed while the page was open"
            pull.synced_at = datetime.now(UTC)
            session.add(pull)
        page.wait_for_selector("text=A title changed while the page was open", timeout=60_000)
        assert ("/series/6307", 200, True) in answers  # this change was sent in full
        assert page.evaluate("window.__not_reloaded") == 42
        assert "updated" in page.locator("#live").inner_text()
    finally:
        context.close()


PAGES = (
    "/series/6307",
    f"/pulls/{FIRST + 1}",
    "/runs/1",
    "/jobs",
    "/jobs/1",
    "/",
    "/tasks",
    "/maintenance",
    "/series/6307/gpu",
    "/series/6307/flaky",
    "/quarantine",
)
# Tables that read as one block per row on a phone: no word in them broken across lines, and
# none scrolls sideways inside its box (the page's scroll width alone would not see it).
READ_AS_BLOCKS = {"/": "#series-list", "/series/6307/gpu": "#by-push, #by-pr"}
WORD_SPLIT = """(tables) => {
  const broken = [];
  for (const table of document.querySelectorAll(tables)) {
    const walker = document.createTreeWalker(table, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.textContent.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        const lines = new Set(Array.from(range.getClientRects(), r => Math.round(r.top)));
        if (lines.size > 1) broken.push(word[0]);
      }
    }
  }
  return broken;
}"""
SCROLLS_INSIDE = """(tables) => Array.from(document.querySelectorAll(tables))
  .filter(t => t.scrollWidth > t.clientWidth + 1).map(t => t.id)"""
# Every PR number, SHA and pill inside a table cell: an inline box split over two lines has
# two client rectangles (`#803` / `4`, `fdc5ec` / `f`).
SPLIT = """() => Array.from(document.querySelectorAll(
    'td a.pr, th a.pr, td code.sha, th code.sha, td .pill, td a[href^="/pulls/"], td a[href^="/series/"]'))
  .filter(e => e.getClientRects().length > 1).map(e => e.textContent)"""


def test_layout_holds_at_1400_and_390_px(site: Any, browser: Any) -> None:
    """Issue 27's layout facts on a 50-PR series: no PR number or SHA split across lines in
    any table cell and no horizontal page scroll, at 1400 and 390 px, on every page (and on
    the series list and the GPU-hours page, no word broken inside and no table scrolling
    sideways in its box); the series
    summary (counts, what needs action, the conflicting pairs) above the first fold at 1400 px;
    a step's conflicts readable on a phone."""
    url, _ = site
    conflicting = next(
        run["id"]
        for run in httpx.get(f"{url}/api/pulls/{FIRST + 1}").json()["runs"]
        if run["status"] == "conflict"
    )
    heights: dict[str, int] = {}
    for width in (1400, 390):
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        try:
            for path in (*PAGES, f"/runs/{conflicting}"):
                page.goto(url + path)
                wide = page.evaluate("document.documentElement.scrollWidth")
                assert wide <= width, f"{path} is {wide} px wide at {width} px"
                split = page.evaluate(SPLIT)
                assert split == [], f"{path} at {width} px splits {split[:5]}"
                if path in READ_AS_BLOCKS:
                    broken = page.evaluate(WORD_SPLIT, READ_AS_BLOCKS[path])
                    assert broken == [], f"{path} at {width} px breaks inside {broken[:5]}"
                    boxed = page.evaluate(SCROLLS_INSIDE, READ_AS_BLOCKS[path])
                    assert boxed == [], f"{path} at {width} px scrolls sideways inside {boxed}"
                heights[f"{path} at {width} px"] = page.evaluate(
                    "document.documentElement.scrollHeight"
                )
            page.goto(url + "/series/6307")
            summary = page.locator("#summary").bounding_box()
            assert summary is not None
            if width == 1400:
                bottom = summary["y"] + summary["height"]
                assert bottom <= 900, f"the summary ends at {bottom} px, below the fold"
            assert page.locator("#pairs-summary .pair").count() == 5
            assert page.locator("#counts .pill").count() >= 4
            page.goto(f"{url}/runs/{conflicting}")
            cell = page.locator("table.steps td.conflicts").filter(has_text="conflicts with")
            box = cell.first.bounding_box()
            assert box is not None and box["width"] >= 0.8 * (width - 40 if width < 700 else 300)
        finally:
            context.close()
    print("page heights:", heights)  # -s shows them: before/after figures for the issue
