"""The task contract: every kind of task stackbot queues, and the payload each one carries.

A task is a row of the durable queue (:mod:`stackbot.taskqueue.queue`) with a kind and a JSON
payload. This module is the one place both are defined: :class:`TaskKind` names every kind,
and one frozen dataclass per kind says what its payload holds. Whoever queues a task builds the
dataclass (``Integrate(repo=..., ...)``); the handler receives it decoded by
:meth:`Payload.from_payload`, whose errors name the kind and the field. Both directions of the
JSON form are derived from the dataclass fields and their types (:class:`Payload`), so adding a
task kind means a member here, its payload class (fields, ``KIND``, ``dedupe_key``) in
:data:`PAYLOADS`, and its handler.

Each payload also knows its ``dedupe_key``: while a task with that key is pending, queueing
another replaces its payload instead of adding a row (the newest request wins), so a burst of
pushes to one series integrates it once.

Pure: no I/O, no imports beyond the standard library and the domain's own types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, ClassVar, Self, get_type_hints

from stackbot.domain.payload_fields import PayloadFields
from stackbot.domain.types import PrNumber, RepoName, SeriesKey, Sha
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
    TEST_ALONE = "test_alone"  # /stackbot test-alone: a PR's own stack tree tested
    LAND = "land"  # /stackbot land: a landing waits for its tested tree, then merges bottom-up
    MERGE_GROUP = "merge_group"  # GitHub's merge queue: a merge group's checks answered


NOT_STORED = {"stored": False}  # field metadata: a field kept out of the payload


@dataclass(frozen=True)
class Payload:
    """What every payload class shares: its JSON form, derived from its fields.

    :meth:`to_payload` stores each field by name (a tuple as a list), less those whose metadata
    is :data:`NOT_STORED`; :meth:`from_payload` reads each one back as the type the field
    declares (:meth:`PayloadFields.read`), a missing one taking the field's default.
    """

    KIND: ClassVar[TaskKind]

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        read = PayloadFields(cls.KIND, payload)
        return cls(**{name: read.read(name, hint, default) for name, hint, default in _schema(cls)})

    def to_payload(self) -> dict[str, Any]:
        stored = {name: getattr(self, name) for name, _, _ in _schema(type(self))}
        return {name: list(v) if isinstance(v, tuple) else v for name, v in stored.items()}

    def dedupe_key(self) -> str | None:
        """The key that collapses pending repeats (None: every task is its own); each kind's."""
        raise NotImplementedError


_SCHEMAS: dict[type[Payload], tuple[tuple[str, Any, Any], ...]] = {}


def _schema(cls: type[Payload]) -> tuple[tuple[str, Any, Any], ...]:
    """Each stored field of a payload class: its name, its type and its default (or MISSING)."""
    if cls not in _SCHEMAS:
        hints = get_type_hints(cls)
        _SCHEMAS[cls] = tuple(
            (item.name, hints[item.name], item.default)
            for item in fields(cls)
            if item.metadata.get("stored", True)
        )
    return _SCHEMAS[cls]


@dataclass(frozen=True)
class ProcessDelivery(Payload):
    """Turn the recorded webhook delivery ``delivery`` (a row id) into the work it asks for."""

    KIND: ClassVar[TaskKind] = TaskKind.PROCESS_DELIVERY
    delivery: int

    def dedupe_key(self) -> str | None:
        return None  # one task per delivery row, queued with the row


@dataclass(frozen=True)
class SyncPull(Payload):
    """Bring PR ``number`` of ``repo`` up to date; ``action`` says why (a webhook action, or
    ``reconcile``)."""

    KIND: ClassVar[TaskKind] = TaskKind.SYNC_PULL
    repo: RepoName
    number: PrNumber
    action: str | None = None

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo}:{self.number}"


@dataclass(frozen=True)
class PrCommand(Payload):
    """A comment that may hold a command: on a PR, or (to be refused) on an issue."""

    KIND: ClassVar[TaskKind] = TaskKind.PR_COMMAND
    repo: RepoName
    number: PrNumber
    comment_id: int
    author: str
    body: str = ""
    author_association: str = "NONE"
    action: str | None = None  # "created" or "edited"
    is_pull_request: bool = True
    # Of the comment: an edit is a new request. With the comment id it names the version that
    # is acted on once (acted_commands), whether the webhook or reconcile queued it.
    updated_at: str = ""

    @property
    def edited(self) -> bool:
        return self.action == "edited"

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo}:{self.comment_id}:{self.updated_at}"


@dataclass(frozen=True)
class Integrate(Payload):
    """Integrate series ``series_key`` of ``repo``, or PR ``number`` alone when it is in no
    series (``series_key`` None). ``reason`` is for the logs."""

    KIND: ClassVar[TaskKind] = TaskKind.INTEGRATE
    repo: RepoName
    series_key: SeriesKey | None
    number: PrNumber | None
    reason: str = ""
    # A landing's speculative tree (the gate): exactly these PRs, in this order, merged on the
    # base at their current heads and tested as one tree; empty: the series as planned.
    gate: tuple[PrNumber, ...] = ()

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        task = super().from_payload(payload)
        if task.series_key is None and task.number is None:
            raise BadInput(f"a {cls.KIND} task needs 'series_key' or 'number', got neither")
        return task

    def dedupe_key(self) -> str | None:
        if self.gate:
            return f"{self.KIND}:{self.repo}:gate:{'-'.join(str(n) for n in self.gate)}"
        return f"{self.KIND}:{self.repo}:{self.series_key or f'pr-#{self.number}'}"


@dataclass(frozen=True)
class PollJobs(Payload):
    """Advance every unfinished GPU job (one such task at a time)."""

    KIND: ClassVar[TaskKind] = TaskKind.POLL_JOBS

    def dedupe_key(self) -> str | None:
        return str(self.KIND)


@dataclass(frozen=True)
class BaseMoved(Payload):
    """Branch ``branch`` (``ref``) of ``repo``, which open PRs target, moved to ``sha``."""

    KIND: ClassVar[TaskKind] = TaskKind.BASE_MOVED
    repo: RepoName
    ref: str
    branch: str | None = None
    sha: Sha | None = None

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo}:{self.ref}"


_CHECK_RUN_FIELDS = ("head_sha", "check_run_id", "name", "external_id")


@dataclass(frozen=True)
class Retest(Payload):
    """New jobs for PR ``number``'s current stack run: ``test_set`` only, or the test set of
    the re-requested check run (``check_run_id``, ``external_id``), or every test set."""

    KIND: ClassVar[TaskKind] = TaskKind.RETEST
    repo: RepoName
    number: PrNumber
    test_set: str | None = None
    head_sha: Sha | None = None
    check_run_id: int | None = None
    name: str | None = None
    external_id: str | None = None

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
        # Asked for in a comment: the test set; by a check run: the run's fields.
        leave_out = _CHECK_RUN_FIELDS if self.check_run_id is None else ("test_set",)
        return {k: v for k, v in super().to_payload().items() if k not in leave_out}

    def dedupe_key(self) -> str | None:
        if self.check_run_id is not None:
            return f"{self.KIND}:{self.repo}:{self.number}:{self.check_run_id}"
        return f"{self.KIND}:{self.repo}:{self.number}:{self.test_set or '*'}"


@dataclass(frozen=True)
class Report(Payload):
    """Publish the reports of PRs ``numbers`` of ``repo`` (kept sorted and unique)."""

    KIND: ClassVar[TaskKind] = TaskKind.REPORT
    repo: RepoName
    numbers: tuple[PrNumber, ...]

    @classmethod
    def of(cls, repo: RepoName, numbers: Sequence[PrNumber]) -> Self:
        return cls(repo, tuple(sorted(set(numbers))))

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo}:" + ",".join(str(n) for n in self.numbers)


@dataclass(frozen=True)
class Reconcile(Payload):
    """Repair ``repo`` from GitHub's list of open PRs; with None, fan out to every tracked
    repository."""

    KIND: ClassVar[TaskKind] = TaskKind.RECONCILE
    repo: RepoName | None = None

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo or '*'}"


@dataclass(frozen=True)
class ConflictMatrix(Payload):
    """Compute the pairwise conflicts of series ``series_key`` of ``repo``."""

    KIND: ClassVar[TaskKind] = TaskKind.CONFLICT_MATRIX
    repo: RepoName
    series_key: SeriesKey

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo}:{self.series_key}"


@dataclass(frozen=True)
class Maintenance(Payload):
    """One maintenance round (at most one per ``[maintenance] interval_s``: the round claims
    its period, so a second task for the same period does nothing)."""

    KIND: ClassVar[TaskKind] = TaskKind.MAINTENANCE

    def dedupe_key(self) -> str | None:
        return str(self.KIND)


@dataclass(frozen=True)
class _OnePullRequest(Payload):
    """A task about PR ``number`` of ``repo`` and nothing else, one pending per PR and kind."""

    repo: RepoName
    number: PrNumber

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
class RestackPr(Payload):
    """Replay PR ``number``'s own commits onto its base, asked by ``requested_by``; ``push``:
    push the result to the PR's branch (allowed by the author)."""

    KIND: ClassVar[TaskKind] = TaskKind.RESTACK_PR
    repo: RepoName
    number: PrNumber
    requested_by: str
    push: bool = False

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo}:{self.number}"


@dataclass(frozen=True)
class PortPr(Payload):
    """Port PR ``number`` onto ``branch``, asked by the vetter ``requested_by``."""

    KIND: ClassVar[TaskKind] = TaskKind.PORT_PR
    repo: RepoName
    number: PrNumber
    branch: str
    requested_by: str

    def dedupe_key(self) -> str | None:
        return f"{self.KIND}:{self.repo}:{self.number}:{self.branch}"


@dataclass(frozen=True)
class TestAlone(_OnePullRequest):
    """Test PR ``number``'s own stack tree (main + its ancestors + itself) at its current head,
    which series-first testing otherwise leaves to the series tree."""

    __test__ = False  # not a pytest class
    KIND: ClassVar[TaskKind] = TaskKind.TEST_ALONE


@dataclass(frozen=True)
class Land(Payload):
    """Advance landing ``landing`` (a row of ``landings``): wait, merge, or give its account."""

    KIND: ClassVar[TaskKind] = TaskKind.LAND
    repo: RepoName
    landing: int

    def dedupe_key(self) -> str:
        return f"{self.KIND}:{self.repo}:{self.landing}"


@dataclass(frozen=True)
class AnswerMergeGroup(Payload):
    """A ``merge_group`` delivery: answer the group's required checks from a tested tree (or
    have its tree tested), or forget a destroyed group."""

    KIND: ClassVar[TaskKind] = TaskKind.MERGE_GROUP
    repo: RepoName
    action: str  # checks_requested | destroyed
    head_sha: str
    head_ref: str
    base_ref: str
    reason: str | None = None

    def dedupe_key(self) -> str:
        return f"{self.KIND}:{self.repo}:{self.head_sha}:{self.action}"


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
    | TestAlone
    | Land
    | AnswerMergeGroup
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
        TestAlone,
        Land,
        AnswerMergeGroup,
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
