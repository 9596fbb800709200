"""The plain view of stored state that PR reports are rendered from (see
:mod:`stackbot.domain.report`). Frozen dataclasses, no behaviour beyond small derived values."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from stackbot.domain.comparison import Comparison
from stackbot.domain.own_tests import OwnTestsView
from stackbot.domain.retries import Attempt, NotePart, retry_note

ApprovalKind = Literal["approved", "trusted", "waiting"]
CheckStatus = Literal["queued", "in_progress", "completed"]
Conclusion = Literal["success", "failure", "neutral", "cancelled", "timed_out", "action_required"]


def test_set_words(test_set: str) -> str:
    """A test set as a reader says it: ``own:8034`` (PR 8034's own test files, stackbot's
    internal name) is "#8034's own test files"; ``own`` (the tree's batched job of every PR's
    own files) is "own test files"; a configured set keeps its name."""
    if test_set == "own":
        return "own test files"
    prefix, _, number = test_set.partition(":")
    if prefix == "own" and number.isascii() and number.isdigit():
        return f"#{number}'s own test files"
    return test_set


@dataclass(frozen=True)
class PrRef:
    number: int
    title: str = ""
    state: str = "open"  # open | closed | merged
    draft: bool = False
    superseded_by: int | None = None

    def describe(self) -> str:
        words = [self.state]
        if self.draft:
            words.append("draft")
        if self.superseded_by is not None:
            words.append(f"superseded by #{self.superseded_by}")
        return f"#{self.number} ({', '.join(words)})"


@dataclass(frozen=True)
class ApprovalView:
    kind: ApprovalKind
    by: str | None = None  # the vetter, or the trusted author
    earlier_sha: str | None = None  # an approved older head, whose approval does not carry over
    carried_from: str | None = None  # the approved head whose approval carried (same patch)


@dataclass(frozen=True)
class StackView:
    series_key: str | None = None
    parents: tuple[PrRef, ...] = ()
    children: tuple[PrRef, ...] = ()
    problems: tuple[str, ...] = ()  # cycles, missing or closed parents involving this PR
    # Every PR this one depends on, directly or through others: a conflict with one of them is
    # the stack's own, with any other PR a sibling conflict (neither depends on the other).
    ancestors: tuple[int, ...] = ()


@dataclass(frozen=True)
class StepView:
    pr: int
    outcome: str  # clean | resolved | conflict | skipped
    conflicting_paths: tuple[str, ...] = ()
    conflicts_with: tuple[int, ...] = ()  # PRs merged earlier that touched those paths
    resolved_files: tuple[str, ...] = ()  # generated files regenerated instead of merged
    resolution: str | None = None
    skipped_reason: str | None = None


@dataclass(frozen=True)
class IntegrationView:
    kind: Literal["stack", "series"]
    status: str  # pending | running | clean | resolved | conflict | error
    base_ref: str
    base_sha: str = ""
    commit: str | None = None
    steps: tuple[StepView, ...] = ()
    error: str | None = None
    url: str | None = None

    @cached_property
    def step_positions(self) -> dict[int, int]:
        """Each PR's place in :attr:`steps` (its first step): a 500-PR series run's verdicts
        look a step up 1,500 times."""
        found: dict[int, int] = {}
        for index, step in enumerate(self.steps):
            found.setdefault(step.pr, index)
        return found


@dataclass(frozen=True)
class AllowlistView:
    path: str
    total_before: int | None
    total_after: int | None
    new_reads: tuple[str, ...] = ()
    stale_dropped: tuple[str, ...] = ()
    unparsed: tuple[str, ...] = ()

    @property
    def delta(self) -> int | None:
        if self.total_before is None or self.total_after is None:
            return None
        return self.total_after - self.total_before


@dataclass(frozen=True)
class ReusedFrom:
    run_id: int | None
    job_id: int


@dataclass(frozen=True)
class TestRow:
    __test__ = False  # not a pytest class

    test_set: str
    shape: str
    status: str  # the job's: queued | submitted | running | passed | failed | error | timeout | infra | cancelled
    comparison: Comparison | None = None  # None until the job has a result
    reused_from: ReusedFrom | None = None
    url: str | None = None
    error: str | None = None
    error_of: str = ""  # whose fault an error is (gpu_jobs' error_of): tree | node | configuration
    # When the row's job retries infra failures: every attempt, oldest first, the row's job last.
    attempts: tuple[Attempt, ...] = ()
    # Targets of the test set that the tested tree does not have (they ran nothing).
    missing_targets: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The row's key: ``amax-group 2x4``, ``own:8034 2x4``."""
        return f"{self.test_set} {self.shape}"

    @property
    def shown(self) -> str:
        """The row as a reader sees it: ``amax-group 2x4``, ``#8034's own test files 2x4``."""
        return f"{test_set_words(self.test_set)} {self.shape}"

    @property
    def retry_note(self) -> tuple[NotePart, ...]:
        """What the attempts before this row's job were (empty: it is the first attempt)."""
        return retry_note(self.attempts)


@dataclass(frozen=True)
class FindingView:
    """One failing test of the series run, as the test plan classed it (issue 13).

    ``failure_class``: new | pre-existing | flaky | suspect | bisecting. ``pr`` is the PR a
    ``new`` failure was attributed to; ``passes_at``/``fails_at`` are the bisection's last
    passing and first failing prefix (number of PRs of the series order), and ``passes_pr``/
    ``fails_pr`` the last PR of each prefix (None for main alone)."""

    test_set: str
    shape: str
    nodeid: str
    failure_class: str
    pr: int | None = None
    jobs: tuple[int, ...] = ()
    passes_at: int | None = None
    fails_at: int | None = None
    passes_pr: int | None = None
    fails_pr: int | None = None
    note: str | None = None
    failed_in: tuple[int, ...] = ()  # a flaky test: the job it failed in
    passed_in: tuple[int, ...] = ()  # and the rerun of the same tree it passed in
    # (job id, what it was: "series tree", "confirming rerun", "bisection: first 3 PRs", ...)
    roles: tuple[tuple[int, str], ...] = ()

    @property
    def label(self) -> str:
        return f"{self.test_set} {self.shape}"

    @property
    def shown(self) -> str:
        return f"{test_set_words(self.test_set)} {self.shape}"


@dataclass(frozen=True)
class PrReportView:
    repo: str
    pr: PrRef
    head_sha: str
    approval: ApprovalView
    stack: StackView = field(default_factory=StackView)
    stack_integration: IntegrationView | None = None
    series_integration: IntegrationView | None = None
    allowlist: AllowlistView | None = None
    tests: tuple[TestRow, ...] = ()
    tested_commit: str | None = None  # the stack integration commit the tests ran on
    main_sha: str | None = None  # the main commit the baseline ran on
    # The same tests on the series integration (every live PR of the series), when it ran them.
    series_tests: tuple[TestRow, ...] = ()
    series_tested_commit: str | None = None
    url: str | None = None  # the PR's dashboard page
    # What the test plan concluded about the series run's failing tests (issue 13).
    findings: tuple[FindingView, ...] = ()
    series_run_id: int | None = None
    # The PR's own test files on each tree that tested them (the stack's, then the series'),
    # compared with main file by file.
    own_tests: tuple[OwnTestsView, ...] = ()
    dashboard: str | None = None  # the dashboard's base URL (job links: <dashboard>/jobs/<id>)

    def row(self, test_set: str, shape: str) -> TestRow:
        for row in self.tests:
            if (row.test_set, row.shape) == (test_set, shape):
                return row
        raise KeyError(f"#{self.pr.number} has no test row {test_set} {shape}")


@dataclass(frozen=True)
class CheckRunContent:
    name: str
    status: CheckStatus
    conclusion: Conclusion | None
    title: str
    summary: str
    text: str | None = None
