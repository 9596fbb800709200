"""The ``land`` task: a landing waits for its tree to be tested green on the current main, then
merges its PRs bottom-up, then gives its account on every PR (rules: :mod:`stackbot.domain.landing`,
words: :mod:`stackbot.domain.landing_text`).

A waiting landing looks again every ``settings.landing.recheck_s`` seconds (its own task, queued
with a delay): when main moved or a head changed since it last asked, it asks for the series to
be integrated (the integration reuses every result of an identical tree). Merging is done once
even when the task is redone: each merged PR is written to the landing before the next one is
touched, and a PR GitHub already shows merged is not merged again. A cancel is read before each
merge. Before each merge main must be where the tested tree was made, or where the landing's
own last merge left it: when someone else moved it half-way, the landing goes back to waiting
for the rest (integrated and tested on the new main, an identical tree reusing every result)
instead of leaving an untested tree on main. Nothing here pushes to a contributor's branch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stackbot.adapters.github.port import GitHubPort
from stackbot.adapters.github_errors import GitHubRejected
from stackbot.db import dashboard_store, github_store, landing_store
from stackbot.db.engine import session_scope
from stackbot.domain.landing import (
    LandingEntry,
    LandingState,
    TreeEvidence,
    approvers,
    blockers,
    mark,
    refusal_note,
)
from stackbot.domain.landing_text import LANDING_MARKER, LandingView, landing_comment
from stackbot.domain.records import PrRecord
from stackbot.domain.tasks import Integrate, Land
from stackbot.domain.types import PrNumber, RepoName, SeriesKey
from stackbot.services.landing_evidence import tested_tree
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry

log = logging.getLogger(__name__)
WRITERS = frozenset({"admin", "maintain", "write"})
BLOCKED_RECHECK_FACTOR = 4  # a landing blocked on a review looks again less often


@dataclass(frozen=True)
class _Landing:
    id: int
    repo_id: int
    series_key: str
    up_to: int | None
    state: LandingState
    entries: tuple[LandingEntry, ...]
    main_sha: str | None
    merge_method: str


def handle_land(ctx: ServiceContext, task: Land) -> None:
    landing, base_ref = _load(ctx, task.landing)
    if landing is None or not landing.state.active:
        return
    client = ctx.services.github()
    if landing.state is LandingState.WAITING:
        delay = _wait_or_start(ctx, client, task, landing, base_ref)
        if delay is not None:
            publish(ctx, client, task.repo, task.landing, base_ref)
            ctx.enqueue_task(task, delay_s=delay)
            return
    publish(ctx, client, task.repo, task.landing, base_ref)
    _merge_all(ctx, client, task.repo, task.landing, base_ref)
    publish(ctx, client, task.repo, task.landing, base_ref)
    after, _ = _load(ctx, task.landing)
    if after is not None and after.state is LandingState.WAITING:  # main moved under it
        ctx.enqueue_task(task)


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(Land, handle_land)


# -- waiting --------------------------------------------------------------------------------


def _wait_or_start(
    ctx: ServiceContext, client: GitHubPort, task: Land, landing: _Landing, base_ref: str
) -> float | None:
    """Check what the landing waits for; None when it may merge now (state set to merging),
    else the delay before it looks again (or it stopped: nothing to wait for, None is not
    returned then but the state is no longer active)."""
    recheck = ctx.settings.landing.recheck_s
    # What it merged already stays merged (main moved under it half-way): the rest waits.
    pending = [e for e in landing.entries if e.state == "pending"]
    pulls = {e.number: client.get_pull(task.repo, PrNumber(e.number)) for e in pending}
    gone = [n for n, p in pulls.items() if not p.is_open]
    if gone:
        why = ", ".join(f"#{n} was {'merged' if pulls[n].merged else 'closed'}" for n in gone)
        _stop(ctx, landing.id, f"{why} outside the landing; `/stackbot land` again")
        return None
    heads = {n: p.head_sha for n, p in pulls.items()}
    main_sha = client.branch_sha(task.repo, base_ref)
    entries = [
        LandingEntry(e.number, heads[e.number]) if e.state == "pending" else e
        for e in landing.entries
    ]
    numbers = [e.number for e in pending]
    # Once its first PRs merged, the rest may be a series of another name (one named after
    # its root PR): the evidence and the integration are asked of the series it is now.
    series_key = _series_now(ctx, landing, numbers)
    evidence = tested_tree(
        ctx.engine,
        repo_id=landing.repo_id,
        series_key=series_key,
        numbers=numbers,
        heads=heads,
        main_sha=main_sha,
        whole_series=landing.up_to is None,
    )
    if evidence.state == "failed":
        _stop(ctx, landing.id, f"the tree to land was not tested green: {evidence.detail}")
        return None
    if evidence.state != "green":
        asked_before = landing.main_sha == main_sha and list(landing.entries) == entries
        if not asked_before:
            ctx.enqueue_task(Integrate(task.repo, SeriesKey(series_key), None, reason="landing"))
        _save(
            ctx,
            landing.id,
            entries=entries,
            main_sha=main_sha,
            waiting_for=_waiting(evidence, main_sha, base_ref),
            series_key=series_key,
        )
        return recheck
    needs = _protection_needs(client, task.repo, base_ref, pulls)
    if needs:
        _save(ctx, landing.id, entries=entries, main_sha=main_sha, waiting_for=needs)
        return recheck * BLOCKED_RECHECK_FACTOR
    _save(
        ctx,
        landing.id,
        state=LandingState.MERGING,
        entries=entries,
        main_sha=main_sha,
        waiting_for=None,
        tested_run_id=evidence.run_id,
        tested_tree=evidence.tree,
    )
    return None


def _series_now(ctx: ServiceContext, landing: _Landing, numbers: Sequence[int]) -> str:
    """The series key the landing's first pending PR is in now (the landing's own when it is
    still one of them)."""
    if not numbers:
        return landing.series_key
    with session_scope(ctx.engine, immediate=False) as session:
        keys = github_store.series_keys_of(session, repo_id=landing.repo_id, number=numbers[0])
    return landing.series_key if landing.series_key in keys or not keys else keys[0]


def _waiting(evidence: TreeEvidence, main_sha: str, base_ref: str) -> str:
    return f"the tree to land to be tested on `{base_ref}` at `{main_sha[:10]}`: {evidence.detail}"


def _protection_needs(
    client: GitHubPort, repo: RepoName, base_ref: str, pulls: Mapping[int, PrRecord]
) -> str | None:
    """``blocked: needs …`` for each PR branch protection would refuse, or None."""
    rules = client.merge_rules(repo, base_ref)
    if not rules.required_checks and not rules.approvals:
        return None
    found: list[str] = []
    for number, pull in pulls.items():
        approving = approvers(
            client.list_reviews(repo, PrNumber(number)),
            author=pull.author,
            head_sha=pull.head_sha,
            rules=rules,
        )
        writers = sum(
            1 for login in approving if client.collaborator_permission(repo, login) in WRITERS
        )
        checks = client.check_outcomes(repo, pull.head_sha) if rules.required_checks else {}
        needs = blockers(rules=rules, approving_writers=writers, checks=checks)
        if needs:
            found.append(f"#{number} is blocked: needs {'; '.join(needs)}")
    return "; ".join(found) if found else None


# -- merging --------------------------------------------------------------------------------


def _merge_all(
    ctx: ServiceContext, client: GitHubPort, repo: RepoName, landing_id: int, base_ref: str
) -> None:
    while True:
        landing, _ = _load(ctx, landing_id)
        if landing is None or landing.state is not LandingState.MERGING:
            return  # cancelled (or done) between two merges
        pending = [e for e in landing.entries if e.state == "pending"]
        if not pending:
            _finish(ctx, client, repo, landing, base_ref)
            return
        if not _merge_one(ctx, client, repo, landing, pending[0], base_ref):
            return


def _merge_one(
    ctx: ServiceContext,
    client: GitHubPort,
    repo: RepoName,
    landing: _Landing,
    entry: LandingEntry,
    base_ref: str,
) -> bool:
    number = PrNumber(entry.number)
    pull = client.get_pull(repo, number)
    if pull.merged:  # an earlier attempt's merge, answered or not
        _save(ctx, landing.id, entries=mark(landing.entries, entry.number, state="merged"))
        return True
    if pull.head_sha != entry.head_sha:
        _refused(ctx, landing, entry, "a new push: its head is no longer the tested one")
        return False
    # main must be where the tested tree was made (or where this landing's last merge left
    # it): merging onto a main moved by someone else would leave an untested tree on it.
    # (main_sha is where its tree was last tested: after a wait, that is after its merges)
    merged = [e.merge_sha for e in landing.entries if e.state == "merged" and e.merge_sha]
    expected = {sha for sha in (landing.main_sha, *merged[-1:]) if sha}
    tip = client.branch_sha(repo, base_ref) if expected else None
    if tip is not None and tip not in expected:
        # Back to waiting: the rest is integrated and tested on the new main (an identical
        # tree reuses every result), then merges; what merged stays merged.
        _save(
            ctx,
            landing.id,
            state=LandingState.WAITING,
            waiting_for=(
                f"the rest to be tested on `{base_ref}` at `{tip[:10]}`: `{base_ref}` moved "
                "while it merged (not by this landing)"
            ),
        )
        return False
    _retarget_children(client, repo, pull)
    try:
        tip = client.merge_pull(repo, number, sha=entry.head_sha, method=landing.merge_method)
    except GitHubRejected as refused:
        if client.get_pull(repo, number).merged:
            _save(ctx, landing.id, entries=mark(landing.entries, entry.number, state="merged"))
            return True
        _refused(ctx, landing, entry, refusal_note(refused.status, refused.detail))
        return False
    log.info("landing %s merged #%s at %s as %s", landing.id, number, entry.head_sha[:12], tip[:12])
    _save(
        ctx,
        landing.id,
        entries=mark(landing.entries, entry.number, state="merged", merge_sha=tip),
    )
    return True


def _retarget_children(client: GitHubPort, repo: RepoName, parent: PrRecord) -> None:
    """Move every open PR based on ``parent``'s head branch onto ``parent``'s base before it
    merges: GitHub closes a PR whose base branch is deleted, losing its reviews."""
    for pull in client.list_open_pulls(repo):
        if pull.base_ref == parent.head_ref and pull.number != parent.number:
            client.update_pull_base(repo, pull.number, parent.base_ref)


def _refused(ctx: ServiceContext, landing: _Landing, entry: LandingEntry, note: str) -> None:
    entries = [
        e
        if e.state == "merged"
        else LandingEntry(
            e.number,
            e.head_sha,
            "not merged",
            None,
            note if e.number == entry.number else f"not reached: #{entry.number} did not merge",
        )
        for e in landing.entries
    ]
    _save(
        ctx,
        landing.id,
        state=LandingState.STOPPED,
        entries=entries,
        reason=f"#{entry.number} did not merge: {note}",
    )


def _finish(
    ctx: ServiceContext, client: GitHubPort, repo: RepoName, landing: _Landing, base_ref: str
) -> None:
    landed = client.commit_tree(repo, client.branch_sha(repo, base_ref))
    _save(ctx, landing.id, state=LandingState.LANDED, landed_tree=landed)


def _stop(ctx: ServiceContext, landing_id: int, reason: str) -> None:
    landing, _ = _load(ctx, landing_id)
    if landing is None:
        return
    entries = [
        e if e.state == "merged" else LandingEntry(e.number, e.head_sha, "not merged")
        for e in landing.entries
    ]
    _save(
        ctx,
        landing_id,
        state=LandingState.STOPPED,
        entries=entries,
        reason=reason,
        waiting_for=None,
    )


# -- the store and the comments ---------------------------------------------------------------


def _load(ctx: ServiceContext, landing_id: int) -> tuple[_Landing | None, str]:
    with session_scope(ctx.engine, immediate=False) as session:
        row = landing_store.get_landing(session, landing_id=landing_id)
        if row is None or row.id is None:
            return None, "main"
        repo = dashboard_store.repository_by_id(session, repo_id=row.repo_id)
        base_ref = repo.default_branch if repo is not None else "main"
        return (
            _Landing(
                row.id,
                row.repo_id,
                row.series_key,
                row.up_to,
                LandingState(row.state),
                tuple(landing_store.entries_of(row)),
                row.main_sha,
                row.merge_method,
            ),
            base_ref,
        )


def _save(
    ctx: ServiceContext,
    landing_id: int,
    *,
    state: LandingState | None = None,
    entries: Sequence[LandingEntry] | None = None,
    **fields: object,
) -> None:
    with session_scope(ctx.engine) as session:
        row = landing_store.lock_landing(session, landing_id=landing_id)
        if row is None:
            return
        if state is not None and not LandingState(row.state).active:
            return  # cancelled meanwhile: a cancel is final
        landing_store.save_landing(session, row, state=state, entries=entries, **fields)


def view_of(ctx: ServiceContext, landing_id: int, base_ref: str) -> LandingView | None:
    with session_scope(ctx.engine, immediate=False) as session:
        row = landing_store.get_landing(session, landing_id=landing_id)
        if row is None or row.id is None:
            return None
        return landing_store.landing_view(row, base_ref)


def publish(
    ctx: ServiceContext, client: GitHubPort, repo: RepoName, landing_id: int, base_ref: str
) -> None:
    """Write the landing's comment on each of its PRs (edited in place when it is there)."""
    view = view_of(ctx, landing_id, base_ref)
    if view is None:
        return
    body = landing_comment(view)
    for entry in view.entries:
        number = PrNumber(entry.number)
        found = next(
            (
                c
                for c in client.list_issue_comments(repo, number)
                if c.body.startswith(LANDING_MARKER) and c.id is not None
            ),
            None,
        )
        if found is None:
            client.create_comment(repo, number, body)
        elif found.body != body:
            assert found.id is not None
            client.edit_comment(repo, int(found.id), body)
