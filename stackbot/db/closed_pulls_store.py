"""Closed pull requests by repository: what the dashboard reads to find children GitHub closed
when their base branch was deleted (the decision is :func:`stackbot.domain.retarget.closed_children`)."""

from __future__ import annotations

from sqlmodel import Session, col, select

from stackbot.db.github_store import pr_record
from stackbot.db.models import PullRequest, Repository
from stackbot.domain.records import PrRecord


def closed_pulls_by_repository(session: Session) -> dict[str, list[PrRecord]]:
    """``{owner/name: closed PRs}`` (merged or not), by number; one query."""
    statement = (
        select(PullRequest, Repository)
        .join(Repository)
        .where(PullRequest.state == "closed")
        .order_by(col(Repository.full_name), col(PullRequest.number))
    )
    found: dict[str, list[PrRecord]] = {}
    for pull, repository in session.exec(statement).all():
        found.setdefault(repository.full_name, []).append(pr_record(pull))
    return found
