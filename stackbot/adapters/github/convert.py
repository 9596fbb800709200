"""GitHub's JSON → stackbot's domain records. Pure functions over the raw response bodies.

Free text (titles, bodies, commit messages) comes back as every database stores it: a NUL
(which PostgreSQL's text columns refuse) is dropped, a lone surrogate becomes U+FFFD
(:func:`stackbot.domain.events.storable`)."""

from __future__ import annotations

from typing import Any

from stackbot.domain.events import storable
from stackbot.domain.records import (
    CommentRecord,
    CommitRecord,
    NativeStack,
    PrRecord,
    StackMember,
    StackRecord,
)
from stackbot.domain.types import PrNumber

GHOST = "ghost"  # GitHub's name for a deleted account


def _login(user: Any) -> str:
    return str(user["login"]) if isinstance(user, dict) and user.get("login") else GHOST


def pr_record(data: dict[str, Any]) -> PrRecord:
    head, base = data.get("head") or {}, data.get("base") or {}
    head_repo = head.get("repo")
    return PrRecord(
        number=PrNumber(int(data["number"])),
        title=storable(str(data.get("title") or "")),
        author=_login(data.get("user")),
        state=str(data.get("state", "open")),
        merged=bool(data.get("merged")) or data.get("merged_at") is not None,
        draft=bool(data.get("draft")),
        head_ref=str(head.get("ref", "")),
        head_sha=str(head.get("sha", "")),
        base_ref=str(base.get("ref", "")),
        base_sha=str(base.get("sha", "")),
        body=storable(str(data.get("body") or "")),
        stack=NativeStack.from_json(data.get("stack")),
        author_association=str(data.get("author_association") or "NONE"),
        head_repo=str(head_repo["full_name"])
        if isinstance(head_repo, dict) and head_repo.get("full_name")
        else None,
    )


def commit_record(data: dict[str, Any]) -> CommitRecord:
    commit = data.get("commit") or {}
    return CommitRecord(
        sha=str(data["sha"]),
        message=storable(str(commit.get("message", ""))),
        parents=tuple(str(p["sha"]) for p in data.get("parents") or ()),
        author=_linked_login(data.get("author")),
    )


def _linked_login(user: Any) -> str | None:
    """A commit's GitHub account (``author`` is null when its email belongs to no account)."""
    return str(user["login"]) if isinstance(user, dict) and user.get("login") else None


def comment_record(data: dict[str, Any]) -> CommentRecord:
    return CommentRecord(
        author=_login(data.get("user")),
        body=storable(str(data.get("body") or "")),
        id=int(data["id"]),
        author_association=str(data.get("author_association") or "NONE"),
        created_at=str(data.get("created_at") or ""),
        updated_at=str(data.get("updated_at") or ""),
    )


def stack_record(data: dict[str, Any]) -> StackRecord:
    members = []
    for pull in data.get("pull_requests") or ():
        head = pull.get("head") or {}
        members.append(
            StackMember(
                number=PrNumber(int(pull["number"])),
                state=str(pull.get("state", "open")),
                draft=bool(pull.get("draft")),
                merged=pull.get("merged_at") is not None,
                head_ref=str(head.get("ref", "")),
                head_sha=str(head.get("sha", "")),
            )
        )
    return StackRecord(
        id=int(data["id"]),
        number=int(data["number"]),
        base_ref=str((data.get("base") or {}).get("ref", "")),
        open=bool(data.get("open", True)),
        members=tuple(members),
    )


ROLE_NAMES = ("admin", "maintain", "write", "triage", "read")


def permission_of(data: dict[str, Any]) -> str:
    """The fine-grained role (``role_name``); the legacy ``permission`` folds maintain→write
    and triage→read, so it is only the fallback (custom roles name their base role there)."""
    role = str(data.get("role_name") or "")
    if role in ROLE_NAMES:
        return role
    legacy = str(data.get("permission") or "none")
    return legacy if legacy in ROLE_NAMES else "none"
