"""Plain records of what GitHub says about pull requests.

The GitHub adapter produces these, the database stores them, and the series graph reads them.
They carry only what stackbot's decisions need.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stackbot.domain.types import PrNumber


@dataclass(frozen=True)
class NativeStack:
    """GitHub's native stacked PRs: the ``stack`` object on a PR (position 1 is the bottom)."""

    id: int | None
    number: int | None
    size: int | None
    position: int | None
    base_ref: str
    base_sha: str

    @classmethod
    def from_json(cls, data: Any) -> NativeStack | None:
        """GitHub's ``stack`` object (also how the database keeps it); None when absent."""
        if not isinstance(data, dict) or not data:
            return None
        base = data.get("base") or {}
        return cls(
            id=data.get("id"),
            number=data.get("number"),
            size=data.get("size"),
            position=data.get("position"),
            base_ref=str(base.get("ref", "")),
            base_sha=str(base.get("sha", "")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "number": self.number,
            "size": self.size,
            "position": self.position,
            "base": {"ref": self.base_ref, "sha": self.base_sha},
        }


@dataclass(frozen=True)
class CommitRecord:
    sha: str
    message: str
    parents: tuple[str, ...] = ()
    # The GitHub login of the commit's author; None when GitHub ties its email to no account.
    # The trusted-author rule (all commits theirs) reads it.
    author: str | None = None


@dataclass(frozen=True)
class CommentRecord:
    author: str
    body: str
    id: int | None = None
    kind: str = "comment"  # "comment" (an issue comment) or "review" (a review's body)
    # GitHub's author_association of the comment's author: OWNER, MEMBER and COLLABORATOR are
    # the maintainers whose dependency sentences count (series_build.MAINTAINER_ASSOCIATIONS).
    author_association: str = "NONE"


@dataclass(frozen=True)
class PrRecord:
    number: PrNumber
    title: str = ""
    author: str = ""
    state: str = "open"  # open | closed
    merged: bool = False
    draft: bool = False
    head_ref: str = ""
    head_sha: str = ""
    base_ref: str = "main"
    base_sha: str = ""
    body: str = ""
    stack: NativeStack | None = None
    commits: tuple[CommitRecord, ...] = ()
    comments: tuple[CommentRecord, ...] = field(default=())
    author_association: str = "NONE"
    head_repo: str | None = None  # "owner/name" of the fork the head lives in

    @property
    def is_open(self) -> bool:
        return self.state == "open"


@dataclass(frozen=True)
class StackMember:
    """One PR of a native stack, as the stacks API lists it (bottom first)."""

    number: PrNumber
    state: str = "open"  # open | closed
    draft: bool = False
    merged: bool = False
    head_ref: str = ""
    head_sha: str = ""


@dataclass(frozen=True)
class StackRecord:
    """A native stack (``GET /repos/{owner}/{repo}/stacks[/{number}]``)."""

    id: int
    number: int
    base_ref: str
    open: bool = True
    members: tuple[StackMember, ...] = ()

    @property
    def numbers(self) -> tuple[PrNumber, ...]:
        return tuple(m.number for m in self.members)


@dataclass(frozen=True)
class ReviewRecord:
    """One review of a PR (``APPROVED``, ``CHANGES_REQUESTED``, ``COMMENTED``, ``DISMISSED``),
    given on head ``commit_id``."""

    author: str
    state: str
    commit_id: str


@dataclass(frozen=True)
class MergeRules:
    """What a branch's protection asks of a PR before it merges (none when unprotected): these
    check or status contexts passed on its head, this many approving reviews by people with
    write access, counted on the current head only when stale approvals are dismissed."""

    required_checks: tuple[str, ...] = ()
    approvals: int = 0
    dismiss_stale_reviews: bool = False
