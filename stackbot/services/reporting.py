"""Publish report views on GitHub: one sticky comment per PR and one check run per test set
and shape on the PR's head SHA.

Writes are coalesced and skipped when nothing changed: each PR gets at most one comment write
and one write per check run per call, and none at all when the rendered text hashes to what was
written last time (``Report.comment_hash``, ``Report.check_runs``). The sticky comment is found
by its stored id, else by the hidden marker among the PR's comments (the database may have been
reset), else created. Where the App may not write check runs (``ChecksNotPermitted``), commit
statuses (context ``stackbot/tests: <test set> <shape>``) carry the same verdicts.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, text

from stackbot.adapters import github_errors as gh
from stackbot.adapters.github.port import GitHubPort
from stackbot.config import Settings
from stackbot.db import github_store as store
from stackbot.db.engine import session_scope
from stackbot.domain.report import MARKER, render_sticky_comment
from stackbot.domain.report_checks import (
    TESTS_CHECK_PREFIX,
    integration_details_url,
    is_own_row,
    ordered_rows,
    render_approval_check,
    render_check_run,
    render_integration_check,
    render_own_files_check,
    render_retired_check,
    render_series_tests_check,
)
from stackbot.domain.report_view import CheckRunContent, PrReportView
from stackbot.domain.tasks import Report
from stackbot.domain.types import PrNumber, RepoName
from stackbot.services.report_views import build_report_views
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry

log = logging.getLogger(__name__)


STATUS_DESCRIPTION_LIMIT = 140  # GitHub's limit for a commit status description
# Check run conclusion -> commit status state (statuses know no neutral or cancelled).
_STATUS_STATE = {
    None: "pending",
    "success": "success",
    "neutral": "success",
    "failure": "failure",
    "timed_out": "error",
    "cancelled": "error",
    "action_required": "failure",
}


@dataclass
class PublishCounts:
    """What one publish call wrote (for logs, progress and tests)."""

    comments_created: int = 0
    comments_edited: int = 0
    checks_created: int = 0
    checks_updated: int = 0
    statuses: int = 0
    skipped: int = 0
    prs: list[int] = field(default_factory=list)

    @property
    def writes(self) -> int:
        return (
            self.comments_created
            + self.comments_edited
            + self.checks_created
            + self.checks_updated
            + self.statuses
        )


def digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def publish_reports(
    engine: Engine,
    client: GitHubPort,
    repo: RepoName,
    views: Sequence[PrReportView],
    *,
    locked: bool = False,
) -> PublishCounts:
    """Bring every view's PR up to date on GitHub; the last view of a PR wins. ``locked``: the
    caller already holds every PR's publisher lock (:func:`_publishers`)."""
    latest = {view.pr.number: view for view in views}
    counts = PublishCounts()
    for number in sorted(latest):
        if locked:
            _publish_one_locked(engine, client, repo, latest[number], counts)
        else:
            _publish_one(engine, client, repo, latest[number], counts)
        counts.prs.append(number)
    log.info("published %s: %d writes, %d skipped", repo, counts.writes, counts.skipped)
    return counts


def publish_prs(
    engine: Engine,
    client: GitHubPort,
    settings: Settings,
    *,
    repo: RepoName,
    numbers: Sequence[PrNumber],
) -> PublishCounts:
    """Build the PRs' views from the database and publish them. The views are built while
    holding the PRs' publisher locks: a view built before waiting for another worker's publish
    could be older than what that worker wrote, and would overwrite it (a finished check run
    set back to "queued")."""
    with _publishers(engine, repo, numbers):
        with session_scope(engine) as session:
            views = build_report_views(session, settings, repo=repo, numbers=numbers)
        return publish_reports(engine, client, repo, views, locked=True)


def handle_report(ctx: ServiceContext, task: Report) -> None:
    counts = publish_prs(
        ctx.engine, ctx.services.github(), ctx.settings, repo=task.repo, numbers=task.numbers
    )
    log.info("report %s %s: %d writes", task.repo, list(task.numbers), counts.writes)


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(Report, handle_report)


_LOCAL_PR_LOCKS: dict[tuple[str, int], threading.Lock] = {}
_LOCAL_PR_LOCKS_GUARD = threading.Lock()


@contextmanager
def _publishers(engine: Engine, repo: RepoName, numbers: Sequence[int]) -> Iterator[None]:
    """Reports of a PR are published one at a time: two workers that both read "no check run
    stored" would each create one (the soak saw a PR's check runs twice). Every one of
    ``numbers``' locks, taken in order (two tasks with overlapping PRs cannot deadlock), held
    together: on PostgreSQL transaction-scoped advisory locks in one transaction, released when
    it ends or its connection dies (a SIGKILLed worker); elsewhere locks in this process (SQLite
    has one worker process)."""
    ordered = sorted(set(int(n) for n in numbers))
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            for number in ordered:
                conn.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": _lock_key(repo, number)}
                )
            yield
        return
    with ExitStack() as stack:
        for number in ordered:
            stack.enter_context(_local_lock(repo, number))
        yield


def _lock_key(repo: RepoName, number: int) -> int:
    return int(digest("report", repo, number)[:15], 16)  # fits a bigint


def _local_lock(repo: RepoName, number: int) -> threading.Lock:
    with _LOCAL_PR_LOCKS_GUARD:
        return _LOCAL_PR_LOCKS.setdefault((repo, number), threading.Lock())


def _publish_one(
    engine: Engine, client: GitHubPort, repo: RepoName, view: PrReportView, counts: PublishCounts
) -> None:
    with _publishers(engine, repo, [view.pr.number]):
        _publish_one_locked(engine, client, repo, view, counts)


def _publish_one_locked(
    engine: Engine, client: GitHubPort, repo: RepoName, view: PrReportView, counts: PublishCounts
) -> None:
    number = PrNumber(view.pr.number)  # the view holds the stored row's plain int
    with session_scope(engine) as session:
        repository = store.get_repository(session, full_name=repo)
        if repository is None or repository.id is None:
            raise LookupError(f"{repo} is not stored; sync its pull requests before reporting")
        repo_id = repository.id
        report = store.get_report(session, repo_id=repo_id, pr_number=number)
        comment_id = report.comment_id if report else None
        comment_hash = report.comment_hash if report else None
        checks = dict(report.check_runs) if report else {}
    body = render_sticky_comment(view)
    body_hash = digest(body)
    is_open = view.pr.state == "open"
    if comment_id is None or comment_hash != body_hash:
        # A closed PR's comment is updated where it exists, never started.
        comment_id = _write_comment(client, repo, number, comment_id, body, counts, create=is_open)
        comment_hash = body_hash if comment_id is not None else None
    else:
        counts.skipped += 1
    # Check runs belong to a commit: only the current head's are kept.
    head_checks = dict(checks.get(view.head_sha, {}))
    produced = set()
    for key, external, content, url in _check_runs(view) if is_open else ():
        target = CheckTarget(view.head_sha, url, f"{number}/{external}")
        head_checks[key] = _write_check(client, repo, target, content, head_checks.get(key), counts)
        produced.add(key)
    # A test check run of this head that the current tree no longer has is completed, not left
    # queued (the key of a test check run is its name).
    for key in sorted(set(head_checks) - produced) if is_open else ():
        if key.startswith(TESTS_CHECK_PREFIX):
            target = CheckTarget(view.head_sha, view.url, f"{number}/retired")
            retired = render_retired_check(key, view)
            head_checks[key] = _write_check(client, repo, target, retired, head_checks[key], counts)
    with session_scope(engine) as session:
        store.save_report(
            session,
            repo_id=repo_id,
            pr_number=number,
            comment_id=comment_id,
            comment_hash=comment_hash,
            check_runs={view.head_sha: head_checks} if head_checks else {},
        )


def _check_runs(view: PrReportView) -> list[tuple[str, str, CheckRunContent, str | None]]:
    """(stored key, external id after "<pr>/", content, details URL) of every check run of the
    PR's head, in the order the merge box should list them: integration, approval, then the
    tests with new failures first. A test's key is its check run's name ("stackbot/tests:
    amax-group 2x4"), its external id "<pr>/<set>/<shape>" (what a re-run request names); the
    PR's own test files are one check run, "stackbot/tests: own files" ("<pr>/own:<pr>/*")."""
    found: list[tuple[str, str, CheckRunContent, str | None]] = []
    integration = render_integration_check(view)
    if integration is not None:
        found.append(("integration", "integration", integration, integration_details_url(view)))
    found.append(("approval", "approval", render_approval_check(view), view.url))
    series_tests = render_series_tests_check(view)
    if series_tests is not None:
        run_url = view.series_integration.url if view.series_integration else None
        found.append(("series-tests", "series-tests", series_tests, run_url or view.url))
    rows = ordered_rows(view)  # of the tree the PR was tested in: on every PR it holds
    for row in rows:
        if is_own_row(row):
            continue
        content = render_check_run(view, row.test_set, row.shape)
        # Keyed by the check's name: a later tree updates the same check run.
        found.append((content.name, f"{row.test_set}/{row.shape}", content, row.url))
    own = tuple(row for row in rows if is_own_row(row))
    if own:
        content = render_own_files_check(view, own)
        found.append((content.name, f"{own[0].test_set}/*", content, own[0].url or view.url))
    return found


def _write_comment(
    client: GitHubPort,
    repo: RepoName,
    number: PrNumber,
    comment_id: int | None,
    body: str,
    counts: PublishCounts,
    *,
    create: bool,
) -> int | None:
    if comment_id is None:
        found = find_sticky_comment(client, repo, number)
        if found is not None:
            comment_id, old_body = found
            if old_body == body:
                counts.skipped += 1
                return comment_id
    if comment_id is not None:
        try:
            client.edit_comment(repo, comment_id, body)
            counts.comments_edited += 1
            return comment_id
        except gh.NotFound:
            log.info(
                "%s#%d: sticky comment %d was deleted; posting a new one", repo, number, comment_id
            )
    if not create:
        return None
    new_id = int(client.create_comment(repo, number, body))
    counts.comments_created += 1
    return new_id


def find_sticky_comment(
    client: GitHubPort, repo: RepoName, number: PrNumber
) -> tuple[int, str] | None:
    """The first comment on the PR that starts with the marker (a quote of it starts with ``>``)."""
    for comment in client.list_issue_comments(repo, number):
        if comment.body.startswith(MARKER) and comment.id is not None:
            return int(comment.id), comment.body
    return None


@dataclass(frozen=True)
class CheckTarget:
    head_sha: str
    details_url: str | None
    external_id: str  # "<pr>/<test set>/<shape>": what a "re-run" request names


def _write_check(
    client: GitHubPort,
    repo: RepoName,
    target: CheckTarget,
    content: CheckRunContent,
    stored: dict[str, Any] | None,
    counts: PublishCounts,
) -> dict[str, Any]:
    content_hash = digest(  # the link too: a verdict may move it to another run
        content.status,
        content.conclusion,
        content.title,
        content.summary,
        content.text,
        target.details_url or "",
    )
    if stored is not None and stored.get("hash") == content_hash:
        counts.skipped += 1
        return stored
    if stored is None or stored.get("kind") != "status":
        try:
            run_id = _create_or_update_check(client, repo, target, content, stored, counts)
            return {"kind": "check", "id": run_id, "hash": content_hash}
        except gh.ChecksNotPermitted:
            log.info("%s: check runs not permitted; using commit statuses", repo)
    state = _STATUS_STATE[content.conclusion]
    client.create_commit_status(
        repo,
        target.head_sha,
        state=state,
        context=content.name.replace("stackbot / ", "stackbot/"),
        description=content.title[:STATUS_DESCRIPTION_LIMIT],
        target_url=target.details_url,
    )
    counts.statuses += 1
    return {"kind": "status", "hash": content_hash}


def _create_or_update_check(
    client: GitHubPort,
    repo: RepoName,
    target: CheckTarget,
    content: CheckRunContent,
    stored: dict[str, Any] | None,
    counts: PublishCounts,
) -> int:
    if stored is not None and stored.get("id") is not None:
        client.update_check_run(
            repo,
            int(stored["id"]),
            status=content.status,
            conclusion=content.conclusion,
            title=content.title,
            summary=content.summary,
            text=content.text,
            details_url=target.details_url,
        )
        counts.checks_updated += 1
        return int(stored["id"])
    run_id = client.create_check_run(
        repo,
        target.head_sha,
        content.name,
        status=content.status,
        conclusion=content.conclusion,
        title=content.title,
        summary=content.summary,
        text=content.text,
        details_url=target.details_url,
        external_id=target.external_id,
    )
    counts.checks_created += 1
    return int(run_id)
