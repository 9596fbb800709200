"""The landing page (issue 25) on SQLite and PostgreSQL: per repository the gate in order
(what lands next, what is tested speculatively on top of what, what each waits for and since
when), then the landings that finished with the time from ``/stackbot land`` to landed or
stopped (with the cause); the same at ``/api/landing``; seen in Chromium at 1400 and 390 px
(screenshots landing-<width>.png, the ones in docs/dashboard/)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from stackbot.adapters.http_server import BackgroundServer
from stackbot.web import dashboard
from tests.support.browser import artifacts_dir
from tests.support.dashboard_data import seed_series, sha
from tests.support.landing_data import seed_landings


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", html).split())


def _row(html: str, landing_id: int) -> str:
    found = re.search(rf'<tr data-landing="{landing_id}".*?</tr>', html, re.S)
    assert found is not None, f"no row of landing {landing_id}"
    return _text(found.group(0))


def test_the_landing_page_shows_the_gate_in_order_and_the_time_to_land(
    client: TestClient, engine: Engine
) -> None:
    seed_series(engine, prs=3)
    empty = client.get("/landing")
    assert empty.status_code == 200 and "No series was ever queued for landing" in empty.text
    assert 'href="/landing"' in client.get("/").text  # in the navigation
    ids = seed_landings(engine)
    html = client.get("/landing").text
    order = [int(n) for n in re.findall(r'<tr data-landing="(\d+)" data-state="[a-z-]+">', html)]
    assert order[:3] == [ids["merging"], ids["passed"], ids["testing"]]  # the gate, in order
    head = _row(html, ids["merging"])
    assert (
        head.startswith("next landing") and "merging bottom-up: 1 of 3 merged" in head
    )  # pill, then words
    assert f"#8034 {sha('h8034')[:7]} merged → #8035 {sha('h8035')[:7]} → #8036" in head
    second = _row(html, ids["passed"])
    assert "tested speculatively on top of landing 1 (#8035 → #8036): passed" in second.replace(
        f"landing {ids['merging']}", "landing 1"
    )
    assert "2026-12-05 09:06 UTC" in second  # queued since
    third = _row(html, ids["testing"])
    assert f"on top of landing {ids['merging']} (#8035 → #8036); landing {ids['passed']}" in third
    assert "2 of 3 test jobs running" in third  # what it waits for, without backticks
    landed = _row(html, ids["landed"])
    assert "landed every PR merged at its tested head" in landed and "23 min" in landed
    stopped = _row(html, ids["stopped"])
    assert "stopped #8051 did not merge: a new push" in stopped
    assert "(cause: new push; 1 of 2 merged)" in stopped and "41 min" in stopped


def test_api_landing_is_the_same_page_as_json(client: TestClient, engine: Engine) -> None:
    seed_series(engine, prs=3)
    ids = seed_landings(engine)
    body = client.get("/api/landing").json()
    assert body["window"] == 3
    (repo,) = body["repositories"]
    assert repo["repo"] == "NVIDIA/Megatron-LM" and repo["base_ref"] == "main"
    queue = repo["queue"]
    assert [q["landing"] for q in queue] == [ids["merging"], ids["passed"], ids["testing"]]
    assert [q["state"] for q in queue] == ["merging", "speculative", "speculative"]
    assert queue[2]["on_top_of"] == [
        {"landing": ids["merging"], "prs": [8035, 8036]},
        {"landing": ids["passed"], "prs": [8100, 8101]},
    ]
    finished = {f["landing"]: f for f in repo["finished"]}
    assert finished[ids["landed"]]["land_to_finished_s"] == 23 * 60
    assert finished[ids["stopped"]]["cause"] == "new push"
    assert finished[ids["stopped"]]["land_to_finished_s"] == 41 * 60
    assert "/api/landing" in client.get("/openapi.json").json()["paths"]


# Inline boxes that must never break across lines: a PR number, a SHA, a pill, a date.
_SPLIT = """() => Array.from(document.querySelectorAll(
    'td a.pr, td code.sha, td .pill, td .when, td .entry'))
  .filter(e => e.getClientRects().length > 1).map(e => e.textContent)"""
_CELLS = """() => Array.from(document.querySelectorAll('table.landing-queue tbody tr td'))
  .map(td => [td.dataset.label, td.getBoundingClientRect().width,
              td.scrollWidth > td.clientWidth + 1])"""


@pytest.mark.browser
def test_the_landing_page_reads_at_both_widths(engine: Engine, browser: Any) -> None:
    """No sideways page scroll at 390 or 1400 px, no PR number, SHA, pill or date split across
    lines, and at 390 px each landing is a block of full-width labelled lines."""
    seed_series(engine, prs=3)
    seed_landings(engine)
    app = FastAPI(docs_url=None, redoc_url=None)
    app.state.engine = engine
    dashboard.install(app)
    server = BackgroundServer(port=0, name="landing")
    with server.serving(app):
        for width in (1400, 390):
            context = browser.new_context(viewport={"width": width, "height": 900})
            page = context.new_page()
            page.goto(server.url + "/landing")
            assert page.locator("table.landing-queue tbody tr").count() == 3
            wide = page.evaluate("document.documentElement.scrollWidth")
            split = page.evaluate(_SPLIT)
            cells = page.evaluate(_CELLS)
            table = page.locator("table.landing-queue").bounding_box()
            page.screenshot(path=str(artifacts_dir() / f"landing-{width}.png"), full_page=True)
            context.close()
            assert wide <= width, f"the landing page is {wide} px wide at {width} px"
            assert split == [], f"at {width} px these break across lines: {split}"
            assert table is not None and table["x"] + table["width"] <= width
            assert [label for label, _, scrolls in cells if scrolls] == [], cells
            if width == 390:
                narrow = [(label, w) for label, w, _ in cells if w < 0.9 * table["width"]]
                assert narrow == [], f"cells narrower than the table at 390 px: {narrow}"
