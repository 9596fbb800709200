"""Reads and writes of recorded webhook deliveries (``webhook_deliveries``) and what a
delivery's processing writes: its status, the repositories' installation id. Recording a
delivery (with its task, in one transaction) is the intake's: :mod:`stackbot.taskqueue.inbox`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, func, select, text, update
from sqlalchemy.dialects import sqlite
from sqlmodel import Session, col

from stackbot.db.models import PullRequest, Repository, WebhookDelivery


def insert_new_delivery(conn: Connection, *, values: Mapping[str, Any]) -> int | None:
    """Insert a delivery row (SQLite); None when its delivery id is already recorded."""
    statement = (
        sqlite.insert(WebhookDelivery)
        .values(dict(values))
        .on_conflict_do_nothing(index_elements=[col(WebhookDelivery.delivery_id)])
        .returning(col(WebhookDelivery.id))
    )
    row_id = conn.execute(statement).scalar_one_or_none()
    return None if row_id is None else int(row_id)


# PostgreSQL records a delivery and queues its task in one statement: one round trip, one
# statement to execute, where the intake's latency is mostly waiting on the database.
_RECORD_AND_ENQUEUE = text(
    """
    WITH delivery AS (
        INSERT INTO webhook_deliveries (delivery_id, event, action, repo_full_name, body, status,
                                        error, received_at, processed_at)
        VALUES (:delivery_id, :event, :action, :repo_full_name, :body, :status, :error,
                :received_at, :processed_at)
        ON CONFLICT (delivery_id) DO NOTHING
        RETURNING id
    ), task AS (
        INSERT INTO tasks (kind, payload, state, status, attempts, max_attempts, run_after,
                           created_at, updated_at)
        SELECT :kind, json_build_object('delivery', delivery.id), '{}'::json, 'pending', 0,
               :max_attempts, :received_at, :received_at, :received_at
        FROM delivery WHERE :enqueue
        RETURNING id
    )
    SELECT (SELECT id FROM delivery), (SELECT id FROM task)
    """
)


def insert_delivery_and_task(
    conn: Connection, *, parameters: Mapping[str, Any]
) -> tuple[int | None, int | None]:
    """PostgreSQL: insert a delivery row and, when ``parameters["enqueue"]``, its
    ``process_delivery`` task, in one statement; (None, None) for a delivery id already
    recorded."""
    row_id, task_id = conn.execute(_RECORD_AND_ENQUEUE, dict(parameters)).one()
    return row_id, task_id


# A delivery's status.
RECORDED, PROCESSED, IGNORED, FAILED = "recorded", "processed", "ignored", "failed"


def load_delivery(engine: Engine, row_id: int) -> WebhookDelivery | None:
    with Session(engine) as session:
        delivery = session.get(WebhookDelivery, row_id)
        if delivery is not None:
            session.expunge(delivery)
    return delivery


def mark_delivery(session: Session, row_id: int, status: str, reason: str | None = None) -> None:
    session.execute(
        update(WebhookDelivery)
        .where(col(WebhookDelivery.id) == row_id)
        .values(status=status, error=reason, processed_at=datetime.now(UTC))
    )


def count_deliveries(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(WebhookDelivery)).scalar_one())


def open_base_branches(engine: Engine, repo: str) -> frozenset[str]:
    """Branches the repository's open pull requests target: a push to one moves a base."""
    statement = (
        select(col(PullRequest.base_ref))
        .join(Repository, col(Repository.id) == col(PullRequest.repo_id))
        .where((col(Repository.full_name) == repo) & (col(PullRequest.state) == "open"))
        .distinct()
    )
    with engine.connect() as conn:
        return frozenset(str(ref) for ref in conn.execute(statement).scalars())


def record_installation(
    session: Session, installation_id: int | None, repos: tuple[str, ...]
) -> int:
    """Set (or, with None, clear) the installation id of the repositories stackbot knows."""
    if not repos:
        return 0
    result = session.execute(
        update(Repository)
        .where(col(Repository.full_name).in_(list(repos)))
        .values(installation_id=installation_id)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]
