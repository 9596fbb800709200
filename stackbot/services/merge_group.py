"""The ``merge_group`` task: GitHub's merge queue asks for the required checks on a merge group.

Results are keyed by tree: the group's head commit has a tree; when an integration run made
exactly that tree and it was tested green (:func:`~stackbot.services.landing_evidence.tree_evidence`),
the check runs stackbot gives a PR of that tree (``stackbot/tests: …``, the same names) are
set on the group's head at once, with no GPU job. Otherwise the group's PRs (the landing's PRs
up to the group's PR, or the PR alone when no landing queued it) are integrated and tested as a
gate run on the current base, and the task looks again every ``landing.recheck_s`` until a run
of that tree is decided, then publishes its outcome. A group that is gone (``destroyed``, or
its ``gh-readonly-queue`` branch no longer at the head sha) is forgotten: the waiting task stops.

In a landing, only the group of its last PR is tested when its tree is not a tested one: that
group holds every PR of the landing, and GitHub merges the groups ahead of a group that passes
(the prefixes' groups are answered only where their tree was tested already).

``destroyed`` with reason ``dequeued`` for a PR of a landing (a failed check, a push, someone
taking it out) stops that landing with an account, and takes its other PRs out of the queue:
those behind hold the dequeued PR's commits (they were retargeted onto the base), so the queue
would otherwise land them without it.
"""

from __future__ import annotations

import logging
import re

from stackbot.adapters.github.port import GitHubPort
from stackbot.adapters.github_errors import GitHubNotFound
from stackbot.db import github_store, landing_store
from stackbot.db.engine import session_scope
from stackbot.domain.landing import QUEUE_MODE, LandingEntry, LandingState, stopped_at
from stackbot.domain.tasks import AnswerMergeGroup, Integrate
from stackbot.domain.types import PrNumber, SeriesKey
from stackbot.services.landing import publish, take_out_of_queue
from stackbot.services.landing_evidence import tested_tree, tree_evidence
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry

log = logging.getLogger(__name__)
_GROUP_PR = re.compile(r"/pr-(\d+)-[0-9a-f]{40}$")


def group_pr(head_ref: str) -> int | None:
    """The PR a merge group was made for, from ``gh-readonly-queue/<base>/pr-<N>-<sha>``."""
    found = _GROUP_PR.search(head_ref)
    return int(found.group(1)) if found else None


def handle_merge_group(ctx: ServiceContext, task: AnswerMergeGroup) -> None:
    client = ctx.services.github()
    repo_id = _repo_id(ctx, task)
    if repo_id is None:
        return
    number = group_pr(task.head_ref)
    if task.action == "destroyed":
        if task.reason == "dequeued" and number is not None:
            _landing_dequeued(ctx, client, task, repo_id, number)
        return
    if not _still_there(client, task):
        log.info("merge group %s is gone: forgotten", task.head_sha[:12])
        return
    tree = client.commit_tree(task.repo, task.head_sha)
    evidence, names = tree_evidence(ctx.engine, repo_id=repo_id, tree=tree)
    if evidence.state in ("green", "failed") and names:
        conclusion = "success" if evidence.state == "green" else "failure"
        summary = (
            f"This merge group's tree `{tree[:10]}` is the tree stackbot tested in integration "
            f"run {evidence.run_id}: {evidence.detail}. No test ran again for the merge queue."
        )
        for name in names:
            client.create_check_run(
                task.repo,
                task.head_sha,
                name,
                status="completed",
                conclusion=conclusion,
                title=f"{'passed' if conclusion == 'success' else 'failed'} on the tested tree",
                summary=summary,
            )
        log.info("merge group %s answered from run %s", task.head_sha[:12], evidence.run_id)
        return
    if evidence.state == "untested" and number is not None:
        _test_group(ctx, client, task, repo_id, number)
    ctx.enqueue_task(task, delay_s=ctx.settings.landing.recheck_s)


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(AnswerMergeGroup, handle_merge_group)


def _repo_id(ctx: ServiceContext, task: AnswerMergeGroup) -> int | None:
    with session_scope(ctx.engine, immediate=False) as session:
        repo = github_store.get_repository(session, full_name=task.repo)
        return repo.id if repo is not None else None


def _still_there(client: GitHubPort, task: AnswerMergeGroup) -> bool:
    try:
        return client.branch_sha(task.repo, task.head_ref.removeprefix("refs/heads/")) == (
            task.head_sha
        )
    except GitHubNotFound:
        return False


def _queue_landing(
    ctx: ServiceContext, repo_id: int, number: int
) -> tuple[int, str, list[LandingEntry]] | None:
    """The active landing in queue mode that holds PR ``number``: id, series, entries."""
    with session_scope(ctx.engine, immediate=False) as session:
        for row in landing_store.active_landings_of_repo(session, repo_id=repo_id):
            entries = landing_store.entries_of(row)
            if row.merge_method == QUEUE_MODE and any(e.number == number for e in entries):
                assert row.id is not None
                return row.id, row.series_key, entries
    return None


def _test_group(
    ctx: ServiceContext, client: GitHubPort, task: AnswerMergeGroup, repo_id: int, number: int
) -> None:
    """Ask for the group's PRs to be integrated and tested as one tree on the current base
    (once: a gate run of these heads on this base is found the next time)."""
    found = _queue_landing(ctx, repo_id, number)
    if found is not None:
        _, series_key, entries = found
        pending = [e.number for e in entries if e.state != "merged"]
        if pending and pending[-1] != number:
            return  # a prefix's group: the landing's last group holds it and decides for it
        prs = pending
    else:
        keys = _series_of(ctx, repo_id, number)
        series_key, prs = (keys[0] if keys else str(number)), [number]
    base = task.base_ref.removeprefix("refs/heads/")
    main_sha = client.branch_sha(task.repo, base)
    heads = {n: client.get_pull(task.repo, PrNumber(n)).head_sha for n in prs}
    asked = tested_tree(
        ctx.engine,
        repo_id=repo_id,
        series_key=series_key,
        numbers=prs,
        heads=heads,
        main_sha=main_sha,
        whole_series=False,
        gate=True,
    )
    if asked.state == "untested":
        ctx.enqueue_task(
            Integrate(
                task.repo,
                SeriesKey(series_key),
                None,
                reason="merge group",
                gate=tuple(PrNumber(n) for n in prs),
            )
        )


def _series_of(ctx: ServiceContext, repo_id: int, number: int) -> list[str]:
    with session_scope(ctx.engine, immediate=False) as session:
        return github_store.series_keys_of(session, repo_id=repo_id, number=number)


def _landing_dequeued(
    ctx: ServiceContext, client: GitHubPort, task: AnswerMergeGroup, repo_id: int, number: int
) -> None:
    found = _queue_landing(ctx, repo_id, number)
    if found is None:
        return
    landing_id, _, entries = found
    pull = client.get_pull(task.repo, PrNumber(number))
    if pull.merged:
        return
    entries = take_out_of_queue(client, task.repo, entries)
    note = "taken out of GitHub's merge queue (a failed required check, a push, or by hand)"
    with session_scope(ctx.engine) as session:
        row = landing_store.lock_landing(session, landing_id=landing_id)
        if row is None or not LandingState(row.state).active:
            return
        landing_store.save_landing(
            session,
            row,
            state=LandingState.STOPPED,
            entries=stopped_at(entries, number, note),
            reason=f"#{number} did not merge: {note}",
            waiting_for=None,
        )
    publish(ctx, client, task.repo, landing_id, task.base_ref.removeprefix("refs/heads/"))
