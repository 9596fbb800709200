"""The landing page (``/landing``) and ``/api/landing`` (issue 25): per repository the gate in
order (what lands next, what is tested speculatively on top of what, what each waits for and
since when), then the landings that finished last with the time from ``/stackbot land`` to
landed, or why they stopped. Three queries, whatever the number of landings."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlmodel import Session, col, select

from stackbot.config import LandingSettings, Settings
from stackbot.db import landing_store
from stackbot.db.models import Landing, Repository
from stackbot.domain.landing import LandingEntry, LandingState
from stackbot.domain.landing_queue import (
    Ahead,
    duration_words,
    finished_words,
    gate_status,
)

RECENT = 20  # finished landings shown


def _aware(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class QueuedLanding:
    landing_id: int
    position: int  # 0: the head of the gate, what lands next
    series_key: str
    entries: tuple[LandingEntry, ...]
    requested_by: str
    kind: str
    pill: str
    status: str
    waiting_for: str | None
    ahead: tuple[Ahead, ...]
    queued_at: datetime
    tested_tree: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "landing": self.landing_id,
            "position": self.position,
            "series": self.series_key,
            "prs": [e.to_json() for e in self.entries],
            "requested_by": self.requested_by,
            "state": self.kind,
            "status": self.status,
            "waiting_for": self.waiting_for,
            "on_top_of": [{"landing": a.landing_id, "prs": list(a.prs)} for a in self.ahead],
            "queued_at": self.queued_at.isoformat(),
            "tested_tree": self.tested_tree,
        }


@dataclass(frozen=True)
class FinishedLanding:
    landing_id: int
    series_key: str
    entries: tuple[LandingEntry, ...]
    state: str
    pill: str
    status: str
    cause: str | None
    queued_at: datetime
    finished_at: datetime | None

    @property
    def seconds(self) -> float | None:
        """From ``/stackbot land`` to landed (or stopped, or cancelled)."""
        if self.finished_at is None:
            return None
        return (self.finished_at - self.queued_at).total_seconds()

    @property
    def took(self) -> str:
        return duration_words(self.seconds)

    @property
    def merged(self) -> int:
        return sum(1 for e in self.entries if e.state == "merged")

    def to_json(self) -> dict[str, Any]:
        return {
            "landing": self.landing_id,
            "series": self.series_key,
            "prs": [e.to_json() for e in self.entries],
            "state": self.state,
            "status": self.status,
            "cause": self.cause,
            "queued_at": self.queued_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "land_to_finished_s": self.seconds,
        }


@dataclass(frozen=True)
class RepoLandings:
    repo: str
    base_ref: str
    queue: tuple[QueuedLanding, ...]
    finished: tuple[FinishedLanding, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "base_ref": self.base_ref,
            "queue": [q.to_json() for q in self.queue],
            "finished": [f.to_json() for f in self.finished],
        }


@dataclass(frozen=True)
class LandingsPage:
    window: int
    repositories: tuple[RepoLandings, ...]

    def to_json(self) -> dict[str, Any]:
        return {"window": self.window, "repositories": [r.to_json() for r in self.repositories]}


def _queue(rows: list[Landing]) -> list[QueuedLanding]:
    """One repository's active landings (oldest first) with where each stands."""
    found: list[QueuedLanding] = []
    ahead: list[Ahead] = []
    for position, row in enumerate(rows):
        assert row.id is not None
        entries = tuple(landing_store.entries_of(row))
        state = LandingState(row.state)
        status = gate_status(state, entries, row.waiting_for, ahead)
        found.append(
            QueuedLanding(
                landing_id=row.id,
                position=position,
                series_key=row.series_key,
                entries=entries,
                requested_by=row.requested_by,
                kind=status.kind,
                pill=status.pill,
                status=status.words,
                waiting_for=(row.waiting_for or "").replace("`", "") or None,
                ahead=tuple(ahead),
                queued_at=_aware(row.created_at) or row.created_at,
                tested_tree=row.tested_tree,
            )
        )
        pending = tuple(e.number for e in entries if e.state != "merged")
        ahead = [*ahead, Ahead(row.id, pending)]
    return found


def _finished(row: Landing) -> FinishedLanding:
    assert row.id is not None
    pill, words, cause = finished_words(LandingState(row.state), row.reason)
    return FinishedLanding(
        landing_id=row.id,
        series_key=row.series_key,
        entries=tuple(landing_store.entries_of(row)),
        state=row.state,
        pill=pill,
        status=words,
        cause=cause,
        queued_at=_aware(row.created_at) or row.created_at,
        finished_at=_aware(row.finished_at),
    )


def landings_page(session: Session, *, settings: Settings | None) -> LandingsPage:
    active = landing_store.active_landings(session)
    finished = landing_store.finished_landings(session, limit=RECENT)
    repo_ids = {row.repo_id for row in (*active, *finished)}
    repos = {
        repo.id: repo
        for repo in session.exec(select(Repository).where(col(Repository.id).in_(repo_ids)))
    }
    shown: list[RepoLandings] = []
    for repo_id in sorted(repo_ids, key=lambda i: repos[i].full_name if i in repos else ""):
        repo = repos.get(repo_id)
        shown.append(
            RepoLandings(
                repo=repo.full_name if repo is not None else f"repository {repo_id}",
                base_ref=repo.default_branch if repo is not None else "main",
                queue=tuple(_queue([r for r in active if r.repo_id == repo_id])),
                finished=tuple(_finished(r) for r in finished if r.repo_id == repo_id),
            )
        )
    window = (settings.landing if settings is not None else LandingSettings()).window
    return LandingsPage(window=window, repositories=tuple(shown))
