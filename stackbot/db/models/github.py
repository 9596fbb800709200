"""What stackbot knows about GitHub: repositories, pull requests, their dependency edges and
series, webhook deliveries, approvals, and the reports it posted."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import UniqueConstraint
from sqlmodel import Field, SQLModel

from stackbot.db.models._columns import (
    blob_column,
    json_column,
    text_column,
    time_column,
    utcnow,
)


class Repository(SQLModel, table=True):
    __tablename__ = "repositories"

    id: int | None = Field(default=None, primary_key=True)
    full_name: str = Field(unique=True, max_length=200)  # owner/name
    clone_url: str = Field(max_length=1000)
    default_branch: str = Field(default="main", max_length=255)
    installation_id: int | None = None
    created_at: datetime = Field(default_factory=utcnow, sa_column=time_column())


class PullRequest(SQLModel, table=True):
    __tablename__ = "pull_requests"
    __table_args__ = (UniqueConstraint("repo_id", "number", name="uq_pull_requests_repo_number"),)

    id: int | None = Field(default=None, primary_key=True)
    repo_id: int = Field(foreign_key="repositories.id", index=True)
    number: int
    title: str = Field(default="", max_length=1000)
    author: str = Field(default="", max_length=200)
    author_association: str = Field(default="NONE", max_length=40)
    state: str = Field(default="open", max_length=20)  # open | closed
    draft: bool = False
    merged: bool = False
    head_ref: str = Field(default="", max_length=255)
    head_sha: str = Field(default="", max_length=40)
    head_repo: str | None = Field(default=None, max_length=200)  # fork's owner/name
    base_ref: str = Field(default="", max_length=255)
    base_sha: str = Field(default="", max_length=40)
    body: str | None = Field(default=None, sa_column=text_column())
    # GitHub's native stack object ({"id", "number", "size", "position", "base"}) or null.
    stack: dict[str, Any] | None = Field(default=None, sa_column=json_column(nullable=True))
    # [{"sha", "message", "parents"}]: what the merged_head edge source reads.
    commits: list[dict[str, Any]] = Field(default_factory=list, sa_column=json_column())
    # [{"author", "body"}]: what supersession ("Superseded by #N") reads.
    comments: list[dict[str, Any]] = Field(default_factory=list, sa_column=json_column())
    superseded_by: int | None = None
    # Earlier head SHAs, oldest first: `/ok to test` names one of them when it is stale.
    head_history: list[str] = Field(default_factory=list, sa_column=json_column())
    synced_at: datetime = Field(default_factory=utcnow, sa_column=time_column())


class DependencyEdge(SQLModel, table=True):
    __tablename__ = "dependency_edges"
    __table_args__ = (
        UniqueConstraint("repo_id", "child", "parent", "source", name="uq_dependency_edges"),
    )

    id: int | None = Field(default=None, primary_key=True)
    repo_id: int = Field(foreign_key="repositories.id", index=True)
    child: int = Field(index=True)
    parent: int = Field(index=True)
    # native_stack | base_branch | depends_on | merged_head | override
    source: str = Field(max_length=20)
    # The exact words that declared the edge, and where they were (body, a comment, a commit).
    text: str | None = Field(default=None, sa_column=text_column())
    origin: str | None = Field(default=None, sa_column=text_column())


class Series(SQLModel, table=True):
    __tablename__ = "series"
    __table_args__ = (UniqueConstraint("repo_id", "key", name="uq_series_repo_key"),)

    id: int | None = Field(default=None, primary_key=True)
    repo_id: int = Field(foreign_key="repositories.id", index=True)
    key: str = Field(max_length=100)  # "#6307" or "root-#8034"
    tracking_issue: int | None = None
    root_pr: int | None = None
    # PR numbers in series order.
    order: list[int] = Field(default_factory=list, sa_column=json_column())
    # [{"kind", "prs", "detail"}] from the last graph build.
    problems: list[dict[str, Any]] = Field(default_factory=list, sa_column=json_column())
    # The pairwise conflict matrix of the live PRs (stackbot.services.conflicts), or null.
    conflict_matrix: dict[str, Any] | None = Field(
        default=None, sa_column=json_column(nullable=True)
    )
    status: str = Field(default="new", max_length=30)
    updated_at: datetime = Field(default_factory=utcnow, sa_column=time_column())


class SeriesMember(SQLModel, table=True):
    __tablename__ = "series_members"
    __table_args__ = (UniqueConstraint("series_id", "pr_number", name="uq_series_members"),)

    id: int | None = Field(default=None, primary_key=True)
    series_id: int = Field(foreign_key="series.id", index=True)
    pr_number: int = Field(index=True)
    position: int = 0


class WebhookDelivery(SQLModel, table=True):
    __tablename__ = "webhook_deliveries"

    id: int | None = Field(default=None, primary_key=True)
    delivery_id: str = Field(unique=True, max_length=100)  # X-GitHub-Delivery
    event: str = Field(max_length=60, index=True)
    action: str | None = Field(default=None, max_length=60)
    repo_full_name: str | None = Field(default=None, max_length=200)
    body: bytes = Field(sa_column=blob_column())
    status: str = Field(
        default="recorded", max_length=20
    )  # recorded | processed | ignored | failed
    error: str | None = Field(default=None, sa_column=text_column())
    received_at: datetime = Field(default_factory=utcnow, sa_column=time_column(index=True))
    processed_at: datetime | None = Field(default=None, sa_column=time_column(nullable=True))


class Approval(SQLModel, table=True):
    """A vetter's `/ok to test <sha>` (or a trusted author's automatic approval) for one commit."""

    __tablename__ = "approvals"
    __table_args__ = (UniqueConstraint("repo_id", "pr_number", "sha", name="uq_approvals"),)

    id: int | None = Field(default=None, primary_key=True)
    repo_id: int = Field(foreign_key="repositories.id", index=True)
    pr_number: int = Field(index=True)
    sha: str = Field(max_length=40)
    vetter: str = Field(max_length=200)
    kind: str = Field(default="ok_to_test", max_length=20)  # ok_to_test | trusted | carried
    comment_id: int | None = None
    # A carried approval (same own patch, stackbot.domain.approval_carry): the head it came from.
    carried_from: str | None = Field(default=None, max_length=40)
    created_at: datetime = Field(default_factory=utcnow, sa_column=time_column())


class Report(SQLModel, table=True):
    """Where stackbot's output on one PR lives: its sticky comment and its check runs."""

    __tablename__ = "reports"
    __table_args__ = (UniqueConstraint("repo_id", "pr_number", name="uq_reports"),)

    id: int | None = Field(default=None, primary_key=True)
    repo_id: int = Field(foreign_key="repositories.id", index=True)
    pr_number: int
    comment_id: int | None = None
    # sha256 of the last body written, so an unchanged report is not written again.
    comment_hash: str | None = Field(default=None, max_length=64)
    # {"<head sha>": {"amax-group 1x4": {"id": 123, "hash": "..."}}}
    check_runs: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
    updated_at: datetime = Field(default_factory=utcnow, sa_column=time_column())
