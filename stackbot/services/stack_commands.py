"""The ``restack_pr`` / ``port_pr`` tasks that ``/stackbot restack`` and ``/stackbot port <branch>``
queue: the git work in the repository's mirror, and the answer on the PR. Who may ask is decided
when the comment is read (:mod:`stackbot.services.commands.restack` and `.port`).

Restack: the PR's author or a vetter. The old base is the head of the merged parent the PR was
built on — named by stackbot's retarget comment on the PR, or a merged parent in the dependency
graph — when that head is in the PR's history; otherwise the merge base with the PR's base (a
plain rebase, with commits whose change is already there left out). The result is pushed to the
PR's branch (lease-protected: only if the branch is still at the restacked head) only when the
author allowed it, in the ``restack_push_authors`` setting or with ``/stackbot restack --push``
written by the author; otherwise the reply names the result.

Port: vetters. The PR's change from its merge base with its base branch is applied onto the
branch; a clean port is pushed as a new branch ``stackbot/port-<N>-<branch>`` and the reply shows
its commit message. A conflicting port is pushed to that branch as one commit holding merge-tree's
result (the conflicting files with conflict markers) and opened as a draft pull request into the
branch whose description lists the conflicts and their hunks; the reply names it.
"""

from __future__ import annotations

import logging
import re

from stackbot.adapters.git import GitMirror, PushUpdate
from stackbot.adapters.git_maintenance import shared_use
from stackbot.adapters.git_replay import read_commit, short_sha, write_commit
from stackbot.adapters.github.port import GitHubPort
from stackbot.db import github_store as store
from stackbot.db.engine import session_scope
from stackbot.domain.port import PortResult, draft_port_body, draft_port_message, port_reply
from stackbot.domain.records import PrRecord
from stackbot.domain.restack import restack_reply
from stackbot.domain.retarget import RETARGET_MARKER
from stackbot.domain.tasks import PortPr, RestackPr, SyncPull
from stackbot.domain.types import PrNumber, RepoName, Sha, TreeSha
from stackbot.services.port import PortRequest, port
from stackbot.services.resources import ServiceContext
from stackbot.services.restack import COMMITTER, RestackRequest, restack
from stackbot.taskqueue import TaskRegistry

log = logging.getLogger(__name__)
_RETARGETED = re.compile(re.escape(RETARGET_MARKER).replace(r"\{parent\}", r"(\d+)"))


def _mirror(ctx: ServiceContext, client: GitHubPort, repo: RepoName) -> GitMirror:
    with session_scope(ctx.engine) as session:
        repository = store.get_repository(session, full_name=repo)
        clone_url = repository.clone_url if repository is not None else None
    settings = ctx.settings
    return GitMirror.open_or_clone(
        clone_url or client.clone_url(repo),
        settings.mirrors_dir,
        timeout=settings.git_fetch_timeout_s,
    )


def _parents(
    ctx: ServiceContext, client: GitHubPort, repo: RepoName, number: PrNumber
) -> list[PrNumber]:
    """Merged-parent candidates: from stackbot's retarget comments, then the graph's edges."""
    found: list[PrNumber] = []
    for comment in client.list_issue_comments(repo, number):
        match = _RETARGETED.match(comment.body)
        if match:
            found.append(PrNumber(int(match.group(1))))
    with session_scope(ctx.engine) as session:
        repository = store.get_repository(session, full_name=repo)
        if repository is not None and repository.id is not None:
            for edge in store.list_edges(session, repo_id=repository.id):
                if edge.child == number and edge.parent not in found:
                    found.append(PrNumber(edge.parent))
    return found


def handle_restack_pr(ctx: ServiceContext, task: RestackPr) -> None:
    client = ctx.services.github()
    pr = client.get_pull(task.repo, task.number)
    if not pr.is_open:
        return
    mirror = _mirror(ctx, client, task.repo)
    parents = [client.get_pull(task.repo, n) for n in _parents(ctx, client, task.repo, task.number)]
    merged = [p for p in parents if p.merged and p.head_sha]
    mirror.fetch(
        [f"refs/heads/{pr.base_ref}", f"refs/pull/{task.number}/head"]
        + [f"refs/pull/{p.number}/head" for p in merged]
    )
    head = mirror.rev_parse(f"refs/pull/{task.number}/head")
    base = mirror.rev_parse(f"refs/heads/{pr.base_ref}")
    old_base, note = _old_base(mirror, head, base, merged)
    # Its merges write objects a concurrent repack must not drop.
    with shared_use(mirror.git_dir, wait_s=ctx.settings.maintenance.lock_wait_s):
        result = restack(
            mirror,
            RestackRequest(
                PrNumber(task.number), head, old_base, base, ctx.settings.generated_files
            ),
            allowlist=ctx.services.allowlist(mirror),
        )
    pushed_to = None
    allowed = task.push or pr.author.lower() in {
        a.lower() for a in ctx.settings.restack_push_authors
    }
    same_repo = pr.head_repo in (None, task.repo)
    if result.clean and result.ref_name and result.new_head != head and allowed and same_repo:
        mirror.push("origin", [PushUpdate(result.ref_name, pr.head_ref, Sha(head))])
        pushed_to = pr.head_ref
        ctx.enqueue_task(SyncPull(task.repo, task.number, "restacked"))
    if not ctx.state.get("replied"):
        reply = restack_reply(result, base_ref=pr.base_ref, pushed_to=pushed_to, note=note)
        client.create_comment(task.repo, task.number, reply)
        ctx.save_state({"replied": True})


def _old_base(mirror: GitMirror, head: Sha, base: Sha, merged: list[PrRecord]) -> tuple[Sha, str]:
    for parent in merged:
        old = Sha(parent.head_sha)
        if mirror.try_rev_parse(old) and mirror.is_ancestor(old, head):
            return old, f"the last head of #{parent.number}, merged"
    fork = mirror.merge_base(head, base) or base
    return fork, "where this branch left its base"


def handle_port_pr(ctx: ServiceContext, task: PortPr) -> None:
    client = ctx.services.github()
    pr = client.get_pull(task.repo, task.number)
    mirror = _mirror(ctx, client, task.repo)
    mirror.fetch(
        [f"refs/heads/{pr.base_ref}", f"refs/heads/{task.branch}", f"refs/pull/{task.number}/head"]
    )
    head = mirror.rev_parse(f"refs/pull/{task.number}/head")
    upstream = mirror.merge_base(head, mirror.rev_parse(f"refs/heads/{pr.base_ref}")) or head
    with shared_use(mirror.git_dir, wait_s=ctx.settings.maintenance.lock_wait_s):
        result = port(
            mirror,
            PortRequest(
                PrNumber(task.number), head, upstream, task.branch, ctx.settings.generated_files
            ),
            allowlist=ctx.services.allowlist(mirror),
        )
    pushed = None
    draft_pr: int | None = None
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", task.branch).strip("-.")
    branch = f"stackbot/port-{task.number}-{slug}"
    if result.commit and result.ref_name:
        pushed = branch
        _push_port(mirror, branch, result.commit, result.ref_name)
    elif result.conflicted_tree is not None:
        pushed = branch
        draft_pr = ctx.state.get("draft_pr")
        if draft_pr is None:
            draft_pr = _open_draft_port(client, mirror, task, branch, result)
            ctx.save_state({"draft_pr": draft_pr})
    if not ctx.state.get("replied"):
        reply = port_reply(result, pushed_branch=pushed, draft_pr=draft_pr)
        client.create_comment(task.repo, task.number, reply)
        ctx.save_state({"replied": True, "draft_pr": draft_pr})


def _push_port(mirror: GitMirror, branch: str, commit: Sha, ref_name: str) -> None:
    """Push ``commit`` to ``branch``, lease-protected by what stackbot pushed there last."""
    existing = mirror.try_rev_parse(f"refs/stackbot/pushed-port/{branch}")
    if existing != commit:
        mirror.push("origin", [PushUpdate(ref_name, branch, existing)])
        mirror.update_refs({f"refs/stackbot/pushed-port/{branch}": commit})


def _open_draft_port(
    client: GitHubPort, mirror: GitMirror, task: PortPr, branch: str, result: PortResult
) -> int:
    """Push the conflicting port (conflict markers in) to ``branch`` and open, or reuse, the
    draft pull request from it into the target branch; its number."""
    assert result.conflicted_tree is not None
    info = read_commit(mirror, result.head)
    message = draft_port_message(
        result,
        subject=info.subject,
        base_short=short_sha(mirror, result.upstream_base),
        head_short=short_sha(mirror, result.head),
    )
    stamp = max(mirror.commit_time(result.onto), mirror.commit_time(result.head))
    commit = write_commit(
        mirror,
        TreeSha(result.conflicted_tree),
        [result.onto],
        info.author,
        f"{COMMITTER} {stamp} +0000",
        message,
    )
    ref_name = f"refs/stackbot/port-draft/{branch}"
    mirror.update_refs({ref_name: commit})
    _push_port(mirror, branch, commit, ref_name)
    for pull in client.list_open_pulls(task.repo):
        if pull.head_ref == branch and pull.base_ref == task.branch:
            return pull.number
    title = f"[draft port] #{task.number} to {task.branch}: {info.subject}".strip()
    return client.create_pull(
        task.repo,
        head=branch,
        base=task.branch,
        title=title[:256],
        body=draft_port_body(result),
        draft=True,
    )


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(RestackPr, handle_restack_pr)
    registry.add_task(PortPr, handle_port_pr)
