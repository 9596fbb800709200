"""What one read of many PR views shares, read once: a memo that lives in the SQLAlchemy
session for the duration of a batch (see :func:`stackbot.services.report_views.build_report_views`).
Outside a batch every lookup reads the database, so a session that writes between two reports
never sees a stale value."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlmodel import Session

from stackbot.db import integration_store, jobs_store
from stackbot.db.models import IntegrationStep, Job

T = TypeVar("T")
MEMO = "stackbot.report_views.batch"


@contextmanager
def batch(session: Session) -> Iterator[None]:
    """While building the views of many PRs in one read, what they share (the series run, its
    jobs and their results, main's baselines, the series list) is read once."""
    if MEMO in session.info:
        yield
        return
    session.info[MEMO] = {}
    try:
        yield
    finally:
        session.info.pop(MEMO, None)


def memo(session: Session, key: tuple[Any, ...], compute: Callable[[], T]) -> T:
    """``compute()``, or in a batch the value already computed for ``key``."""
    found: dict[tuple[Any, ...], Any] | None = session.info.get(MEMO)
    if found is None:
        return compute()
    if key not in found:
        found[key] = compute()
    return found[key]  # type: ignore[no-any-return]


def memo_table(session: Session) -> dict[tuple[Any, ...], Any] | None:
    """The batch's memo itself (None outside a batch), for preloading it."""
    found: dict[tuple[Any, ...], Any] | None = session.info.get(MEMO)
    return found


def steps_of(session: Session, run_id: int) -> list[IntegrationStep]:
    return memo(
        session, ("steps", run_id), lambda: integration_store.steps_of(session, run_id=run_id)
    )


def jobs_of_run(session: Session, run_id: int) -> list[Job]:
    return memo(session, ("jobs", run_id), lambda: jobs_store.jobs_of_run(session, run_id=run_id))


def baselines_on(session: Session, repo_id: int, commit_sha: str) -> Sequence[Job]:
    return memo(
        session,
        ("baselines on", repo_id, commit_sha),
        lambda: jobs_store.baselines_on(session, repo_id=repo_id, commit_sha=commit_sha),
    )
