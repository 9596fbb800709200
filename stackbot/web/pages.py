"""What the JSON API and the dashboard both do per request: open a session, read the app's
settings, and find a page or answer 404, so each route says only how it renders."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import HTTPException, Request, Response
from sqlmodel import Session

from stackbot.config import MaintenanceSettings, Settings
from stackbot.web import page_cache, readmodel

T = TypeVar("T")


def session(request: Request) -> Session:
    return Session(request.app.state.engine)


def settings(request: Request) -> Settings | None:
    """The app's settings; None in an app made without them (tests)."""
    found: Settings | None = getattr(request.app.state, "settings", None)
    return found


def maintenance_settings(request: Request) -> MaintenanceSettings:
    found = settings(request)
    return found.maintenance if found is not None else MaintenanceSettings()


def or_404(page: T | None, missing: str) -> T:
    """``page``, or a 404 saying ``missing`` when there is none."""
    if page is None:
        raise HTTPException(404, missing)
    return page


def series_gpu(request: Request, slug: str) -> readmodel.SeriesGpuPage:
    key = readmodel.key_from_slug(slug)
    with session(request) as db:
        page = readmodel.series_gpu_page(db, key, settings=settings(request))
    return or_404(page, f"no series {key!r}")


def series_flaky(request: Request, slug: str) -> readmodel.SeriesFlakyPage:
    key = readmodel.key_from_slug(slug)
    with session(request) as db:
        page = readmodel.series_flaky_page(db, key)
    return or_404(page, f"no series {key!r}")


def job(request: Request, job_id: int) -> readmodel.JobDetail:
    with session(request) as db:
        detail = readmodel.job_detail(db, job_id)
    return or_404(detail, f"no job {job_id}")


def send_series(
    request: Request,
    slug: str,
    render: Callable[[readmodel.SeriesPage], bytes],
    *,
    kind: str,
    media_type: str,
) -> Response:
    """The series page of ``slug`` rendered by ``render``, kept in the page cache under
    ``(kind, key)``; 404 when there is no such series."""
    key = readmodel.key_from_slug(slug)

    def build() -> bytes | None:
        with session(request) as db:
            page = readmodel.series_page(
                db, key, settings=settings(request), shared=page_cache.of(request).derived
            )
        return None if page is None else render(page)

    return page_cache.send(
        request, (kind, key), build, missing=f"no series {key!r}", media_type=media_type
    )


def send_pull(
    request: Request,
    number: int,
    render: Callable[[dict[str, Any]], bytes],
    *,
    kind: str,
    media_type: str,
) -> Response:
    """Pull request ``number``'s detail rendered by ``render``, kept in the page cache under
    ``(kind, number)``; 404 when there is no such pull request."""

    def build() -> bytes | None:
        with session(request) as db:
            detail = readmodel.pull_detail(db, number, settings=settings(request))
        return None if detail is None else render(detail)

    return page_cache.send(
        request,
        (kind, number),
        build,
        missing=f"no pull request #{number}",
        media_type=media_type,
    )
