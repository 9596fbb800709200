"""Reads and writes of recorded webhook deliveries (``webhook_deliveries``) and what a
delivery's processing writes: its status, the repositories' installation id. Recording a
delivery (with its task, in one transaction) is the intake's: :mod:`stackbot.worker.inbox`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine, func, select, update
from sqlmodel import Session, col

from stackbot.db.models import PullRequest, Repository, WebhookDelivery

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
