"""The ``reconcile`` task: repair what lost webhook deliveries missed (GitHub does not redeliver).

Every ``settings.worker.reconcile_interval_s`` seconds, per repository with tracked series:
list its open PRs, compare each with the stored row (head, state, base, draft, title, body),
and queue ``sync_pull`` for every PR that differs, that stackbot has never seen, or that is
stored as open but GitHub no longer lists as open. The sync does the rest (graph, approvals,
integration). A payload without ``repo`` fans out to every tracked repository.

It also catches up on comments (a command sent while the intake answered 503 is not redelivered
by GitHub): for every open PR it lists the comments updated since the newest it read there
(``comment_cursors``; :data:`FIRST_LOOK_S` back on a PR it never read) and queues ``pr_command``
for each one holding a command. A command is acted on once whichever
path queued it first (``acted_commands``, claimed by the task).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine
from sqlmodel import Session

from stackbot.adapters.github.port import GitHubPort
from stackbot.db import acted_store
from stackbot.db import github_store as store
from stackbot.db.engine import session_scope
from stackbot.db.models import PullRequest
from stackbot.domain.commands import parse_command
from stackbot.domain.records import CommentRecord, PrRecord
from stackbot.domain.tasks import FollowUp, PrCommand, Reconcile, SyncPull
from stackbot.domain.types import PrNumber, RepoName
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry

log = logging.getLogger(__name__)

# How far back reconcile reads the comments of a PR it has never read (an outage before its
# first round; older comments were seen by the webhook, and are not acted on again).
FIRST_LOOK_S = 6 * 3600.0


@dataclass(frozen=True)
class Drift:
    number: PrNumber
    why: str  # "new", "head abc1234 → def5678", "closed on GitHub", ...


def find_drift(stored: list[PullRequest], open_on_github: list[PrRecord]) -> list[Drift]:
    """Which PRs the database has wrong, judged from GitHub's list of open PRs (pure)."""
    rows = {row.number: row for row in stored}
    listed = {pr.number for pr in open_on_github}
    drift = [d for pr in open_on_github if (d := _compare(rows.get(pr.number), pr)) is not None]
    drift += [
        Drift(PrNumber(row.number), "stored as open, no longer open on GitHub")
        for row in stored
        if row.state == "open" and row.number not in listed
    ]
    return sorted(drift, key=lambda d: d.number)


def _compare(row: PullRequest | None, pr: PrRecord) -> Drift | None:
    if row is None:
        return Drift(pr.number, "not stored yet")
    if row.head_sha != pr.head_sha:
        return Drift(pr.number, f"head {row.head_sha[:7]} → {pr.head_sha[:7]}")
    if row.state != pr.state:
        return Drift(pr.number, f"state {row.state} → {pr.state}")
    for name in ("base_ref", "draft", "title"):
        if getattr(row, name) != getattr(pr, name):
            return Drift(pr.number, f"{name} changed")
    if (row.body or "") != (pr.body or ""):
        return Drift(pr.number, "body changed")
    return None


def reconcile_repo(
    engine: Engine, client: GitHubPort, *, repo: RepoName, open_prs: list[PrRecord] | None = None
) -> list[Drift]:
    if open_prs is None:
        open_prs = list(client.list_open_pulls(repo))
    with session_scope(engine) as session:
        repository = store.get_repository(session, full_name=repo)
        stored = (
            []
            if repository is None or repository.id is None
            else store.list_pulls(session, repo_id=repository.id)
        )
        drift = find_drift(stored, open_prs)
    return drift


def periodic_round(*, delay_s: float) -> FollowUp:
    """The periodic repair of every tracked repository, unless a round is already pending or
    running (so activity never postpones it)."""
    return FollowUp.of(Reconcile(None), delay_s=delay_s, unless_open=True)


def first_rounds(engine: Engine) -> list[FollowUp]:
    """What a worker starts with: when it has repositories to watch, a repair of what was
    missed while no worker ran (the first sync of a new repository starts the rounds
    otherwise)."""
    with session_scope(engine) as session:
        tracked = bool(store.tracked_repositories(session))
    return [periodic_round(delay_s=0.0)] if tracked else []


def handle_reconcile(ctx: ServiceContext, task: Reconcile) -> None:
    repo = task.repo
    interval = ctx.settings.worker.reconcile_interval_s
    if repo is None:
        with session_scope(ctx.engine) as session:
            repos = [RepoName(r.full_name) for r in store.tracked_repositories(session)]
        log.info("reconcile: %d tracked repositories", len(repos))
        for name in repos:
            ctx.enqueue_task(Reconcile(name))
        # Repositories that become tracked later are picked up by the next round.
        ctx.enqueue_task(Reconcile(None), delay_s=interval)
        return
    client = ctx.services.github()
    open_prs = list(client.list_open_pulls(repo))
    drift = reconcile_repo(ctx.engine, client, repo=repo, open_prs=open_prs)
    for item in drift:
        log.info("reconcile %s#%d: %s", repo, item.number, item.why)
        ctx.enqueue_task(SyncPull(repo, item.number, action="reconcile"))
    for pr in open_prs:
        catch_up_comments(ctx, client, repo, pr.number)
    log.info("reconcile %s: %d PRs to sync; next in %.0f s", repo, len(drift), interval)
    ctx.enqueue_task(Reconcile(repo), delay_s=interval)


def catch_up_comments(
    ctx: ServiceContext, client: GitHubPort, repo: RepoName, number: PrNumber
) -> None:
    """Queue ``pr_command`` for the comments of PR ``number`` updated since the newest one read
    there that hold a command; the cursor moves when this task
    completes (GitHub's ``since`` includes that comment again: its task does nothing)."""
    with session_scope(ctx.engine, immediate=False) as session:
        since = acted_store.cursor(session, repo=repo, pr_number=number)
    if since is None:
        first = datetime.now(UTC) - timedelta(seconds=FIRST_LOOK_S)
        since = first.strftime("%Y-%m-%dT%H:%M:%SZ")
    comments = list(client.list_issue_comments(repo, number, since=since))
    queued = 0
    for comment in comments:
        if comment.id is None or not _may_ask(comment):
            continue
        ctx.enqueue_task(_command_task(repo, number, comment))
        queued += 1
    if queued:
        log.info("reconcile %s#%d: %d comments since %s to act on", repo, number, queued, since)
    newest = max((c.updated_at for c in comments), default="")
    if newest > since:

        def move(session: Session) -> None:
            acted_store.move_cursor(session, repo=repo, pr_number=number, seen_until=newest)

        ctx.on_completion(move)


def _may_ask(comment: CommentRecord) -> bool:
    # A dependency sentence is read by every sync of the PR (which drift queues); a command
    # is acted on once (the task claims it).
    return parse_command(comment.body) is not None


def _command_task(repo: RepoName, number: PrNumber, comment: CommentRecord) -> PrCommand:
    assert comment.id is not None
    edited = bool(comment.created_at) and comment.updated_at != comment.created_at
    return PrCommand(
        repo=repo,
        number=number,
        comment_id=comment.id,
        author=comment.author,
        body=comment.body,
        author_association=comment.author_association,
        action="edited" if edited else "created",
        updated_at=comment.updated_at,
    )


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(Reconcile, handle_reconcile)
