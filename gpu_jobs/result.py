"""The job result: what a job's nodes and ranks report, as JSON (``result.json``), and the one
reader of it (:meth:`JobResult.from_json` for a node's file, :meth:`JobResult.from_stored` for
what stackbot stored), with the one order of test outcomes (:func:`worst_outcome`).

Versioned like the job spec (:mod:`gpu_jobs.spec`): ``schema_version`` "MAJOR.MINOR".
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast, get_args

from gpu_jobs import __version__
from gpu_jobs._fields import ContractError, FieldReader, choice, loads_json, parse_version

RESULT_SCHEMA_VERSION = "1.2"
_RESULT_VERSION = parse_version(RESULT_SCHEMA_VERSION, "schema_version", 1)

JobStatus = Literal["passed", "failed", "error", "timeout", "infra", "cancelled"]
# "flaky" (1.1): failed or errored, but carries a marker the test set tolerates (Megatron's
# ``flaky``, ``flaky_in_dev``): reported, never counted as a failure.
Outcome = Literal["passed", "failed", "error", "skipped", "flaky"]
# Whose error an ``error`` or ``infra`` status is: "tree" (pytest could not collect or load the
# tree's tests, or a rank raised before any result), "node" (the machine), "configuration"
# (1.2: a target ran on fewer ranks than it needs, so its failures are not judged: the shape is
# wrong, never the tree), "" when not known.
ErrorOf = Literal["", "tree", "node", "configuration"]
NodeCheck = Literal["passed", "failed", "skipped"]
JOB_STATUSES: tuple[str, ...] = get_args(JobStatus)
OUTCOMES: tuple[str, ...] = get_args(Outcome)

# Least to most severe; see worst_outcome for why failed ranks above error.
OUTCOME_SEVERITY: tuple[Outcome, ...] = ("passed", "skipped", "flaky", "error", "failed")


def outcome_severity(outcome: str) -> int:
    """The rank of ``outcome`` in :data:`OUTCOME_SEVERITY` (0: passed ... 4: failed)."""
    return OUTCOME_SEVERITY.index(cast(Outcome, outcome))


def worst_outcome(outcomes: Iterable[str]) -> Outcome:
    """The one outcome of a test reported several times: by several ranks, or twice by one rank
    (pytest writes a test that fails in its call and errors in its teardown as two entries).

    The order, least to most severe, is passed < skipped < flaky < error < failed; gpu_jobs merges a
    rank's entries and then the ranks by it, and stackbot merges a result read straight from
    several ranks by it, so a test gets the same outcome wherever it is merged.

    - skipped above passed: a test passes only if it passed on every rank; passing on some and
      being skipped on others is not that.
    - flaky between skipped and error: a tolerated failure is worth showing, but a test that
      fails untolerated anywhere is not flaky.
    - failed above error: an error says the test could not be judged (its setup or teardown
      broke, its rank crashed or never reported, which counts as an error), a failure says it
      was judged and is wrong. When one test has both, the failure is the finding and the
      error most often its consequence (a teardown tripping over what the failed call left
      behind, a rank stopped after another failed), so the failure is what the report names.
      Both count as not passing, so the order changes the word shown and the counts, never
      whether a test regressed.
    """
    found = list(outcomes)
    if not found:
        raise ValueError("worst_outcome of no outcomes")
    return OUTCOME_SEVERITY[max(outcome_severity(outcome) for outcome in found)]


@dataclass(frozen=True)
class Counts:
    """How many tests ended with each outcome (one outcome per test, merged over ranks)."""

    passed: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0
    flaky: int = 0

    @classmethod
    def of_tests(cls, tests: Mapping[str, str]) -> Counts:
        """The counts of ``nodeid -> outcome``."""
        outcomes = list(tests.values())
        return cls(*(outcomes.count(name) for name in OUTCOMES))

    @classmethod
    def from_mapping(cls, data: object) -> Counts:
        """Counts stored as ``{"passed": 3, ...}``; an absent outcome counts 0."""
        return cls.from_reader(FieldReader(data, "counts"))

    @classmethod
    def from_reader(cls, r: FieldReader) -> Counts:
        values = []
        for name in OUTCOMES:
            value = r.raw(name, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ContractError(
                    r.name(name),
                    f"result {r.name(name)} must be a non-negative integer, got {value!r}",
                )
            values.append(value)
        return cls(*values)

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.error + self.skipped + self.flaky

    def describe(self) -> str:
        """``23 passed`` / ``14 passed, 9 failed`` / ``no tests``: the words a report line uses."""
        parts = [f"{getattr(self, name)} {name}" for name in OUTCOMES if getattr(self, name)]
        return ", ".join(parts) if parts else "no tests"


@dataclass(frozen=True)
class Durations:
    setup_s: float = 0.0
    node_check_s: float = 0.0
    tests_s: float = 0.0
    total_s: float = 0.0


@dataclass(frozen=True)
class TestResult:
    """One test merged over ranks: it passed only if it passed on every rank."""

    __test__ = False  # not a pytest test class

    nodeid: str
    outcome: Outcome
    duration_s: float
    ranks: dict[int, str]  # rank -> outcome there ("missing" when the rank never reported it)
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "outcome": self.outcome,
            "duration_s": round(self.duration_s, 6),
            "ranks": {str(rank): outcome for rank, outcome in sorted(self.ranks.items())},
            "message": self.message,
        }

    @classmethod
    def from_reader(cls, r: FieldReader) -> TestResult:
        nodeid, outcome = r.raw("nodeid"), r.raw("outcome")
        if not isinstance(nodeid, str) or not nodeid:
            raise ContractError(r.name("nodeid"), f"{r.where} has no 'nodeid' string")
        if outcome not in OUTCOMES:
            raise ContractError(
                r.name("outcome"),
                f"{r.where} ({nodeid}) has outcome {outcome!r}; expected one of {OUTCOMES}",
            )
        ranks = r.text_map("ranks")
        if not all(str.isdigit(key) for key in ranks):
            raise ContractError(r.name("ranks"), "keys must be rank numbers")
        return cls(
            nodeid=nodeid,
            outcome=cast(Outcome, outcome),
            duration_s=r.number("duration_s", 0.0),
            ranks={int(key): value for key, value in ranks.items()},
            message=r.text("message", ""),
        )


@dataclass(frozen=True)
class JobResult:
    """What a job did. Log paths are relative to the job's output directory."""

    job_id: str
    status: JobStatus
    message: str = ""
    test_set: str = ""
    shape: str = ""
    commit: str | None = None
    counts: Counts = field(default_factory=Counts)
    tests: tuple[TestResult, ...] = ()
    failed_ranks: tuple[int, ...] = ()
    crashed_ranks: tuple[int, ...] = ()
    hung_ranks: tuple[int, ...] = ()
    missing_targets: tuple[str, ...] = ()
    node_check: NodeCheck = "skipped"
    durations: Durations = field(default_factory=Durations)
    nodes: tuple[str, ...] = ()
    logs: dict[str, str] = field(default_factory=dict)
    started_at: str = ""
    finished_at: str = ""
    # 1.1: the last lines of a rank's output that name what stopped it (a conftest that cannot
    # be imported, a collection error, a usage error), and whose error the status is.
    cause: str = ""
    error_of: ErrorOf = ""
    # 1.2: what the nodes ran the tests with (gpu_jobs.environment: python, torch, cuda, image),
    # part of the result's key: a result is reused only for the same environment.
    environment: dict[str, str] = field(default_factory=dict)
    runner_version: str = __version__
    schema_version: str = RESULT_SCHEMA_VERSION

    def __post_init__(self) -> None:
        choice(self.status, JOB_STATUSES, "status")
        choice(self.error_of, get_args(ErrorOf), "error_of")

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def uncounted(self) -> JobResult:
        """This result without its test outcomes. An ``infra`` result says nothing about the
        tree (the node failed, not the tests), so nothing its ranks reported is counted, even
        tests that ran before a rank was lost; their JUnit files stay listed in ``logs``."""
        return replace(self, counts=Counts(), tests=(), failed_ranks=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "job_id": self.job_id,
            "status": self.status,
            "message": self.message,
            "test_set": self.test_set,
            "shape": self.shape,
            "commit": self.commit,
            "counts": vars(self.counts).copy(),
            "tests": [test.to_dict() for test in self.tests],
            "failed_ranks": list(self.failed_ranks),
            "crashed_ranks": list(self.crashed_ranks),
            "hung_ranks": list(self.hung_ranks),
            "missing_targets": list(self.missing_targets),
            "node_check": self.node_check,
            "durations": {k: round(v, 3) for k, v in vars(self.durations).items()},
            "nodes": list(self.nodes),
            "logs": dict(self.logs),
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "cause": self.cause,
            "error_of": self.error_of,
            "environment": dict(sorted(self.environment.items())),
            "runner_version": self.runner_version,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def outcomes(self) -> dict[str, Outcome]:
        """``nodeid -> outcome``, one per test; a node id listed more than once (a result that
        lists each rank's outcome) gets the :func:`worst_outcome` of its entries."""
        return _outcomes(self.tests)

    @classmethod
    def from_dict(cls, data: object) -> JobResult:
        """A node's ``result.json``, as strict as the module docstring says."""
        return cls._read(data, stored=False)

    @classmethod
    def from_stored(cls, data: object) -> JobResult:
        """A result as stackbot keeps it in a job row: the ``to_dict()`` of a result it read, or
        an older or hand-made row holding only part of one (``status``, ``counts``, ``tests``
        of ``nodeid`` and ``outcome``). ``schema_version`` and ``job_id`` may be absent and
        unknown fields are ignored; what is present must have the contract's shape."""
        return cls._read(data, stored=True)

    @classmethod
    def _read(cls, data: object, *, stored: bool) -> JobResult:
        # The one reader of a job result. Without "counts" the counts are the tests'.
        if not isinstance(data, Mapping):
            raise ContractError(
                "<root>", f"a job result must be a JSON object, got {type(data).__name__}"
            )
        r = FieldReader(data)
        version = _RESULT_VERSION
        if not stored or r.has("schema_version"):
            version = parse_version(r.required("schema_version"), "schema_version", 1)
        status = r.raw("status")
        if not isinstance(status, str) or not status:
            raise ContractError("status", "the job result has no 'status' string")
        tests = _tests(r.raw("tests", []))
        counts_reader, durations = None, r.obj("durations")
        raw_counts = r.raw("counts")
        if raw_counts is None:
            counts = Counts.of_tests(_outcomes(tests))
        elif isinstance(raw_counts, Mapping):
            counts_reader = FieldReader(raw_counts, "counts")
            counts = Counts.from_reader(counts_reader)
        else:
            raise ContractError(
                "counts", "the job result's 'counts' must be an object of outcome -> number"
            )
        result = cls(
            job_id=r.text("job_id", "" if stored else None),
            status=cast(JobStatus, choice(status, JOB_STATUSES, "status")),
            message=r.text("message", ""),
            test_set=r.text("test_set", ""),
            shape=r.text("shape", ""),
            commit=r.opt_text("commit"),
            counts=counts,
            tests=tests,
            failed_ranks=r.integers("failed_ranks"),
            crashed_ranks=r.integers("crashed_ranks"),
            hung_ranks=r.integers("hung_ranks"),
            missing_targets=r.texts("missing_targets"),
            node_check=cast(
                NodeCheck,
                choice(r.text("node_check", "skipped"), get_args(NodeCheck), "node_check"),
            ),
            durations=Durations(
                *(
                    durations.number(k, 0.0)
                    for k in ("setup_s", "node_check_s", "tests_s", "total_s")
                )
            ),
            nodes=r.texts("nodes"),
            logs=r.text_map("logs"),
            started_at=r.text("started_at", ""),
            finished_at=r.text("finished_at", ""),
            cause=r.text("cause", ""),
            error_of=cast(ErrorOf, choice(r.text("error_of", ""), get_args(ErrorOf), "error_of")),
            environment=r.text_map("environment"),
            runner_version=r.text("runner_version", ""),
        )
        if not stored and version <= _RESULT_VERSION:
            for reader in (r, counts_reader, durations):
                if reader is not None:
                    reader.refuse_unknown()
        return result

    @classmethod
    def from_json(cls, text: str) -> JobResult:
        return cls.from_dict(loads_json(text, "job result"))


def _tests(raw: object) -> tuple[TestResult, ...]:
    if not isinstance(raw, list):
        raise ContractError(
            "tests", "the job result's 'tests' must be a list of {nodeid, outcome} objects"
        )
    tests = []
    for position, item in enumerate(raw):
        where = f"tests[{position}]"
        if not isinstance(item, Mapping):
            raise ContractError(where, f"{where} must be an object with 'nodeid' and 'outcome'")
        tests.append(TestResult.from_reader(FieldReader(item, where)))
    return tuple(tests)


def _outcomes(tests: Iterable[TestResult]) -> dict[str, Outcome]:
    merged: dict[str, Outcome] = {}
    for test in tests:
        previous = merged.get(test.nodeid)
        merged[test.nodeid] = (
            test.outcome if previous is None else worst_outcome((previous, test.outcome))
        )
    return merged
