"""The series page, a PR's page and their JSON read a fixed number of queries whatever the
series' size (issue 16 goal 5), and the batched PR views equal the ones built one PR at a time."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, text
from sqlmodel import Session

from stackbot.config import load_settings
from stackbot.db import migrate
from stackbot.db.engine import make_engine
from stackbot.services.report_views import build_report_view, build_report_views
from stackbot.web import dashboard
from tests.support import postgres
from tests.support.dashboard_data import seed_series

FIRST_PR = 8034  # seed_series numbers its chain from here


def _pages(prs: int) -> dict[str, str]:
    """Each page by a label that does not depend on the series' size: the series page and its
    JSON, and the page (and JSON) of the second PR and of one deep in the chain, whose stack
    holds almost every PR of the series."""
    deep = FIRST_PR + prs - 2
    return {
        "series": "/series/6307",
        "api series": "/api/series/6307",
        "pull": f"/pulls/{FIRST_PR + 1}",
        "api pull": f"/api/pulls/{FIRST_PR + 1}",
        "deep pull": f"/pulls/{deep}",
        "api deep pull": f"/api/pulls/{deep}",
    }


@contextmanager
def _seeded(backend: str, tmp_path: Path, prs: int) -> Iterator[Engine]:
    with postgres.empty_database(backend, tmp_path, str(prs)) as url:
        migrate.upgrade(url)
        engine = make_engine(url)
        try:
            seed_series(engine, prs=prs, extra_jobs=2 * prs, infra_retries=True)
            yield engine
        finally:
            engine.dispose()


def _move_clock(engine: Engine) -> None:
    """Move the read clock, so the next request computes its page instead of sending the one
    kept (stackbot/web/page_cache.py): these counts are about computing."""
    with engine.begin() as conn:
        conn.execute(text("UPDATE read_clock SET ticks = ticks + 1 WHERE id = 1"))


def _queries_per_page(engine: Engine, prs: int) -> dict[str, int]:
    app = FastAPI()
    app.state.engine = engine
    dashboard.install(app)
    counts: dict[str, int] = {}
    seen: list[str] = []

    def record(*args: object) -> None:
        seen.append(str(args[2]))

    with TestClient(app) as client:
        for label, path in _pages(prs).items():
            assert client.get(path).status_code == 200  # warm: templates, first-use lookups
            _move_clock(engine)
            seen.clear()
            event.listen(engine, "before_cursor_execute", record)
            try:
                response = client.get(path)
            finally:
                event.remove(engine, "before_cursor_execute", record)
            assert response.status_code == 200, path
            if "pull" not in label or "deep" in label:  # the second PR conflicts: no jobs
                assert "after an infra failure on" in response.text, path  # retries are read
            counts[label] = len(seen)
    return counts


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_the_series_and_pr_pages_read_as_many_queries_for_30_prs_as_for_10(
    backend: str, tmp_path: Path
) -> None:
    with _seeded(backend, tmp_path, 10) as engine:
        small = _queries_per_page(engine, 10)
    with _seeded(backend, tmp_path, 30) as engine:
        large = _queries_per_page(engine, 30)
    assert small == large, (small, large)
    # Each PR's verdict needs its stack run, jobs, results, approvals and series: read one PR
    # at a time that was about 25 queries per PR (1,510 for 60 PRs).
    assert all(count < 40 for count in large.values()), large


def test_the_batched_views_equal_the_views_of_one_pr_at_a_time(
    engine: Engine, tmp_path: Path
) -> None:
    seed_series(engine, prs=8, extra_jobs=10, infra_retries=True)
    settings = load_settings(dev=True, data_dir=tmp_path / "data")
    numbers = list(range(8034, 8042))
    with Session(engine) as session:
        batched = build_report_views(session, settings, repo="NVIDIA/Megatron-LM", numbers=numbers)
    with Session(engine) as session:
        single = [
            build_report_view(session, settings, repo="NVIDIA/Megatron-LM", number=n)
            for n in numbers
        ]
    assert len(batched) == 8
    assert batched == [view for view in single if view is not None]
    assert any(view.tests for view in batched)  # the comparison covers test rows
    assert any(row.retry_note for view in batched for row in view.tests)  # and retry chains
