"""Test results on an integration compared with the same test set and shape on main.

Tests are identified by pytest node id. Results arrive with the per-rank outcomes already
merged (a test passes only if it passed on every rank); :meth:`TestOutcomes.from_result_json`
merges again if a node id appears more than once, so a result read straight from several ranks
is still judged by that rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stackbot.errors import BadInput

OUTCOMES = ("passed", "failed", "error", "skipped")
# Which outcome wins when one test reports several (one per rank).
_SEVERITY = {"error": 3, "failed": 2, "skipped": 1, "passed": 0}
_NOT_PASSING = frozenset({"failed", "error"})


@dataclass(frozen=True)
class Counts:
    passed: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0

    @classmethod
    def from_mapping(cls, counts: Mapping[str, Any]) -> Counts:
        values = {}
        for name in OUTCOMES:
            value = counts.get(name, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise BadInput(
                    f"result counts.{name} must be a non-negative integer, got {value!r}"
                )
            values[name] = value
        return cls(**values)

    @classmethod
    def of_tests(cls, tests: Mapping[str, str]) -> Counts:
        outcomes = list(tests.values())
        return cls(*(outcomes.count(name) for name in OUTCOMES))

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.error + self.skipped

    def describe(self) -> str:
        """``23 passed`` / ``14 passed, 9 failed`` / ``no tests``: the words a report line uses."""
        parts = [f"{getattr(self, name)} {name}" for name in OUTCOMES if getattr(self, name)]
        return ", ".join(parts) if parts else "no tests"


@dataclass(frozen=True)
class TestOutcomes:
    __test__ = False  # not a pytest class

    status: str  # the job's status: passed | failed | error | timeout | ...
    counts: Counts
    tests: Mapping[str, str] = field(default_factory=dict)  # nodeid -> outcome

    @classmethod
    def from_result_json(cls, data: Mapping[str, Any]) -> TestOutcomes:
        """Read a gpu_jobs result (``{"status", "counts", "tests": [{"nodeid", "outcome"}]}``)."""
        if not isinstance(data, Mapping):
            raise BadInput(f"a job result must be a JSON object, got {type(data).__name__}")
        status = data.get("status")
        if not isinstance(status, str) or not status:
            raise BadInput("the job result has no 'status' string")
        tests = _merged_tests(data.get("tests", []))
        raw_counts = data.get("counts")
        if raw_counts is None:
            counts = Counts.of_tests(tests)
        elif isinstance(raw_counts, Mapping):
            counts = Counts.from_mapping(raw_counts)
        else:
            raise BadInput("the job result's 'counts' must be an object of outcome -> number")
        return cls(status=status, counts=counts, tests=tests)


def _merged_tests(raw: Any) -> dict[str, str]:
    if not isinstance(raw, list):
        raise BadInput("the job result's 'tests' must be a list of {nodeid, outcome} objects")
    merged: dict[str, str] = {}
    for position, entry in enumerate(raw):
        if not isinstance(entry, Mapping):
            raise BadInput(f"tests[{position}] must be an object with 'nodeid' and 'outcome'")
        nodeid, outcome = entry.get("nodeid"), entry.get("outcome")
        if not isinstance(nodeid, str) or not nodeid:
            raise BadInput(f"tests[{position}] has no 'nodeid' string")
        if outcome not in _SEVERITY:
            raise BadInput(
                f"tests[{position}] ({nodeid}) has outcome {outcome!r}; expected one of {OUTCOMES}"
            )
        previous = merged.get(nodeid)
        if previous is None or _SEVERITY[outcome] > _SEVERITY[previous]:
            merged[nodeid] = outcome
    return merged


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
