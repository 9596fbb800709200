"""The ``check_base`` task: ghost commits (:mod:`stackbot.services.ghosts`), and a PR based on a branch it must not be merged into (``pull-request/*``
by default, the ``protected_base_patterns`` setting) gets a failing ``stackbot/base`` check and
one comment; once its base is changed the check passes and the comment says so. Wording and
decisions: :mod:`stackbot.domain.base_guard`.

Repeatable: the comment is found by its marker and edited, never posted twice; a check is
written only when the PR is (or was) on such a base, so other PRs get no extra check.
"""

from __future__ import annotations

import logging

from stackbot.adapters import github_errors as gh
from stackbot.adapters.github.port import GitHubPort
from stackbot.domain.base_guard import (
    CHECK_NAME,
    MARKER,
    BaseVerdict,
    base_comment,
    blocked,
    cleared,
    mirrored_pr,
    protected_pattern,
    resolved_comment,
)
from stackbot.domain.records import CommentRecord, PrRecord
from stackbot.domain.tasks import CheckBase
from stackbot.domain.types import RepoName
from stackbot.services.ghosts import check_ghosts
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry

log = logging.getLogger(__name__)


def handle_check_base(ctx: ServiceContext, task: CheckBase) -> None:
    client = ctx.services.github()
    pr = client.get_pull(task.repo, task.number)
    if not pr.is_open:
        return
    comments = client.list_issue_comments(task.repo, task.number)
    said = next((c for c in comments if c.body.startswith(MARKER) and c.id is not None), None)
    _check_protected(ctx, client, task, pr, said)
    check_ghosts(ctx.settings, client, task.repo, pr, comments)


def _check_protected(
    ctx: ServiceContext,
    client: GitHubPort,
    task: CheckBase,
    pr: PrRecord,
    said: CommentRecord | None,
) -> None:
    if protected_pattern(pr.base_ref, ctx.settings.protected_base_patterns) is not None:
        target = _merge_target(client, task.repo, pr.base_ref)
        _write_check(client, task.repo, pr.head_sha, blocked(pr.base_ref, target))
        body = base_comment(pr.base_ref, target)
        if said is None:
            client.create_comment(task.repo, task.number, body)
        elif said.body != body and said.id is not None:
            client.edit_comment(task.repo, said.id, body)
        return
    if said is not None and said.id is not None and "~~" not in said.body:
        _write_check(client, task.repo, pr.head_sha, cleared(pr.base_ref))
        target = said.body.split("`", 2)[1] if "`" in said.body else pr.base_ref
        client.edit_comment(task.repo, said.id, resolved_comment(target, pr.base_ref))


def _merge_target(client: GitHubPort, repo: RepoName, base_ref: str) -> str:
    """Where the PR should merge: the base of the PR ``pull-request/N`` mirrors, else main."""
    number = mirrored_pr(base_ref)
    if number is None:
        return "main"
    try:
        mirrored = client.get_pull(repo, number)
    except gh.NotFound:
        return "main"
    return mirrored.base_ref if mirrored.base_ref and not mirrored_pr(mirrored.base_ref) else "main"


def _write_check(client: GitHubPort, repo: RepoName, sha: str, verdict: BaseVerdict) -> None:
    try:
        client.create_check_run(
            repo,
            sha,
            CHECK_NAME,
            status="completed",
            conclusion=verdict.conclusion,
            title=verdict.title,
            summary=verdict.summary,
        )
    except gh.ChecksNotPermitted:
        client.create_commit_status(
            repo,
            sha,
            state="failure" if verdict.conclusion == "failure" else "success",
            context=CHECK_NAME,
            description=verdict.title[:140],
        )


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(CheckBase, handle_check_base)
