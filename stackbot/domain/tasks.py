"""The task contract: every kind of task stackbot queues, and the payload each one carries.

A task is a row of the durable queue (:mod:`stackbot.taskqueue.queue`) with a kind and a JSON
payload. This module is the one place both are defined: :class:`TaskKind` names every kind,
and one frozen dataclass per kind says what its payload holds. Whoever queues a task builds the
dataclass (``Integrate(repo=..., ...)``); the handler receives it decoded by
:meth:`from_payload`, whose errors name the kind and the field. Adding a task kind means a
member here, its payload class in :data:`PAYLOADS`, and its handler.

Each payload also knows its ``dedupe_key``: while a task with that key is pending, queueing
another replaces its payload instead of adding a row (the newest request wins), so a burst of
pushes to one series integrates it once.

Pure: no I/O, no imports beyond the standard library and the domain's own types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, ClassVar, Self

from stackbot.domain.payload_fields import PayloadFields
from stackbot.errors import BadInput


class TaskKind(StrEnum):
    """Every kind of task the service queues (the ``tasks.kind`` column holds the value)."""

    PROCESS_DELIVERY = "process_delivery"  # a recorded webhook delivery → the tasks it asks for
    SYNC_PULL = "sync_pull"  # one PR brought up to date with GitHub
    PR_COMMAND = "pr_command"  # a command in a PR comment
    INTEGRATE = "integrate"  # a series (or one PR) merged onto its base, its jobs created
    POLL_JOBS = "poll_jobs"  # GPU jobs advanced: submitted, polled, collected
    BASE_MOVED = "base_moved"  # a base branch moved: every active series re-integrated
    RETEST = "retest"  # new jobs for a PR's current stack run
    REPORT = "report"  # sticky comments and check runs published
    RECONCILE = "reconcile"  # what lost webhook deliveries missed, repaired
    CONFLICT_MATRIX = "conflict_matrix"  # pairwise conflicts of a series' PRs
    MAINTENANCE = "maintenance"  # run refs and job output expired, mirrors repacked, cache pruned
    RETARGET_CHILDREN = "retarget_children"  # a merged PR's children moved to its base
    CHECK_BASE = "check_base"  # a PR's base must not be a CI mirror branch (pull-request/*)
    RESTACK_PR = "restack_pr"  # /stackbot restack: a PR's own commits replayed onto its base
    PORT_PR = "port_pr"  # /stackbot port <branch>: a faithful port of a PR onto a branch


def _as_payload(task: Any, *, leave_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """A payload dataclass's fields by name, less ``leave_out``."""
    return {
        item.name: getattr(task, item.name) for item in fields(task) if item.name not in leave_out
    }


@dataclass(frozen=True)
class ProcessDelivery:
    """Turn the recorded webhook delivery ``delivery`` (a row id) into the work it asks for."""

    KIND: ClassVar[TaskKind] = TaskKind.PROCESS_DELIVERY
    delivery: int

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        return cls(delivery=PayloadFields(cls.KIND, payload).whole("delivery"))

    def to_payload(self) -> dict[str, Any]:
        return {"delivery": self.delivery}

    def dedupe_key(self) -> str | None:
        return None  # one task per delivery row, queued with the row


@dataclass(frozen=True)
class SyncPull:
    """Bring PR ``number`` of ``repo`` up to date; ``action`` says why (a webhook action, or
    ``reconcile``)."""

    KIND: ClassVar[TaskKind] = TaskKind.SYNC_PULL
    repo: str
    number: int
    action: str | None = None

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        fields = PayloadFields(cls.KIND, payload)
        return cls(fields.repo(), fields.pr_number(), fields.opt_text("action"))

    def to_payload(self) -> dict[str, Any]:
        return {"repo": self.repo, "number": self.number, "action": self.action}

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo}:{self.number}"


@dataclass(frozen=True)
class PrCommand:
    """A comment that may hold a command: on a PR, or (to be refused) on an issue."""

    KIND: ClassVar[TaskKind] = TaskKind.PR_COMMAND
    repo: str
    number: int
    comment_id: int
    author: str
    body: str = ""
    author_association: str = "NONE"
    action: str | None = None  # "created" or "edited"
    is_pull_request: bool = True
    updated_at: str = ""  # of the comment: an edit is a new request (dedupe key only)

    @property
    def edited(self) -> bool:
        return self.action == "edited"

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        fields = PayloadFields(cls.KIND, payload)
        return cls(
            repo=fields.repo(),
            number=fields.pr_number(),
            comment_id=fields.whole("comment_id"),
            author=fields.text("author"),
            body=fields.opt_text("body") or "",
            author_association=fields.opt_text("author_association") or "NONE",
            action=fields.opt_text("action"),
            is_pull_request=fields.flag("is_pull_request", default=True),
        )

    def to_payload(self) -> dict[str, Any]:
        return _as_payload(self, leave_out=("updated_at",))  # a dedupe key's part only

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo}:{self.comment_id}:{self.updated_at}"


@dataclass(frozen=True)
class Integrate:
    """Integrate series ``series_key`` of ``repo``, or PR ``number`` alone when it is in no
    series (``series_key`` None). ``reason`` is for the logs."""

    KIND: ClassVar[TaskKind] = TaskKind.INTEGRATE
    repo: str
    series_key: str | None
    number: int | None
    reason: str = ""

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        fields = PayloadFields(cls.KIND, payload)
        task = cls(
            repo=fields.repo(),
            series_key=fields.opt_text("series_key"),
            number=fields.opt_pr_number(),
            reason=fields.opt_text("reason") or "",
        )
        if task.series_key is None and task.number is None:
            raise BadInput(f"a {cls.KIND} task needs 'series_key' or 'number', got neither")
        return task

    def to_payload(self) -> dict[str, Any]:
        return _as_payload(self)

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo}:{self.series_key or f'pr-#{self.number}'}"


@dataclass(frozen=True)
class PollJobs:
    """Advance every unfinished GPU job (one such task at a time)."""

    KIND: ClassVar[TaskKind] = TaskKind.POLL_JOBS

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        PayloadFields(cls.KIND, payload)
        return cls()

    def to_payload(self) -> dict[str, Any]:
        return {}

    def dedupe_key(self) -> str | None:
        return str(self.KIND)


@dataclass(frozen=True)
class BaseMoved:
    """Branch ``branch`` (``ref``) of ``repo``, which open PRs target, moved to ``sha``."""

    KIND: ClassVar[TaskKind] = TaskKind.BASE_MOVED
    repo: str
    ref: str
    branch: str | None = None
    sha: str | None = None

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        fields = PayloadFields(cls.KIND, payload)
        return cls(
            repo=fields.repo(),
            ref=fields.text("ref", default=""),
            branch=fields.opt_text("branch"),
            sha=fields.opt_text("sha"),
        )

    def to_payload(self) -> dict[str, Any]:
        return {"repo": self.repo, "ref": self.ref, "branch": self.branch, "sha": self.sha}

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo}:{self.ref}"


@dataclass(frozen=True)
class Retest:
    """New jobs for PR ``number``'s current stack run: ``test_set`` only, or the test set of
    the re-requested check run (``check_run_id``, ``external_id``), or every test set."""

    KIND: ClassVar[TaskKind] = TaskKind.RETEST
    repo: str
    number: int
    test_set: str | None = None
    head_sha: str | None = None
    check_run_id: int | None = None
    name: str | None = None
    external_id: str | None = None

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        fields = PayloadFields(cls.KIND, payload)
        return cls(
            repo=fields.repo(),
            number=fields.pr_number(),
            test_set=fields.opt_text("test_set"),
            head_sha=fields.opt_text("head_sha"),
            check_run_id=fields.opt_whole("check_run_id"),
            name=fields.opt_text("name"),
            external_id=fields.opt_text("external_id"),
        )

    @property
    def test_sets(self) -> list[str] | None:
        """The one test set asked for (by name, or by the check run's ``external_id``,
        ``run/SET/SHAPE``), or None for all."""
        if self.test_set:
            return [self.test_set]
        if self.external_id is not None and self.external_id.count("/") == 2:
            return [self.external_id.split("/")[1]]
        return None

    def to_payload(self) -> dict[str, Any]:
        if self.check_run_id is None:  # asked for in a comment
            return {"repo": self.repo, "number": self.number, "test_set": self.test_set}
        return {
            "repo": self.repo,
            "number": self.number,
            "head_sha": self.head_sha,
            "check_run_id": self.check_run_id,
            "name": self.name,
            "external_id": self.external_id,
        }

    def dedupe_key(self) -> str | None:
        if self.check_run_id is not None:
            return f"{self.KIND}:{self.repo}:{self.number}:{self.check_run_id}"
        return f"{self.KIND}:{self.repo}:{self.number}:{self.test_set or '*'}"


@dataclass(frozen=True)
class Report:
    """Publish the reports of PRs ``numbers`` of ``repo`` (kept sorted and unique)."""

    KIND: ClassVar[TaskKind] = TaskKind.REPORT
    repo: str
    numbers: tuple[int, ...]

    @classmethod
    def of(cls, repo: str, numbers: Sequence[int]) -> Self:
        return cls(repo, tuple(sorted(set(numbers))))

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        fields = PayloadFields(cls.KIND, payload)
        return cls(fields.repo(), fields.pr_numbers("numbers"))

    def to_payload(self) -> dict[str, Any]:
        return {"repo": self.repo, "numbers": list(self.numbers)}

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo}:" + ",".join(str(n) for n in self.numbers)


@dataclass(frozen=True)
class Reconcile:
    """Repair ``repo`` from GitHub's list of open PRs; with None, fan out to every tracked
    repository."""

    KIND: ClassVar[TaskKind] = TaskKind.RECONCILE
    repo: str | None = None

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        return cls(PayloadFields(cls.KIND, payload).opt_repo())

    def to_payload(self) -> dict[str, Any]:
        return {"repo": self.repo}

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo or '*'}"


@dataclass(frozen=True)
class ConflictMatrix:
    """Compute the pairwise conflicts of series ``series_key`` of ``repo``."""

    KIND: ClassVar[TaskKind] = TaskKind.CONFLICT_MATRIX
    repo: str
    series_key: str

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        fields = PayloadFields(cls.KIND, payload)
        return cls(fields.repo(), fields.text("series_key"))

    def to_payload(self) -> dict[str, Any]:
        return {"repo": self.repo, "series_key": self.series_key}

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo}:{self.series_key}"


@dataclass(frozen=True)
class Maintenance:
    """One maintenance round (at most one per ``[maintenance] interval_s``: the round claims
    its period, so a second task for the same period does nothing)."""

    KIND: ClassVar[TaskKind] = TaskKind.MAINTENANCE

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        PayloadFields(cls.KIND, payload)
        return cls()

    def to_payload(self) -> dict[str, Any]:
        return {}

    def dedupe_key(self) -> str | None:
        return str(self.KIND)


@dataclass(frozen=True)
class _OnePullRequest:
    """A task about PR ``number`` of ``repo`` and nothing else, one pending per PR and kind."""

    KIND: ClassVar[TaskKind]
    repo: str
    number: int

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        fields = PayloadFields(cls.KIND, payload)
        return cls(fields.repo(), fields.pr_number())

    def to_payload(self) -> dict[str, Any]:
        return {"repo": self.repo, "number": self.number}

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo}:{self.number}"


@dataclass(frozen=True)
class RetargetChildren(_OnePullRequest):
    """PR ``number`` of ``repo`` merged: move each open child based on its head branch to its
    base before that branch is deleted (GitHub would close the child for good)."""

    KIND: ClassVar[TaskKind] = TaskKind.RETARGET_CHILDREN


@dataclass(frozen=True)
class CheckBase(_OnePullRequest):
    """Check that PR ``number`` of ``repo`` is not based on a branch it must not merge into."""

    KIND: ClassVar[TaskKind] = TaskKind.CHECK_BASE


@dataclass(frozen=True)
class RestackPr:
    """Replay PR ``number``'s own commits onto its base, asked by ``requested_by``; ``push``:
    push the result to the PR's branch (allowed by the author)."""

    KIND: ClassVar[TaskKind] = TaskKind.RESTACK_PR
    repo: str
    number: int
    requested_by: str
    push: bool = False

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        fields = PayloadFields(cls.KIND, payload)
        push = payload.get("push", False)
        if not isinstance(push, bool):
            raise BadInput(f"{cls.KIND} task needs true or false in 'push', got {push!r}")
        return cls(fields.repo(), fields.pr_number(), fields.text("requested_by"), push)

    def to_payload(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "number": self.number,
            "requested_by": self.requested_by,
            "push": self.push,
        }

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo}:{self.number}"


@dataclass(frozen=True)
class PortPr:
    """Port PR ``number`` onto ``branch``, asked by the vetter ``requested_by``."""

    KIND: ClassVar[TaskKind] = TaskKind.PORT_PR
    repo: str
    number: int
    branch: str
    requested_by: str

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        fields = PayloadFields(cls.KIND, payload)
        return cls(
            fields.repo(), fields.pr_number(), fields.text("branch"), fields.text("requested_by")
        )

    def to_payload(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "number": self.number,
            "branch": self.branch,
            "requested_by": self.requested_by,
        }

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo}:{self.number}:{self.branch}"


TaskPayload = (
    ProcessDelivery
    | SyncPull
    | PrCommand
    | Integrate
    | PollJobs
    | BaseMoved
    | Retest
    | Report
    | Reconcile
    | ConflictMatrix
    | Maintenance
    | RetargetChildren
    | CheckBase
    | RestackPr
    | PortPr
)

# Kind → payload class: one per member of TaskKind (a test holds the two together).
PAYLOADS: dict[TaskKind, type[TaskPayload]] = {
    cls.KIND: cls
    for cls in (
        ProcessDelivery,
        SyncPull,
        PrCommand,
        Integrate,
        PollJobs,
        BaseMoved,
        Retest,
        Report,
        Reconcile,
        ConflictMatrix,
        Maintenance,
        RetargetChildren,
        CheckBase,
        RestackPr,
        PortPr,
    )
}


def decode(kind: str, payload: Mapping[str, Any]) -> TaskPayload:
    """The typed payload of a stored task; :class:`BadInput` names an unknown kind or a bad
    field."""
    try:
        task_kind = TaskKind(kind)
    except ValueError:
        raise BadInput(f"{kind!r} is not a task kind stackbot knows") from None
    return PAYLOADS[task_kind].from_payload(payload)


@dataclass(frozen=True)
class FollowUp:
    """A task to queue: its kind, payload and the key that collapses repeats.

    Built from a typed payload with :meth:`of`; plugins and tests may queue kinds of their own
    by giving the three fields directly.
    """

    kind: str
    payload: dict[str, Any]
    dedupe_key: str | None
    delay_s: float = 0.0  # not claimed before this many seconds after it is written
    unless_open: bool = False  # not queued while a task of its kind is pending or running

    @classmethod
    def of(
        cls,
        task: TaskPayload,
        *,
        dedupe_key: str | None = None,
        delay_s: float = 0.0,
        unless_open: bool = False,
    ) -> FollowUp:
        return cls(
            task.KIND, task.to_payload(), dedupe_key or task.dedupe_key(), delay_s, unless_open
        )
