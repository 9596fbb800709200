"""Quarantine on evidence and release on evidence (issue 26), applied to a repository.

:func:`review_repository` runs after the test plans of a round of finished jobs: it quarantines
the tests with enough flaky observations in the window (recording them as evidence, and the
authors of the test file's last changes as the people who may release it), and ends the active
quarantines that a deterministic failure lifts, a clean record releases or the date expires.
:func:`quarantine_by_maintainer` / :func:`release_by_maintainer` are the slash commands' side.
Each is idempotent: a retried task changes nothing twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from stackbot.adapters.git import GitMirror
from stackbot.config import Settings
from stackbot.db import quarantine_store
from stackbot.db.engine import session_scope
from stackbot.db.models import QuarantineEntry
from stackbot.domain.own_tests import file_of
from stackbot.domain.quarantine import (
    ACTIVE,
    EVIDENCE,
    MAINTAINER,
    RELEASED,
    QuarantinePolicy,
    review,
    to_quarantine,
)

log = logging.getLogger(__name__)


def _wall_clock() -> datetime:
    return datetime.now(UTC)


# What "now" is for the windows, streaks and expiry dates: the wall clock, or a simulation's
# clock (benchmarks/plan_sim.py sets it, so simulated job times are read on their own scale).
clock: Callable[[], datetime] = _wall_clock

# The authors of a test file's last changes (from git): the people who may release it.
Authors = Callable[[str], Sequence[str]]


def policy_of(settings: Settings) -> QuarantinePolicy:
    return QuarantinePolicy(
        flaky_count=settings.quarantine_flaky_count,
        window_days=settings.quarantine_window_days,
        release_after=settings.quarantine_release_after,
        expiry_days=settings.quarantine_expiry_days,
    )


def review_repository(
    engine: Engine,
    repo_id: int,
    *,
    policy: QuarantinePolicy,
    now: datetime | None = None,
    authors: Authors | None = None,
) -> list[str]:
    """Quarantine what the evidence says and end what it no longer supports; returns lines
    saying what changed (for the log)."""
    now = now or clock()
    changes: list[str] = []
    try:
        with session_scope(engine) as session:
            changes += _end_quarantines(session, repo_id, policy, now)
            changes += _start_quarantines(session, repo_id, policy, now, authors)
    except IntegrityError:  # another worker quarantined the same test at the same moment
        return review_repository(engine, repo_id, policy=policy, now=now, authors=authors)
    for line in changes:
        log.info("repo %d: %s", repo_id, line)
    return changes


def _start_quarantines(
    session: Session,
    repo_id: int,
    policy: QuarantinePolicy,
    now: datetime,
    authors: Authors | None,
) -> list[str]:
    held = quarantine_store.active_tests(session, repo_id=repo_id)
    seen = quarantine_store.flaky_observations(session, repo_id=repo_id, since=now - policy.window)
    # A test whose quarantine ended is judged on what was seen after the end only.
    ended = {
        row.nodeid: _aware(row.ended_at)
        for row in quarantine_store.entries(session, repo_id=repo_id)
        if row.ended_at is not None
    }
    seen = [o for o in seen if o.nodeid not in ended or o.at > ended[o.nodeid]]
    changes = []
    for nodeid, evidence in to_quarantine(seen, now=now, policy=policy, held=held).items():
        row = quarantine_store.entry(session, repo_id=repo_id, nodeid=nodeid)
        row = _restart(row, repo_id, nodeid, now, policy)
        row.reason, row.requested_by = EVIDENCE, None
        row.evidence = [o.to_json() for o in evidence]
        row.owners = _owners(nodeid, authors)
        session.add(row)
        changes.append(f"quarantined {nodeid}: flaky {len(evidence)} times")
    return changes


def _end_quarantines(
    session: Session, repo_id: int, policy: QuarantinePolicy, now: datetime
) -> list[str]:
    changes = []
    for row in quarantine_store.entries(session, repo_id=repo_id):
        if row.state != ACTIVE:
            continue
        start = _aware(row.started_at)
        decision = review(
            expires_at=_aware(row.expires_at),
            outcomes_since_start=quarantine_store.outcomes_since(
                session, repo_id=repo_id, nodeid=row.nodeid, since=start
            ),
            failed_every_time=quarantine_store.failed_every_time_since(
                session, repo_id=repo_id, nodeid=row.nodeid, since=start
            ),
            now=now,
            policy=policy,
        )
        if decision is None:
            continue
        row.state, row.ended_at, row.ended_by, row.end_note = (
            decision.state,
            now,
            None,
            (decision.note),
        )
        session.add(row)
        changes.append(f"{decision.state} {row.nodeid}: {decision.note}")
    return changes


def release_progress(session: Session, row: QuarantineEntry) -> int:
    """The clean runs in a row since the quarantine started."""
    from stackbot.domain.quarantine import clean_streak

    outcomes = quarantine_store.outcomes_since(
        session, repo_id=row.repo_id, nodeid=row.nodeid, since=_aware(row.started_at)
    )
    return clean_streak(outcomes)


def quarantine_by_maintainer(
    session: Session,
    repo_id: int,
    nodeid: str,
    *,
    login: str,
    policy: QuarantinePolicy,
    now: datetime | None = None,
    authors: Authors | None = None,
) -> tuple[QuarantineEntry, bool]:
    """``/stackbot quarantine <test>``: quarantine it, or renew an active quarantine (its
    expiry starts again). Returns the entry and whether it was already active (renewed)."""
    now = now or clock()
    row = quarantine_store.entry(session, repo_id=repo_id, nodeid=nodeid)
    if row is not None and row.state == ACTIVE:
        row.expires_at, row.renewed_by = now + policy.expiry, login
        session.add(row)
        return row, True
    row = _restart(row, repo_id, nodeid, now, policy)
    row.reason, row.requested_by, row.evidence = MAINTAINER, login, []
    row.owners = _owners(nodeid, authors)
    session.add(row)
    return row, False


def release_by_maintainer(
    session: Session, repo_id: int, nodeid: str, *, login: str, now: datetime | None = None
) -> QuarantineEntry | None:
    """``/stackbot release <test>``: end its quarantine (None: it is not quarantined)."""
    row = quarantine_store.entry(session, repo_id=repo_id, nodeid=nodeid)
    if row is None or row.state != ACTIVE:
        return None
    row.state, row.ended_at, row.ended_by = RELEASED, now or clock(), login
    row.end_note = f"released by @{login}"
    session.add(row)
    return row


def _restart(
    row: QuarantineEntry | None,
    repo_id: int,
    nodeid: str,
    now: datetime,
    policy: QuarantinePolicy,
) -> QuarantineEntry:
    if row is None:
        return QuarantineEntry(
            repo_id=repo_id,
            nodeid=nodeid,
            state=ACTIVE,
            reason=EVIDENCE,
            started_at=now,
            expires_at=now + policy.expiry,
        )
    history = list(row.history or [])
    history.append(
        {
            "reason": row.reason,
            "started_at": _aware(row.started_at).isoformat(),
            "ended_at": _aware(row.ended_at).isoformat() if row.ended_at else None,
            "state": row.state,
            "note": row.end_note,
            "evidence": row.evidence,
        }
    )
    row.history = history
    row.state, row.started_at, row.expires_at = ACTIVE, now, now + policy.expiry
    row.ended_at = row.ended_by = row.end_note = row.renewed_by = None
    return row


def _owners(nodeid: str, authors: Authors | None) -> list[str]:
    if authors is None:
        return []
    try:
        return list(dict.fromkeys(authors(file_of(nodeid))))[:5]
    except Exception as exc:  # the quarantine stands without its owners
        log.warning("could not read the authors of %s: %s", file_of(nodeid), exc)
        return []


def mirror_authors(clone_url: str, mirrors_dir: Path, ref: str) -> Authors:
    """The authors of a file's last changes at ``ref`` in the repository's mirror, newest first
    (git log); the mirror is opened only when a test is quarantined."""

    def authors(path: str) -> list[str]:
        git = GitMirror.open_or_clone(clone_url, mirrors_dir)
        done = git.git("log", "-n", "20", "--format=%an", ref, "--", path)
        names = done.stdout.decode("utf-8", "replace").splitlines()
        return [name.strip() for name in names if name.strip()]

    return authors


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
