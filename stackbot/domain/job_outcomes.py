"""What a job's tests did: the one reader of a job row's test outcomes.

A finished job row records its tests in up to three ways: the result JSON gpu_jobs reported (as
stored), one row per test, and the counts. The report, a PR's own-test files and the test
planner all read a job through :func:`job_outcomes`, so they never disagree about one job:

1. The job row's status is the job's status. The stored result is read with it in place of
   the result's own ``status`` (a result stored without one, or with a word the contract does
   not know, is still read; what the row says happened to the job wins).
2. A result that cannot be read falls back to the per-test rows, then to the counts alone.
3. A job that has not finished, or recorded none of these, has no outcomes (None).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpu_jobs.result import JOB_STATUSES
from gpu_jobs.spec import ContractError
from stackbot.domain.comparison import Counts, TestOutcomes
from stackbot.errors import BadInput

# Every status a finished job (one with a result) can have.
FINISHED = frozenset(JOB_STATUSES)


def job_outcomes(
    status: str,
    result: Mapping[str, Any] | None,
    counts: Mapping[str, Any] | None,
    stored_tests: Callable[[], Mapping[str, str]],
) -> TestOutcomes | None:
    """What the job's tests did, from a job row's ``status``, ``result`` and ``counts`` and
    its per-test rows (``stored_tests``: node id -> outcome, read only when the result cannot
    be); None while it runs or when it recorded no test. Outcomes from the counts alone have
    ``per_test`` False: they say how many, not which."""
    if status not in FINISHED:
        return None
    if result:
        try:
            return TestOutcomes.from_result_json({**result, "status": status})
        except BadInput:
            pass  # an unreadable result: fall back to what else the job recorded
    tests = dict(stored_tests())
    if tests:
        return TestOutcomes(status, Counts.of_tests(tests), tests)
    if counts:
        try:
            return TestOutcomes(status, Counts.from_mapping(counts), {}, per_test=False)
        except ContractError:
            return None
    return None


__all__ = ["FINISHED", "job_outcomes"]
