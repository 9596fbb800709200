"""GitHub webhook events as typed records, and what each one asks stackbot to do.

:func:`parse_event` turns a decoded delivery body into one of the records below, checking the
fields stackbot relies on and raising :class:`BadInput` that names the first one missing or
mistyped ("pull_request.head.sha is missing"). Events stackbot does not act on, and actions of
known events it does not care about, come back as :class:`UnknownEvent` with the reason.

:func:`route_event` is the decision that follows: the tasks a parsed event leads to. Both are
pure; the intake and the worker fetch the inputs and apply the result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stackbot.domain.commands import MAX_PR_NUMBER, parse_command
from stackbot.domain.tasks import (
    AnswerMergeGroup,
    BaseMoved,
    CheckBase,
    FollowUp,
    PrCommand,
    RetargetChildren,
    Retest,
    SyncPull,
)
from stackbot.domain.types import PrNumber, RepoName, Sha
from stackbot.errors import BadInput, UnusableValue

PULL_REQUEST_ACTIONS = frozenset(
    {
        "opened",
        "edited",
        "synchronize",
        "reopened",
        "closed",
        "ready_for_review",
        "converted_to_draft",
    }
)
ISSUE_COMMENT_ACTIONS = frozenset({"created", "edited"})
CHECK_RUN_ACTIONS = frozenset({"rerequested"})
MERGE_GROUP_ACTIONS = frozenset({"checks_requested", "destroyed"})
BRANCH_PREFIX = "refs/heads/"


@dataclass(frozen=True)
class PingEvent:
    zen: str
    hook_id: int | None
    repo: RepoName | None


@dataclass(frozen=True)
class PullRequestEvent:
    action: str
    repo: RepoName
    number: PrNumber
    head_ref: str
    head_sha: Sha
    base_ref: str
    base_sha: str
    state: str
    draft: bool
    merged: bool
    author: str
    head_repo: str | None  # the fork's owner/name; None when the fork was deleted


@dataclass(frozen=True)
class IssueCommentEvent:
    action: str
    repo: RepoName
    number: PrNumber
    is_pull_request: bool
    comment_id: int
    body: str
    author: str
    author_association: str
    updated_at: str


@dataclass(frozen=True)
class PushEvent:
    repo: RepoName
    ref: str
    before: str
    after: Sha
    deleted: bool
    default_branch: str | None

    @property
    def branch(self) -> str | None:
        """The pushed branch's name; None for tags and other refs."""
        return self.ref.removeprefix(BRANCH_PREFIX) if self.ref.startswith(BRANCH_PREFIX) else None


@dataclass(frozen=True)
class CheckRunEvent:
    action: str
    repo: RepoName
    check_run_id: int
    name: str
    head_sha: Sha
    external_id: str | None
    pull_numbers: tuple[PrNumber, ...]


@dataclass(frozen=True)
class MergeGroupEvent:
    """GitHub's merge queue asks for checks on a merge group, or destroyed one (``reason``:
    merged, invalidated, dequeued)."""

    action: str
    repo: RepoName
    head_sha: Sha
    head_ref: str
    base_sha: str
    base_ref: str
    reason: str | None


@dataclass(frozen=True)
class InstallationEvent:
    action: str
    installation_id: int
    account: str | None
    repos: tuple[RepoName, ...]


@dataclass(frozen=True)
class UnknownEvent:
    """Recorded and ignored: an event or action stackbot does not act on."""

    name: str
    action: str | None
    repo: RepoName | None
    reason: str


Event = (
    PingEvent
    | PullRequestEvent
    | IssueCommentEvent
    | PushEvent
    | CheckRunEvent
    | InstallationEvent
    | MergeGroupEvent
)


# -- field access -----------------------------------------------------------------------------

# GitHub's ids are positive and fit a signed 64-bit column (BIGINT); its issue and PR numbers
# fit a 32-bit one. A signed delivery outside these is refused by name, never stored.
MAX_ID = 2**63 - 1
# What no database text column can hold (a NUL; a lone surrogate, which has no UTF-8 form).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """``text`` as every database can store it: NULs dropped, lone surrogates as U+FFFD. For
    prose (a comment's body) and for reasons recorded about a delivery, never for a name."""
    return _UNSTORABLE.sub(lambda m: "" if m.group(0) == "\x00" else "\ufffd", text)


class _Fields:
    """Typed reads from one JSON object, each error naming the full dotted path."""

    def __init__(self, data: Mapping[str, Any], path: str) -> None:
        self.data = data
        self.path = path

    def _name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def _get(self, key: str, kinds: tuple[type, ...], what: str, *, optional: bool) -> Any:
        if key not in self.data or self.data[key] is None:
            if optional:
                return None
            raise BadInput(f"{self._name(key)} is missing")
        value = self.data[key]
        # bool is an int in Python, but never a valid id or number in GitHub's payloads.
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise BadInput(f"{self._name(key)} must be {what}, got {type(value).__name__}")
        return value

    def text(self, key: str) -> str:
        """A name (login, ref, SHA): one with a character no database stores is refused (a
        name changed to fit, "bo\\0b" → "bob", would name someone else)."""
        value: str = self._get(key, (str,), "a string", optional=False)
        return self._name_text(key, value)

    def opt_text(self, key: str) -> str | None:
        value: str | None = self._get(key, (str,), "a string", optional=True)
        return None if value is None else self._name_text(key, value)

    def prose(self, key: str, *, optional: bool = False) -> str:
        """Free text (a comment's body): kept, with what no database stores taken out."""
        value: str | None = self._get(key, (str,), "a string", optional=optional)
        return storable(value or "")

    def _name_text(self, key: str, value: str) -> str:
        found = _UNSTORABLE.search(value)
        if found is not None:
            what = "a NUL" if found.group(0) == "\x00" else "a lone surrogate"
            raise UnusableValue(f"{self._name(key)} contains {what} character")
        return value

    def whole(self, key: str, *, most: int = MAX_ID) -> int:
        """A positive id (a PR or issue number: ``most`` = :data:`MAX_PR_NUMBER`)."""
        value: int = self._get(key, (int,), "an integer", optional=False)
        return self._in_range(key, value, most)

    def opt_whole(self, key: str) -> int | None:
        value: int | None = self._get(key, (int,), "an integer", optional=True)
        return None if value is None else self._in_range(key, value, MAX_ID)

    def number(self, key: str = "number") -> PrNumber:
        return PrNumber(self.whole(key, most=MAX_PR_NUMBER))

    def _in_range(self, key: str, value: int, most: int) -> int:
        if not 1 <= value <= most:
            raise UnusableValue(f"{self._name(key)} must be between 1 and {most}, got {value}")
        return value

    def flag(self, key: str) -> bool:
        value: bool | None = self._get(key, (bool,), "true or false", optional=True)
        return bool(value)

    def obj(self, key: str) -> _Fields:
        return _Fields(self._get(key, (dict,), "an object", optional=False), self._name(key))

    def opt_obj(self, key: str) -> _Fields | None:
        value = self._get(key, (dict,), "an object", optional=True)
        return None if value is None else _Fields(value, self._name(key))

    def objects(self, key: str) -> list[_Fields]:
        items: list[Any] = self._get(key, (list,), "a list", optional=True) or []
        result = []
        for index, item in enumerate(items):
            name = f"{self._name(key)}[{index}]"
            if not isinstance(item, dict):
                raise BadInput(f"{name} must be an object, got {type(item).__name__}")
            result.append(_Fields(item, name))
        return result


def _repo(fields: _Fields) -> RepoName:
    return RepoName(fields.obj("repository").text("full_name"))


def _opt_repo(fields: _Fields) -> RepoName | None:
    repository = fields.opt_obj("repository")
    return None if repository is None else RepoName(repository.text("full_name"))


# -- parsers ----------------------------------------------------------------------------------


def _ping(root: _Fields) -> PingEvent:
    return PingEvent(
        zen=root.prose("zen", optional=True),
        hook_id=root.opt_whole("hook_id"),
        repo=_opt_repo(root),
    )


def _pull_request(root: _Fields, action: str) -> PullRequestEvent:
    pr = root.obj("pull_request")
    head, base = pr.obj("head"), pr.obj("base")
    head_repo = head.opt_obj("repo")
    user = pr.opt_obj("user")
    return PullRequestEvent(
        action=action,
        repo=_repo(root),
        number=pr.number(),
        head_ref=head.text("ref"),
        head_sha=Sha(head.text("sha")),
        base_ref=base.text("ref"),
        base_sha=base.text("sha"),
        state=pr.text("state"),
        draft=pr.flag("draft"),
        merged=pr.flag("merged"),
        author=(user.opt_text("login") or "") if user else "",
        head_repo=head_repo.text("full_name") if head_repo else None,
    )


def _issue_comment(root: _Fields, action: str) -> IssueCommentEvent:
    issue, comment = root.obj("issue"), root.obj("comment")
    return IssueCommentEvent(
        action=action,
        repo=_repo(root),
        number=issue.number(),
        # GitHub marks an issue that is a pull request with a `pull_request` object.
        is_pull_request=issue.opt_obj("pull_request") is not None,
        comment_id=comment.whole("id"),
        body=comment.prose("body"),
        author=comment.obj("user").text("login"),
        author_association=comment.opt_text("author_association") or "NONE",
        updated_at=comment.opt_text("updated_at") or "",
    )


def _push(root: _Fields) -> PushEvent:
    repository = root.obj("repository")
    return PushEvent(
        repo=RepoName(repository.text("full_name")),
        ref=root.text("ref"),
        before=root.text("before"),
        after=Sha(root.text("after")),
        deleted=root.flag("deleted"),
        default_branch=repository.opt_text("default_branch"),
    )


def _check_run(root: _Fields, action: str) -> CheckRunEvent:
    run = root.obj("check_run")
    return CheckRunEvent(
        action=action,
        repo=_repo(root),
        check_run_id=run.whole("id"),
        name=run.text("name"),
        head_sha=Sha(run.text("head_sha")),
        external_id=run.opt_text("external_id"),
        pull_numbers=tuple(pr.number() for pr in run.objects("pull_requests")),
    )


def _merge_group(root: _Fields, action: str) -> MergeGroupEvent:
    group = root.obj("merge_group")
    return MergeGroupEvent(
        action=action,
        repo=_repo(root),
        head_sha=Sha(group.text("head_sha")),
        head_ref=group.text("head_ref"),
        base_sha=group.text("base_sha"),
        base_ref=group.text("base_ref"),
        reason=root.opt_text("reason"),
    )


def _installation(root: _Fields, action: str) -> InstallationEvent:
    installation = root.obj("installation")
    account = installation.opt_obj("account")
    return InstallationEvent(
        action=action,
        installation_id=installation.whole("id"),
        account=account.opt_text("login") if account else None,
        repos=tuple(RepoName(r.text("full_name")) for r in root.objects("repositories")),
    )


def parse_event(event_name: str, payload: object) -> Event | UnknownEvent:
    """The typed record of one delivery; :class:`BadInput` names a missing or mistyped field."""
    if not isinstance(payload, dict):
        raise BadInput(f"the body must be a JSON object, got {type(payload).__name__}")
    root = _Fields(payload, "")
    if event_name == "ping":
        return _ping(root)
    known = {
        "pull_request": PULL_REQUEST_ACTIONS,
        "issue_comment": ISSUE_COMMENT_ACTIONS,
        "check_run": CHECK_RUN_ACTIONS,
        "merge_group": MERGE_GROUP_ACTIONS,
        "installation": None,
        "push": None,
    }
    if event_name not in known:
        return UnknownEvent(event_name, None, _lenient_repo(payload), "stackbot ignores this event")
    if event_name == "push":
        return _push(root)
    action = root.text("action")
    actions = known[event_name]
    if actions is not None and action not in actions:
        return UnknownEvent(
            event_name, action, _lenient_repo(payload), f"stackbot ignores {event_name}.{action}"
        )
    if event_name == "pull_request":
        return _pull_request(root, action)
    if event_name == "issue_comment":
        return _issue_comment(root, action)
    if event_name == "check_run":
        return _check_run(root, action)
    if event_name == "merge_group":
        return _merge_group(root, action)
    return _installation(root, action)


def _lenient_repo(payload: Mapping[str, Any]) -> RepoName | None:
    repository = payload.get("repository")
    name = repository.get("full_name") if isinstance(repository, dict) else None
    return RepoName(name) if isinstance(name, str) else None


# -- what an event leads to -------------------------------------------------------------------


def ignore_reason(event: Event | UnknownEvent) -> str | None:
    """Why the intake records a delivery without queueing work for it (None: queue it)."""
    if isinstance(event, UnknownEvent):
        return event.reason
    if isinstance(event, PingEvent):
        return "ping: nothing to do"
    if (
        isinstance(event, IssueCommentEvent)
        and not event.is_pull_request
        and parse_command(event.body) is None
    ):
        return "comment on an issue, not on a pull request"
    if isinstance(event, PushEvent):
        if event.branch is None:
            return f"push to {event.ref}, not to a branch"
        if event.deleted:
            return f"branch {event.branch} was deleted"
    return None


def route_event(event: Event, *, base_branches: frozenset[str] = frozenset()) -> list[FollowUp]:
    """The tasks one event asks for.

    ``base_branches``: branches that open pull requests target, besides the repository's
    default branch; a push to any of them moves a base.
    """
    if isinstance(event, PullRequestEvent):
        sync = FollowUp.of(SyncPull(event.repo, event.number, event.action))
        if event.action == "closed" and event.merged:
            return [sync, FollowUp.of(RetargetChildren(event.repo, event.number))]
        if event.action in ("opened", "reopened", "edited", "synchronize"):
            return [sync, FollowUp.of(CheckBase(event.repo, event.number))]
        return [sync]
    if isinstance(event, IssueCommentEvent) and (
        event.is_pull_request or parse_command(event.body) is not None
    ):
        # A command on an issue goes on too, to be refused with one reply ("not a PR").
        command = PrCommand(
            repo=event.repo,
            number=event.number,
            comment_id=event.comment_id,
            author=event.author,
            body=event.body,
            author_association=event.author_association,
            action=event.action,
            is_pull_request=event.is_pull_request,
            updated_at=event.updated_at,
        )
        return [FollowUp.of(command)]
    if isinstance(event, PushEvent) and event.branch is not None and not event.deleted:
        bases = base_branches | ({event.default_branch} if event.default_branch else set())
        if event.branch not in bases:
            return []
        return [FollowUp.of(BaseMoved(event.repo, event.ref, event.branch, event.after))]
    if isinstance(event, MergeGroupEvent):
        group = AnswerMergeGroup(
            repo=event.repo,
            action=event.action,
            head_sha=event.head_sha,
            head_ref=event.head_ref,
            base_ref=event.base_ref,
            reason=event.reason,
        )
        return [FollowUp.of(group)]
    if isinstance(event, CheckRunEvent):
        return [
            FollowUp.of(
                Retest(
                    repo=event.repo,
                    number=number,
                    head_sha=event.head_sha,
                    check_run_id=event.check_run_id,
                    name=event.name,
                    external_id=event.external_id,
                )
            )
            for number in event.pull_numbers
        ]
    return []
