"""Test results on an integration compared with the same test set and shape on main.

Tests are identified by pytest node id. Results are read by gpu_jobs' one reader of a job
result (:meth:`gpu_jobs.spec.JobResult.from_stored`) and arrive with the per-rank outcomes
already merged (a test passes only if it passed on every rank); a node id listed more than once
is merged again by the same order (:func:`gpu_jobs.spec.worst_outcome`), so a result read
straight from several ranks is judged as gpu_jobs judged it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpu_jobs.spec import ContractError, Counts, JobResult
from stackbot.errors import BadInput

__all__ = ["Comparison", "Counts", "TestOutcomes", "compare_with_main"]

_NOT_PASSING = frozenset({"failed", "error"})


@dataclass(frozen=True)
class TestOutcomes:
    __test__ = False  # not a pytest class

    status: str  # the job's status: passed | failed | error | timeout | ...
    counts: Counts
    tests: Mapping[str, str] = field(default_factory=dict)  # nodeid -> outcome
    per_test: bool = True  # False: only the counts were recorded, not which test did what

    @classmethod
    def of_result(cls, result: JobResult) -> TestOutcomes:
        return cls(status=result.status, counts=result.counts, tests=result.outcomes())

    @classmethod
    def from_result_json(cls, data: Mapping[str, Any]) -> TestOutcomes:
        """Read a stored gpu_jobs result (at least ``{"status", "tests": [{"nodeid",
        "outcome"}]}``; without ``counts`` the tests are counted)."""
        try:
            return cls.of_result(JobResult.from_stored(data))
        except ContractError as error:
            raise BadInput(f"the job result cannot be read: {error}") from None


@dataclass(frozen=True)
class Comparison:
    counts: Counts
    main_counts: Counts | None  # None: main has no result for this test set and shape yet
    newly_pass: tuple[str, ...] = ()  # pass here, ran on main without passing
    newly_fail: tuple[str, ...] = ()  # passed on main, fail or error here
    absent_on_main: tuple[str, ...] = ()  # run here, not on main (new tests)
    still_failing: tuple[str, ...] = ()  # fail or error on both
    failing_new: tuple[str, ...] = ()  # absent on main and failing here

    @property
    def has_main(self) -> bool:
        return self.main_counts is not None

    @property
    def failures(self) -> int:
        return self.counts.failed + self.counts.error

    @property
    def regressed(self) -> bool:
        """Whether the integration fails something main does not: a newly failing test, a new
        test that fails, more failures than main (failures without a node id, such as a crashed
        rank, show only in the counts), or any failure when main has no result to compare."""
        if self.newly_fail or self.failing_new:
            return True
        if self.main_counts is None:
            return self.failures > 0
        return self.failures > self.main_counts.failed + self.main_counts.error


def compare_with_main(integration: TestOutcomes, baseline: TestOutcomes | None) -> Comparison:
    if baseline is None:
        return Comparison(counts=integration.counts, main_counts=None)
    here, main = integration.tests, baseline.tests
    absent = sorted(nodeid for nodeid in here if nodeid not in main)
    both = sorted(nodeid for nodeid in here if nodeid in main)
    return Comparison(
        counts=integration.counts,
        main_counts=baseline.counts,
        newly_pass=tuple(n for n in both if here[n] == "passed" and main[n] != "passed"),
        newly_fail=tuple(n for n in both if here[n] in _NOT_PASSING and main[n] == "passed"),
        absent_on_main=tuple(absent),
        still_failing=tuple(n for n in both if here[n] in _NOT_PASSING and main[n] in _NOT_PASSING),
        failing_new=tuple(n for n in absent if here[n] in _NOT_PASSING),
    )
