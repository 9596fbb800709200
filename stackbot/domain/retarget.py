"""Children of a merged PR: which ones to move to the parent's base, and what to tell them.

GitHub closes an open PR whose base branch is deleted, and it cannot be reopened while that
branch is gone (cli/cli#14223 and many like it). When a parent merges, its head branch is
usually deleted soon after (by hand or by the repository's "delete head branches" setting), so
stackbot moves each open child based on that branch to the branch the parent merged into, then
says so on the child. A child closed before stackbot could move it is listed on the dashboard
with the commands that bring it back (:func:`recovery_command`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from stackbot.domain.records import PrRecord

RETARGET_MARKER = "<!-- stackbot:retarget:{parent} -->"


def children_to_retarget(repo: str, parent: PrRecord, open_pulls: Iterable[PrRecord]) -> list[int]:
    """The open PRs based on the merged ``parent``'s head branch. A parent whose head lives in
    a fork has no children here: a branch of that name in this repository is another branch."""
    if not parent.merged or not parent.head_ref or parent.head_repo not in (None, repo):
        return []
    if parent.head_ref == parent.base_ref:
        return []
    return sorted(
        p.number
        for p in open_pulls
        if p.is_open and p.base_ref == parent.head_ref and p.number != parent.number
    )


def retarget_comment(parent: PrRecord, child: int, old_base: str) -> str:
    """What the child's author reads after stackbot moved its base."""
    marker = RETARGET_MARKER.format(parent=parent.number)
    return (
        f"{marker}\n"
        f"#{parent.number} was merged into `{parent.base_ref}`, so stackbot changed this pull "
        f"request's base from `{old_base}` to `{parent.base_ref}`: GitHub closes a pull request "
        f"for good when its base branch is deleted, and `{old_base}` can go now.\n\n"
        f"If #{parent.number} was squash- or rebase-merged, its original commits are still on "
        f"this branch and show again in this pull request's diff. To replay only this pull "
        f"request's own commits onto `{parent.base_ref}`:\n\n"
        f"```\nstackbot restack --repo <clone URL> --pr {child}=refs/pull/{child}/head "
        f"--old-base {parent.head_sha} --onto {parent.base_ref}\n```\n"
        f"(or comment `/stackbot restack`; nothing is pushed to your branch unless you allow it)."
    )


@dataclass(frozen=True)
class ClosedChild:
    """A PR closed (not merged) whose base was the head branch of a merged PR: most likely
    closed by GitHub when that branch was deleted."""

    number: int
    title: str
    base_ref: str  # the deleted branch
    parent: int
    parent_head_sha: str
    parent_base_ref: str

    def recovery_command(self) -> str:
        return recovery_command(self)


def recovery_command(child: ClosedChild) -> str:
    """Recreate the branch at the parent's last head, reopen, move the base, drop the branch."""
    return (
        f"git push origin {child.parent_head_sha}:refs/heads/{child.base_ref} && "
        f"gh pr reopen {child.number} && gh pr edit {child.number} --base {child.parent_base_ref} "
        f"&& git push origin --delete {child.base_ref}"
    )


def closed_children(repo: str, pulls: Sequence[PrRecord]) -> list[ClosedChild]:
    """The PRs among ``pulls`` (one repository's) closed because their base branch went."""
    merged_heads = {
        p.head_ref: p
        for p in pulls
        if p.merged and p.head_ref and p.head_repo in (None, repo) and p.head_ref != p.base_ref
    }
    found = []
    for pull in pulls:
        parent = merged_heads.get(pull.base_ref)
        if pull.state == "closed" and not pull.merged and parent is not None:
            found.append(
                ClosedChild(
                    pull.number,
                    pull.title,
                    pull.base_ref,
                    parent.number,
                    parent.head_sha,
                    parent.base_ref,
                )
            )
    return sorted(found, key=lambda c: c.number)
