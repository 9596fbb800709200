"""The ``/ok to test <sha>`` decision (who approves which commit) and copy-pr-bot's trustee rule.

The `/ok to test` rule (NVIDIA copy-pr-bot's): a vetter approves one commit, the PR's current
head, by its full SHA or an unambiguous prefix of at least seven hex digits. Edited comments:
copy-pr-bot acts on created comments only; stackbot also accepts an edit that names the current
head (fixing a typo in the SHA is the common case), but never replies to a refused edit, because
an edit to an old comment would otherwise draw a fresh refusal long after the fact.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from stackbot.domain.commands import OkToTest
from stackbot.domain.types import HEX_DIGITS

MIN_SHA_PREFIX = 7
SHORT = 7  # how many hex digits a reply shows


class Reason(Enum):
    ACCEPTED = "accepted"
    NOT_A_PULL_REQUEST = "not_a_pull_request"
    NOT_A_VETTER = "not_a_vetter"
    MISSING_SHA = "missing_sha"
    NOT_A_SHA = "not_a_sha"
    TOO_SHORT = "too_short"
    AMBIGUOUS = "ambiguous_sha"
    STALE = "stale_sha"
    OTHER_PR = "other_pr_sha"
    UNKNOWN = "unknown_sha"


@dataclass(frozen=True)
class VettingDecision:
    accepted: bool
    sha: str | None  # the full head SHA when accepted
    reason_code: Reason
    reply: str | None  # what to answer on the PR; None: answer nothing


def short(sha: str) -> str:
    return sha[:SHORT]


def decide_ok_to_test(
    *,
    command: OkToTest,
    pr_head_sha: str,
    commenter: str,
    commenter_is_vetter: bool,
    is_pull_request: bool,
    edited: bool,
    previous_heads: Collection[str] = (),
    other_pr_heads: Mapping[int, str] | None = None,
    pr_commits: Collection[str] = (),
) -> VettingDecision:
    """Whether ``/ok to test <sha>`` approves the PR's current head, and what to reply if not.

    ``previous_heads`` are SHAs this PR's head had before (a stale SHA names one of them),
    ``other_pr_heads`` maps other open PRs to their heads, and ``pr_commits`` are the commits the
    PR holds now; all of them count when deciding whether a prefix is ambiguous.
    """
    reason, detail = _judge(
        command=command,
        head=pr_head_sha.lower(),
        commenter_is_vetter=commenter_is_vetter,
        is_pull_request=is_pull_request,
        previous_heads=previous_heads,
        other_pr_heads=other_pr_heads or {},
        pr_commits=pr_commits,
    )
    if reason is Reason.ACCEPTED:
        return VettingDecision(True, pr_head_sha.lower(), reason, None)
    reply = None if edited else _refusal(reason, detail, command, pr_head_sha.lower(), commenter)
    return VettingDecision(False, None, reason, reply)


def _judge(
    *,
    command: OkToTest,
    head: str,
    commenter_is_vetter: bool,
    is_pull_request: bool,
    previous_heads: Collection[str],
    other_pr_heads: Mapping[int, str],
    pr_commits: Collection[str],
) -> tuple[Reason, str]:
    text = command.sha_text.lower()
    if not is_pull_request:
        return Reason.NOT_A_PULL_REQUEST, ""
    if not commenter_is_vetter:
        return Reason.NOT_A_VETTER, ""
    if not text:
        return Reason.MISSING_SHA, ""
    if not set(text) <= HEX_DIGITS or len(text) > 40:
        return Reason.NOT_A_SHA, ""
    if len(text) < MIN_SHA_PREFIX:
        return Reason.TOO_SHORT, ""
    known = {head, *(s.lower() for s in previous_heads), *(s.lower() for s in pr_commits)}
    known |= {s.lower() for s in other_pr_heads.values()}
    matches = sorted(s for s in known if s.startswith(text))
    if head.startswith(text):
        if len(matches) > 1:
            return Reason.AMBIGUOUS, ", ".join(f"`{m[: len(text) + 3]}…`" for m in matches)
        return Reason.ACCEPTED, ""
    # An older head, or a commit under the head: either way not what a push left on top.
    if any(s.lower().startswith(text) for s in (*previous_heads, *pr_commits)):
        return Reason.STALE, ""
    others = sorted(n for n, s in other_pr_heads.items() if s.lower().startswith(text))
    if others:
        return Reason.OTHER_PR, ", ".join(f"#{n}" for n in others)
    return Reason.UNKNOWN, ""


def _refusal(reason: Reason, detail: str, command: OkToTest, head: str, commenter: str) -> str:
    # Shown only after _judge found it hex digits (at most 40): never arbitrary text.
    given = f"`{command.sha_text.lower()}`"
    retry = f"comment `/ok to test {short(head)}` to test the current head."
    if reason is Reason.NOT_A_PULL_REQUEST:
        return "`/ok to test` works on pull requests only; this is an issue."
    if reason is Reason.NOT_A_VETTER:
        return (
            f"@{commenter}, only vetters (write access, or listed as vetters in stackbot's "
            "configuration) can approve test runs; a vetter needs to comment `/ok to test <sha>`."
        )
    if reason is Reason.MISSING_SHA:
        return f"`/ok to test` needs the commit to test: {retry}"
    if reason is Reason.NOT_A_SHA:
        return f"That is not a commit SHA (hex digits only); {retry}"
    if reason is Reason.TOO_SHORT:
        return f"{given} is too short: give at least {MIN_SHA_PREFIX} hex digits; {retry}"
    if reason is Reason.AMBIGUOUS:
        return (
            f"{given} matches more than one commit ({detail}); give more digits: "
            f"comment `/ok to test {head}`."
        )
    if reason is Reason.STALE:
        return f"{given} is not the head of this PR (head is `{short(head)}`); {retry}"
    if reason is Reason.OTHER_PR:
        return f"{given} is the head of {detail}, not of this PR (head is `{short(head)}`); {retry}"
    return f"{given} is not a commit of this PR (head is `{short(head)}`); {retry}"


def is_trusted_author(
    author: str,
    *,
    trusted_authors: Collection[str],
    org_member: bool,
    commit_authors: Sequence[str | None],
) -> bool:
    """copy-pr-bot's trustee rule: a configured trustee or org member whose PR holds only commits
    they authored. A commit GitHub cannot tie to an account (``None``) is not theirs."""
    me = author.lower()
    trusted = org_member or me in {name.lower() for name in trusted_authors}
    if not trusted or not commit_authors:
        return False
    return all(name is not None and name.lower() == me for name in commit_authors)
