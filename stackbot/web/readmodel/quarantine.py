"""The quarantine page (issue 26 point 6): what is quarantined in each repository, since when,
on what evidence, until when, and how far its release rule has got; then what ended."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import Session

from stackbot.config import Settings
from stackbot.db import github_store, quarantine_store
from stackbot.domain.quarantine import QuarantinePolicy
from stackbot.services import quarantine


@dataclass(frozen=True)
class QuarantineRow:
    repo: str
    nodeid: str
    state: str
    reason: str
    requested_by: str | None
    started_at: datetime
    expires_at: datetime
    renewed_by: str | None
    ended_at: datetime | None
    end_note: str | None
    evidence: tuple[dict[str, Any], ...]
    owners: tuple[str, ...]
    progress: int  # clean runs in a row since it started


@dataclass(frozen=True)
class QuarantinePage:
    active: tuple[QuarantineRow, ...]
    ended: tuple[QuarantineRow, ...]
    flaky_count: int
    window_days: int
    release_after: int
    expiry_days: int


def quarantine_page(session: Session, *, settings: Settings | None) -> QuarantinePage:
    policy = quarantine.policy_of(settings) if settings is not None else None
    rows: list[QuarantineRow] = []
    for repo in github_store.list_repositories(session):
        if repo.id is None:
            continue
        for entry in quarantine_store.entries(session, repo_id=repo.id):
            active = entry.state == "active"
            rows.append(
                QuarantineRow(
                    repo=repo.full_name,
                    nodeid=entry.nodeid,
                    state=entry.state,
                    reason=entry.reason,
                    requested_by=entry.requested_by,
                    started_at=entry.started_at,
                    expires_at=entry.expires_at,
                    renewed_by=entry.renewed_by,
                    ended_at=entry.ended_at,
                    end_note=entry.end_note,
                    evidence=tuple(entry.evidence or ()),
                    owners=tuple(entry.owners or ()),
                    progress=quarantine.release_progress(session, entry) if active else 0,
                )
            )
    defaults = QuarantinePolicy() if policy is None else policy
    return QuarantinePage(
        active=tuple(r for r in rows if r.state == "active"),
        ended=tuple(r for r in rows if r.state != "active"),
        flaky_count=defaults.flaky_count,
        window_days=defaults.window_days,
        release_after=defaults.release_after,
        expiry_days=defaults.expiry_days,
    )
