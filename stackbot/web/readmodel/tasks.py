"""The tasks page (queue counts and dead letters) and the change token the pages poll."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlmodel import Session

from stackbot.db import dashboard_store
from stackbot.web.exposure import public_error


@dataclass(frozen=True)
class TaskCounts:
    by_status: dict[str, int] = field(default_factory=dict)
    dead: tuple[dict[str, Any], ...] = ()
    active: tuple[dict[str, Any], ...] = ()


def _subject(payload: dict[str, Any]) -> str:
    """What a task is about, from its payload's repository and number or series key only."""
    repo, number = payload.get("repo"), payload.get("number")
    if isinstance(number, int):
        return f"{repo}#{number}" if isinstance(repo, str) else f"#{number}"
    key = payload.get("series_key")
    if isinstance(key, str):
        return f"{repo} series {key}" if isinstance(repo, str) else f"series {key}"
    return repo if isinstance(repo, str) else ""


def task_counts(session: Session, *, active_limit: int = 100) -> TaskCounts:
    counts = dashboard_store.task_status_counts(session)
    dead = dashboard_store.dead_tasks(session, limit=20)
    return TaskCounts(
        active=tuple(
            {
                "id": t.id,
                "kind": t.kind,
                "subject": _subject(t.payload or {}),
                "status": t.status,
                "attempts": t.attempts,
                "run_after": t.run_after,
            }
            for t in dashboard_store.active_tasks(session, limit=active_limit)
        ),
        by_status=counts,
        dead=tuple(
            {
                "id": t.id,
                "kind": t.kind,
                "attempts": t.attempts,
                "error": public_error(t.last_error, t.id),
            }
            for t in dead
        ),
    )


def change_token(session: Session) -> str:
    """Changes whenever anything the dashboard shows changes."""
    return "|".join(str(part) for part in dashboard_store.change_markers(session))


def last_data_change(session: Session) -> str | None:
    """When the data last changed (ISO 8601): jobs, runs, series and PRs, not the queue's own
    bookkeeping (a poll task touches it every few seconds)."""
    moments = [m for m in dashboard_store.change_markers(session)[2:] if isinstance(m, datetime)]
    return max(moments).isoformat() if moments else None
