"""Pages kept while the read clock stands still (stackbot/web/page_cache.py): a kept page is
sent again only while nothing it shows has changed, on SQLite and PostgreSQL."""

from __future__ import annotations

import re
import threading
import time

import pytest
from fastapi import FastAPI
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, text
from sqlmodel import Session, select

from stackbot.db.models import PullRequest, TestResult
from stackbot.web import dashboard, readmodel
from stackbot.web.page_cache import PageCache
from tests.support.dashboard_data import seed_series

PAGES = ("/series/6307", "/api/series/6307", "/pulls/8035", "/api/pulls/8035")


def _cache(client: TestClient) -> PageCache:
    cache: PageCache = client.app.state.page_cache  # type: ignore[attr-defined]
    return cache


def test_an_unchanged_page_is_computed_once_and_sent_again(
    engine: Engine, client: TestClient
) -> None:
    seed_series(engine, prs=4)
    first = {path: client.get(path) for path in PAGES}
    assert all(r.status_code == 200 for r in first.values())
    builds = _cache(client).builds
    again = {path: client.get(path) for path in PAGES}
    assert _cache(client).builds == builds
    assert {p: r.content for p, r in again.items()} == {p: r.content for p, r in first.items()}
    assert again["/api/series/6307"].headers["content-type"] == "application/json"
    assert again["/series/6307"].headers["content-type"].startswith("text/html")


def test_a_change_made_through_the_orm_shows_on_the_next_request(
    engine: Engine, client: TestClient
) -> None:
    seed_series(engine, prs=4)
    assert "A title nobody wrote" not in client.get("/series/6307").text
    with Session(engine) as session:
        pull = session.exec(select(PullRequest).where(PullRequest.number == 8035)).one()
        pull.title = "A title nobody wrote"
        session.add(pull)
        session.commit()
    assert "A title nobody wrote" in client.get("/series/6307").text
    assert client.get("/api/pulls/8035").json()["pull"]["title"] == "A title nobody wrote"


def test_a_change_made_with_plain_sql_elsewhere_shows_too(
    engine: Engine, client: TestClient
) -> None:
    """A worker process, `stackbot db` or psql writes without this process knowing: the
    database's triggers move the clock all the same."""
    seed_series(engine, prs=4)
    before = client.get("/api/series/6307").json()
    with Session(engine) as session:
        failed = session.exec(select(TestResult).where(TestResult.outcome == "failed")).all()
    assert failed, "the seeded series has failing tests"
    with engine.begin() as conn:
        conn.execute(text("UPDATE test_results SET outcome = 'passed'"))
    assert client.get("/api/series/6307").json() != before  # recomputed, not the kept page
    with engine.begin() as conn:
        conn.execute(text("UPDATE pull_requests SET title = 'Renamed in psql' WHERE number = 8036"))
    assert "Renamed in psql" in client.get("/series/6307").text


def test_a_missing_series_is_404_until_it_exists(engine: Engine, client: TestClient) -> None:
    assert client.get("/series/6307").status_code == 404
    assert client.get("/api/series/6307").status_code == 404
    seed_series(engine, prs=3)
    assert client.get("/series/6307").status_code == 200
    assert client.get("/api/series/6307").json()["key"] == "#6307"


def test_requests_for_one_page_at_a_new_tick_compute_it_once(engine: Engine) -> None:
    cache = PageCache(engine)
    calls: list[int] = []

    def build() -> bytes:
        calls.append(1)
        time.sleep(0.2)
        return b"page"

    bodies: list[bytes | None] = []
    threads = [
        threading.Thread(target=lambda: bodies.append(cache.body(("series", "#1"), build)))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert bodies == [b"page"] * 8
    assert len(calls) == 1
    with engine.begin() as conn:
        conn.execute(text("UPDATE read_clock SET ticks = ticks + 1 WHERE id = 1"))
    assert cache.body(("series", "#1"), build) == b"page"
    assert len(calls) == 2


def test_the_kept_bodies_stay_within_their_byte_budget(engine: Engine) -> None:
    cache = PageCache(engine, max_bytes=100)
    for n in range(3):
        cache.body(n, lambda: b"x" * 40)
    builds = cache.builds
    cache.body(2, lambda: b"changed")  # the newest two are kept
    cache.body(1, lambda: b"changed")
    assert cache.builds == builds
    assert cache.body(0, lambda: b"rebuilt") == b"rebuilt"  # the oldest was let go
    assert cache.body(9, lambda: b"y" * 500) == b"y" * 500  # too big to keep, still sent
    assert cache.body(9, lambda: b"again") == b"again"


def test_the_sent_json_is_what_fastapi_would_have_encoded(
    engine: Engine, client: TestClient
) -> None:
    seed_series(engine, prs=5)
    with Session(engine) as session:
        page = readmodel.series_page(session, "#6307")
        detail = readmodel.pull_detail(session, 8035)
    assert page is not None and detail is not None
    assert (
        client.get("/api/series/6307").content
        == JSONResponse(jsonable_encoder(page.to_json())).body
    )
    assert client.get("/api/pulls/8035").json()["pull"] == jsonable_encoder(
        detail["pull"].to_json()
    )


# -- what a page derives from the runs' tables only, kept across builds (read_batch.SharedMemo) --


def _cold(engine: Engine, path: str) -> bytes:
    """``path`` computed by a new app: nothing kept, nothing derived before."""
    app = FastAPI()
    app.state.engine = engine
    dashboard.install(app)
    with TestClient(app) as fresh:
        response = fresh.get(path)
    assert response.status_code == 200, path
    return response.content


def _statements(engine: Engine, client: TestClient, path: str) -> tuple[bytes, list[str]]:
    seen: list[str] = []

    def record(*args: object) -> None:
        seen.append(str(args[2]))

    event.listen(engine, "before_cursor_execute", record)
    try:
        response = client.get(path)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert response.status_code == 200, path
    return response.content, seen


def test_a_write_to_a_pr_rebuilds_the_page_but_reads_no_job_again(
    engine: Engine, client: TestClient
) -> None:
    """A PR's title, head or approval changes the verdicts, not what its runs' jobs, results and
    steps say: those are kept (the tables' own clocks stood still), the page is still new."""
    seed_series(engine, prs=6, extra_jobs=12, infra_retries=True)
    client.get("/series/6307")
    with engine.begin() as conn:
        conn.execute(text("UPDATE pull_requests SET title = 'Renamed' WHERE number = 8036"))
    body, seen = _statements(engine, client, "/series/6307")
    assert b"Renamed" in body
    touched = [q for q in seen if re.search(r"\bFROM (jobs|test_results|integration_\w+)\b", q)]
    assert touched == [], touched
    assert body == _cold(engine, "/series/6307")
    # a write to a job: everything derived from the runs' tables is read again
    with engine.begin() as conn:
        conn.execute(text("UPDATE jobs SET node = node WHERE id = (SELECT min(id) FROM jobs)"))
    _, seen = _statements(engine, client, "/series/6307")
    assert any(re.search(r"\bFROM jobs\b", q) for q in seen)


# Writes to each table a series page derives from, in SQL (as a worker or psql would write).
WRITES = {
    "a PR's title": "UPDATE pull_requests SET title = 'Renamed in psql' WHERE number = 8036",
    "a job's status": "UPDATE jobs SET status = 'failed' WHERE id = "
    "(SELECT min(id) FROM jobs WHERE status = 'passed' AND kind = 'integration')",
    "a test's outcome": "UPDATE test_results SET outcome = 'passed' WHERE outcome = 'failed'",
    "a step's outcome": "UPDATE integration_steps SET outcome = 'clean', conflicts_with = '[]' "
    "WHERE outcome = 'conflict'",
    "a run's status": "UPDATE integration_runs SET status = 'error', error = 'git died' "
    "WHERE id = (SELECT min(id) FROM integration_runs)",
    "an approval": "DELETE FROM approvals WHERE pr_number = 8034",
    "an edge": "DELETE FROM dependency_edges WHERE child = 8037",
    "main's baseline": "UPDATE jobs SET counts = '{\"passed\": 23}' WHERE kind = 'baseline'",
    # what a PR's kept report view is keyed on (report_views.build_report_view): its own row,
    # and its parent's row as its stack shows it
    "a PR's state": "UPDATE pull_requests SET state = 'closed' WHERE number = 8035",
    "a PR's head": "UPDATE pull_requests SET head_sha = 'ffffffffffffffffffffffffffffffffffffffff' "
    "WHERE number = 8036",
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_after_any_write_the_page_equals_one_computed_from_nothing(
    engine: Engine, client: TestClient, write: str
) -> None:
    """Never a stale page: after a write to any table the page reads, the page sent (computed
    with what was kept from earlier builds) is byte for byte the one a new app computes."""
    seed_series(engine, prs=6, extra_jobs=12, infra_retries=True)
    paths = ("/series/6307", "/api/series/6307")
    before = {path: client.get(path).content for path in paths}
    with engine.begin() as conn:
        assert conn.execute(text(WRITES[write])).rowcount > 0
    for path in paths:
        after = client.get(path).content
        assert after != before[path], f"{write} does not show on {path}"
        assert after == _cold(engine, path), f"{path} after {write} differs from a new app's"


def _row(body: bytes, number: int) -> bytes:
    """PR ``number``'s row of the series page's PR table."""
    found = re.search(rb'<tr[^>]*data-pr="%d".*?</tr>' % number, body, re.S)
    assert found is not None, number
    return found.group(0)


def test_a_write_to_one_prs_job_changes_its_row_and_nothing_stale_is_sent(
    engine: Engine, client: TestClient
) -> None:
    """A job of #8036's stack run fails: its row of the page (a piece kept by its content,
    stackbot/web/fragments.py, from cells and a verdict kept with the runs' tables) shows it,
    and the whole page is the one a new app computes."""
    seed_series(engine, prs=6, extra_jobs=12, infra_retries=True)
    before = client.get("/series/6307").content
    client.get("/series/6307")  # everything kept now
    with engine.begin() as conn:
        changed = conn.execute(
            text(
                "UPDATE jobs SET status = 'failed' WHERE id = (SELECT min(j.id) FROM jobs j "
                "JOIN integration_runs r ON j.integration_run_id = r.id "
                "WHERE r.target_pr = 8036 AND r.kind = 'stack' AND j.status = 'passed')"
            )
        )
        assert changed.rowcount == 1
    after = client.get("/series/6307").content
    assert _row(after, 8036) != _row(before, 8036)
    assert after == _cold(engine, "/series/6307")
