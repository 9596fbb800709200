"""When a vetter's approval of one head carries to the PR's next head (issue 24 point 5).

``/ok to test <sha>`` approves one commit. A head that changes only by a restack, a rebase or a
retarget that leaves the PR's *own patch* identical keeps the approval: the new head is marked
approved with ``carried_from`` naming the approved one, and the report says "approval of
`abc1234` carried: same patch". Anything else needs a new ``/ok to test``.

**A PR's own commits.** For the new head: the commits reachable from it and from none of the
trusted tips, that is the default branch's tip and the current heads of the PR's live
ancestors (its stack) that are approved at that head. An unapproved ancestor's commits count as
the PR's own: the carried approval is stored for the head's SHA, and must not cover code nobody
approved if the dependency is later dropped. For the approved head: the same, with the earlier
heads of the PRs it depends or depended on too (a parent amended or squash-merged since; leaving
more out on the approved side only shortens the list the new head must match, and every commit
left in it was in the approved head, which the vetter approved whole).
Merge commits are not patches: a merge whose tree is exactly git's automatic merge of its
parents (a merge from the parent or from main) adds nothing and is skipped; any other merge (a
resolved conflict, an "evil" merge with changes of its own) makes the own patch unknown.

**The same patch.** The two lists have the same length and, pairwise: the same ``git patch-id
--verbatim`` (whitespace kept: it is code in Python), the same author (name and email), and the
new commit's tree is exactly what cherry-picking the approved commit onto the new commit's
parent writes (so a hunk cannot move to another place with the same context, and binary files
and modes, which a patch-id does not see, are compared too). An empty list never carries.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from stackbot.domain.vetting import short

MAX_OWN_COMMITS = 250  # GitHub lists at most 250 commits of a PR; more is not carried


@dataclass(frozen=True)
class OwnCommit:
    sha: str
    patch_id: str  # "" for a commit that changes nothing (it still counts as a commit)
    author: str  # "Name <email>"


@dataclass(frozen=True)
class OwnPatch:
    """A head's own commits, oldest first, or why they could not be computed."""

    commits: tuple[OwnCommit, ...] = ()
    unknown: str | None = None  # set when the own commits could not be computed


class CarryReason(Enum):
    SAME_PATCH = "same_patch"
    UNKNOWN = "unknown"  # either side's own commits could not be computed
    EMPTY = "empty"
    COUNT = "commit_count"
    PATCH = "patch"
    AUTHOR = "author"
    PLACEMENT = "placement"  # same patch-id, but not what a cherry-pick of it writes


@dataclass(frozen=True)
class CarryDecision:
    carry: bool
    reason: CarryReason
    detail: str = ""


def compare_patches(approved: OwnPatch, new: OwnPatch) -> CarryDecision:
    """Whether the own patch of the new head is the approved head's, commit by commit (the
    cherry-pick check is the caller's, pair by pair, after this says yes)."""
    for side, patch in (("approved", approved), ("new", new)):
        if patch.unknown is not None:
            return CarryDecision(False, CarryReason.UNKNOWN, f"{side} head: {patch.unknown}")
    if not approved.commits or not new.commits:
        return CarryDecision(False, CarryReason.EMPTY, "no own commits")
    if len(approved.commits) != len(new.commits):
        return CarryDecision(
            False,
            CarryReason.COUNT,
            f"{len(new.commits)} own commits, {len(approved.commits)} approved",
        )
    for old, now in zip(approved.commits, new.commits, strict=True):
        if old.patch_id != now.patch_id:
            return CarryDecision(
                False, CarryReason.PATCH, f"`{short(now.sha)}` is not `{short(old.sha)}`'s patch"
            )
        if old.author != now.author:
            return CarryDecision(
                False, CarryReason.AUTHOR, f"`{short(now.sha)}` has another author"
            )
    return CarryDecision(True, CarryReason.SAME_PATCH)


def carried_note(approved_sha: str) -> str:
    """What the report says about a carried approval."""
    return f"approval of `{short(approved_sha)}` carried: same patch"
