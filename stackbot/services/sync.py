"""The ``sync_pull`` task: bring one PR's stored state up to date with GitHub, rebuild the
repository's series graph, record trusted authors' automatic approvals, and ask for an
integration of every series the change touches.

Webhooks say *that* a PR changed; this task fetches *what* it is now, so a delayed, duplicated
or reordered delivery still leaves the database matching GitHub.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from stackbot.adapters.github.port import GitHubPort
from stackbot.config import Settings
from stackbot.db import github_store as store
from stackbot.db import landing_store, overrides_store
from stackbot.db.engine import session_scope
from stackbot.db.models import PullRequest
from stackbot.domain.records import PrRecord
from stackbot.domain.series import SeriesGraph, build_series_graph
from stackbot.domain.tasks import Integrate, Land, Reconcile, Report, SyncPull
from stackbot.domain.types import PrNumber, RepoName, SeriesKey
from stackbot.domain.vetting import is_trusted_author
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry

log = logging.getLogger(__name__)

# What a PR row holds that changes an integration (a new title alone does not).
_RELEVANT = ("head_sha", "state", "merged", "draft", "base_ref", "base_sha", "body", "stack")


@dataclass(frozen=True)
class SyncOutcome:
    repo: RepoName
    number: PrNumber
    changed: bool  # anything an integration depends on moved (or a new approval)
    series_keys: tuple[SeriesKey, ...]  # series the PR belongs to now or belonged to before
    auto_approved: bool
    head_sha: str
    is_open: bool
    # The PR and the live PRs of its series: whose reports show it.
    related: tuple[PrNumber, ...] = ()


def sync_pull_request(
    engine: Engine, client: GitHubPort, settings: Settings, *, repo: RepoName, number: PrNumber
) -> SyncOutcome:
    """Fetch PR ``number`` of ``repo`` and store it, its graph, and an automatic approval."""
    record = fetch_pull(client, repo, number)
    trusted = record.is_open and _is_trusted(client, settings, record)
    with session_scope(engine) as session:
        repository = store.get_repository(session, full_name=repo)
        if repository is None:  # asked once per repository, not on every sync
            repository = store.upsert_repository(
                session, full_name=repo, clone_url=client.clone_url(repo)
            )
        assert repository.id is not None
        before = store.get_pull(session, repo_id=repository.id, number=number)
        fingerprint = _fingerprint(before)
        keys_before = store.series_keys_of(session, repo_id=repository.id, number=number)
        row = store.save_pull(session, repo_id=repository.id, record=record)
        changed = fingerprint != _fingerprint(row)
        rebuild_graph(session, repo=repo, repo_id=repository.id)
        keys_after = store.series_keys_of(session, repo_id=repository.id, number=number)
        related: set[int] = {number}
        for series in store.list_series(session, repo_id=repository.id):
            if series.key in keys_after or series.key in keys_before:
                related.update(series.order)
        approved = trusted and store.add_approval(
            session,
            repo_id=repository.id,
            pr_number=number,
            sha=record.head_sha,
            vetter=record.author,
            kind="trusted",
        )
    return SyncOutcome(
        repo=repo,
        number=number,
        changed=changed or approved or keys_before != keys_after,
        series_keys=tuple(SeriesKey(k) for k in sorted(set(keys_before) | set(keys_after))),
        auto_approved=approved,
        head_sha=record.head_sha,
        is_open=record.is_open,
        related=tuple(PrNumber(n) for n in sorted(related)),
    )


def fetch_pull(client: GitHubPort, repo: RepoName, number: PrNumber) -> PrRecord:
    """The PR with its commits and comments (what the graph and the trustee rule read)."""
    record: PrRecord = client.get_pull(repo, number)
    commits = tuple(client.list_pull_commits(repo, number))
    comments = tuple(client.list_issue_comments(repo, number))
    return dataclasses.replace(record, commits=commits, comments=comments)


def rebuild_graph(session: Session, *, repo: str, repo_id: int) -> SeriesGraph:
    """Rebuild the repository's graph from every stored PR and store edges, series, and who
    supersedes whom."""
    records = [store.pr_record(row) for row in store.list_pulls(session, repo_id=repo_id)]
    overrides = overrides_store.list_overrides(session, repo_id=repo_id)
    graph = build_series_graph(records, repo=repo, overrides=overrides)
    store.replace_graph(
        session,
        repo_id=repo_id,
        edges=[(edge.child, edge.parent, edge.source) for edge in graph.edges],
        series=series_data(graph),
        edge_texts={(e.child, e.parent, e.source): (e.text, e.origin) for e in graph.edges},
    )
    store.set_superseded(
        session, repo_id=repo_id, superseded={int(k): int(v) for k, v in graph.superseded.items()}
    )
    return graph


def series_data(graph: SeriesGraph) -> list[store.SeriesData]:
    """What is stored for each series: its order, members and the problems naming a member.

    Problems are matched through the PRs they name (linear), not series x problems."""
    naming: dict[int, list[int]] = defaultdict(list)  # PR -> indexes of problems naming it
    for index, problem in enumerate(graph.problems):
        for number in dict.fromkeys(problem.prs):
            naming[number].append(index)
    found = []
    for info in graph.series:
        indexes = sorted({index for number in info.prs for index in naming.get(number, ())})
        problems = tuple(
            {"kind": p.kind, "prs": list(p.prs), "detail": p.detail}
            for p in (graph.problems[index] for index in indexes)
        )
        found.append(
            store.SeriesData(
                key=info.key,
                order=tuple(info.order),
                tracking_issue=info.tracking_issue,
                root_pr=info.root,
                problems=problems,
                prs=tuple(info.prs),
            )
        )
    return found


def _fingerprint(row: PullRequest | None) -> tuple[Any, ...] | None:
    return None if row is None else tuple(getattr(row, name) for name in _RELEVANT)


def _is_trusted(client: GitHubPort, settings: Settings, record: PrRecord) -> bool:
    vetting = settings.vetting
    authors: Sequence[str | None] = [commit.author for commit in record.commits]
    mine = record.author.lower()
    if not authors or any(a is None or a.lower() != mine for a in authors):
        return False  # decided without asking GitHub about org membership
    configured = mine in {name.lower() for name in vetting.trusted_authors}
    org_member = not configured and any(
        client.is_org_member(org, record.author) for org in vetting.trusted_orgs
    )
    return is_trusted_author(
        record.author,
        trusted_authors=vetting.trusted_authors,
        org_member=org_member,
        commit_authors=authors,
    )


# -- the task ---------------------------------------------------------------------------------


def integrations_after_sync(outcome: SyncOutcome, reason: str) -> list[Integrate]:
    """The integrations a changed PR asks for: each series it is (or was) in, or the PR alone
    while it is open and in no series (under the key ``pr-#N``)."""
    keys: tuple[SeriesKey | None, ...] = outcome.series_keys
    if not keys:
        keys = (None,) if outcome.is_open else ()
    return [Integrate(outcome.repo, key, outcome.number, reason) for key in keys]


def handle_sync_pull(ctx: ServiceContext, task: SyncPull) -> None:
    repo, number = task.repo, task.number
    outcome = sync_pull_request(
        ctx.engine, ctx.services.github(), ctx.settings, repo=repo, number=number
    )
    interval = ctx.settings.worker.reconcile_interval_s
    # The periodic repair of every tracked repository, unless a round is already queued.
    ctx.enqueue_task(Reconcile(None), delay_s=interval, unless_open=True)
    for landing_id in _landings_to_wake(ctx, repo, number):
        ctx.enqueue_task(Land(repo, landing_id))  # now, not at its next recheck
    if not outcome.changed:
        log.info("sync %s#%d: nothing an integration depends on changed", repo, number)
        return
    reason = f"#{number} changed ({task.action or 'sync'})"
    if outcome.auto_approved:
        reason = f"#{number} at {outcome.head_sha[:7]} is by a trusted author"
    for integration in integrations_after_sync(outcome, reason):
        ctx.enqueue_task(integration)
    # The PR's own report and those that show it as a parent or child.
    ctx.enqueue_task(Report.of(repo, outcome.related))


def _landings_to_wake(ctx: ServiceContext, repo: RepoName, number: int) -> list[int]:
    """The active landings that hold PR ``number`` still to merge while GitHub now shows it
    merged (its merge queue merged it), closed, or at another head than the tested one: each
    looks at once (landed, or stopped with its account) rather than at its next recheck. Read
    from the PR as synced, not from the task's action: a pending sync of one PR takes the
    latest request's action (a comment's after the close)."""
    with session_scope(ctx.engine, immediate=False) as session:
        stored = store.get_repository(session, full_name=repo)
        if stored is None or stored.id is None:
            return []
        pull = store.get_pull(session, repo_id=stored.id, number=number)
        if pull is None:
            return []
        found = []
        for row in landing_store.active_landings_of_repo(session, repo_id=stored.id):
            for entry in landing_store.entries_of(row):
                moved = pull.state != "open" or pull.head_sha != entry.head_sha
                if entry.number == number and entry.state == "pending" and moved:
                    assert row.id is not None
                    found.append(row.id)
        return found


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(SyncPull, handle_sync_pull)
