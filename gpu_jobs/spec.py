"""The contract between stackbot and GPU nodes: a versioned job spec and job result, as JSON.

Both carry ``schema_version`` "MAJOR.MINOR". A reader refuses another major version with an
error naming the field; within its major version it refuses unknown fields (a misspelt field
must not be silently ignored) unless the document comes from a newer minor version, whose new
fields an older node may safely ignore.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from gpu_jobs import __version__
from gpu_jobs._fields import ContractError, FieldReader, parse_version

SPEC_SCHEMA_VERSION = "1.0"
RESULT_SCHEMA_VERSION = "1.0"
_SPEC_VERSION = parse_version(SPEC_SCHEMA_VERSION, "schema_version", 1)
_RESULT_VERSION = parse_version(RESULT_SCHEMA_VERSION, "schema_version", 1)

Device = Literal["auto", "cuda", "cpu"]
Backend = Literal["nccl", "gloo"]
JobStatus = Literal["passed", "failed", "error", "timeout", "infra", "cancelled"]
Outcome = Literal["passed", "failed", "error", "skipped"]
NodeCheck = Literal["passed", "failed", "skipped"]
JOB_STATUSES: tuple[str, ...] = get_args(JobStatus)
OUTCOMES: tuple[str, ...] = get_args(Outcome)

MAX_NODES = 1024
MAX_GPUS_PER_NODE = 64
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SHAPE = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$")

__all__ = ["ContractError", "Counts", "Durations", "JobResult", "JobSpec", "LauncherOptions"]
__all__ += ["OUTCOME_SEVERITY", "Shape", "TestResult", "outcome_severity", "worst_outcome"]

# Least to most severe; see worst_outcome for why failed ranks above error.
OUTCOME_SEVERITY: tuple[Outcome, ...] = ("passed", "skipped", "error", "failed")


def outcome_severity(outcome: str) -> int:
    """The rank of ``outcome`` in :data:`OUTCOME_SEVERITY` (0: passed ... 3: failed)."""
    return OUTCOME_SEVERITY.index(cast(Outcome, outcome))


def worst_outcome(outcomes: Iterable[str]) -> Outcome:
    """The one outcome of a test reported several times: by several ranks, or twice by one rank
    (pytest writes a test that fails in its call and errors in its teardown as two entries).

    The order, least to most severe, is passed < skipped < error < failed; gpu_jobs merges a
    rank's entries and then the ranks by it, and stackbot merges a result read straight from
    several ranks by it, so a test gets the same outcome wherever it is merged.

    - skipped above passed: a test passes only if it passed on every rank; passing on some and
      being skipped on others is not that.
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


def _choice(value: str, choices: tuple[str, ...], name: str) -> str:
    if value not in choices:
        raise ContractError(name, f"{value!r} is not one of {', '.join(choices)}")
    return value


@dataclass(frozen=True, order=True)
class Shape:
    """Launch shape: nodes x GPUs (ranks) per node, written ``"2x4"``."""

    nodes: int
    gpus_per_node: int

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= MAX_NODES:
            raise ContractError("shape", f"nodes must be 1..{MAX_NODES}, got {self.nodes}")
        if not 1 <= self.gpus_per_node <= MAX_GPUS_PER_NODE:
            raise ContractError(
                "shape", f"GPUs per node must be 1..{MAX_GPUS_PER_NODE}, got {self.gpus_per_node}"
            )

    @classmethod
    def parse(cls, text: str, name: str = "shape") -> Shape:
        match = _SHAPE.match(text) if isinstance(text, str) else None
        if match is None:
            raise ContractError(name, f"{text!r} is not NODESxGPUS_PER_NODE, e.g. '1x4' or '2x4'")
        try:
            return cls(int(match[1]), int(match[2]))
        except ContractError as exc:
            raise ContractError(name, exc.problem) from None

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    def __str__(self) -> str:
        return f"{self.nodes}x{self.gpus_per_node}"


@dataclass(frozen=True)
class LauncherOptions:
    """How torchrun is started. ``device`` "auto" means CUDA when the node has it, else CPU."""

    master_port: int | None = None
    backend: Backend | None = None
    device: Device = "auto"
    torchrun_args: tuple[str, ...] = ()
    pytest_args: tuple[str, ...] = ()
    # A rank still running this long after another rank finished its session is called hung.
    hang_grace_s: float = 120.0

    def __post_init__(self) -> None:
        if self.master_port is not None and not 1 <= self.master_port <= 65535:
            raise ContractError("launcher.master_port", f"{self.master_port} is not a TCP port")
        if self.backend is not None:
            _choice(self.backend, get_args(Backend), "launcher.backend")
        _choice(self.device, get_args(Device), "launcher.device")
        if self.hang_grace_s <= 0:
            raise ContractError("launcher.hang_grace_s", "must be positive")

    def to_dict(self) -> dict[str, Any]:
        return {
            "master_port": self.master_port,
            "backend": self.backend,
            "device": self.device,
            "torchrun_args": list(self.torchrun_args),
            "pytest_args": list(self.pytest_args),
            "hang_grace_s": self.hang_grace_s,
        }

    @classmethod
    def from_reader(cls, r: FieldReader) -> LauncherOptions:
        backend = r.opt_text("backend")
        return cls(
            master_port=r.opt_integer("master_port"),
            backend=cast(Backend, _choice(backend, get_args(Backend), r.name("backend")))
            if backend is not None
            else None,
            device=cast(
                Device, _choice(r.text("device", "auto"), get_args(Device), r.name("device"))
            ),
            torchrun_args=r.texts("torchrun_args"),
            pytest_args=r.texts("pytest_args"),
            hang_grace_s=r.number("hang_grace_s", 120.0),
        )


@dataclass(frozen=True)
class JobSpec:
    """One test set x shape x tree. ``reference`` targets are gpu_jobs' own suites, resolved
    against the installed package rather than the checkout."""

    job_id: str
    test_set: str
    targets: tuple[str, ...]
    shape: Shape
    repo_url: str | None = None
    commit: str | None = None
    checkout: str | None = None
    reference: bool = False
    timeout_s: float = 3600.0
    env: dict[str, str] = field(default_factory=dict)
    launcher: LauncherOptions = field(default_factory=LauncherOptions)
    node_check: bool = True
    setup_commands: tuple[str, ...] = ()
    container_image: str | None = None
    schema_version: str = SPEC_SCHEMA_VERSION

    def __post_init__(self) -> None:
        if not _JOB_ID.match(self.job_id):
            raise ContractError(
                "job_id",
                f"{self.job_id!r} must be 1-100 of [A-Za-z0-9._-], not starting with . - _",
            )
        if not self.test_set.strip():
            raise ContractError("test_set", "must not be empty")
        if not self.targets or any(not t.strip() for t in self.targets):
            raise ContractError("targets", "must list at least one non-empty pytest target")
        if self.reference and any(t.startswith("/") or ".." in t.split("/") for t in self.targets):
            raise ContractError("targets", "reference targets are paths inside gpu_jobs")
        if not self.reference and self.checkout is None and self.repo_url is None:
            raise ContractError("repo_url", "give repo_url (with commit) or checkout")
        if self.repo_url is not None and self.checkout is None and not self.commit:
            raise ContractError("commit", "is required with repo_url")
        if self.commit is not None and not re.fullmatch(r"[0-9a-fA-F]{7,64}", self.commit):
            raise ContractError("commit", f"{self.commit!r} is not a hex commit id")
        if not self.timeout_s > 0:
            raise ContractError("timeout_s", f"must be positive, got {self.timeout_s}")
        for key in self.env:
            if not _ENV_NAME.match(key):
                raise ContractError(f"env.{key}", "is not a valid environment variable name")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "job_id": self.job_id,
            "test_set": self.test_set,
            "targets": list(self.targets),
            "shape": str(self.shape),
            "repo_url": self.repo_url,
            "commit": self.commit,
            "checkout": self.checkout,
            "reference": self.reference,
            "timeout_s": self.timeout_s,
            "env": dict(self.env),
            "launcher": self.launcher.to_dict(),
            "node_check": self.node_check,
            "setup_commands": list(self.setup_commands),
            "container_image": self.container_image,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: object) -> JobSpec:
        r = FieldReader(data)
        version = parse_version(r.required("schema_version"), "schema_version", 1)
        launcher = r.obj("launcher")
        spec = cls(
            schema_version=SPEC_SCHEMA_VERSION,
            job_id=r.text("job_id"),
            test_set=r.text("test_set"),
            targets=r.texts("targets"),
            shape=Shape.parse(r.text("shape")),
            repo_url=r.opt_text("repo_url"),
            commit=r.opt_text("commit"),
            checkout=r.opt_text("checkout"),
            reference=r.flag("reference", False),
            timeout_s=r.number("timeout_s", 3600.0),
            env=r.text_map("env"),
            launcher=LauncherOptions.from_reader(launcher),
            node_check=r.flag("node_check", True),
            setup_commands=r.texts("setup_commands"),
            container_image=r.opt_text("container_image"),
        )
        if version <= _SPEC_VERSION:
            r.refuse_unknown()
            launcher.refuse_unknown()
        return spec

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        return cls.from_dict(_loads(text, "job spec"))


@dataclass(frozen=True)
class Counts:
    """How many tests ended with each outcome (one outcome per test, merged over ranks)."""

    passed: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0

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
        return self.passed + self.failed + self.error + self.skipped

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
    runner_version: str = __version__
    schema_version: str = RESULT_SCHEMA_VERSION

    def __post_init__(self) -> None:
        _choice(self.status, JOB_STATUSES, "status")

    @property
    def passed(self) -> bool:
        return self.status == "passed"

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
            status=cast(JobStatus, _choice(status, JOB_STATUSES, "status")),
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
                _choice(r.text("node_check", "skipped"), get_args(NodeCheck), "node_check"),
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
            runner_version=r.text("runner_version", ""),
        )
        if not stored and version <= _RESULT_VERSION:
            for reader in (r, counts_reader, durations):
                if reader is not None:
                    reader.refuse_unknown()
        return result

    @classmethod
    def from_json(cls, text: str) -> JobResult:
        return cls.from_dict(_loads(text, "job result"))


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


def _loads(text: str, what: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ContractError("<json>", f"the {what} is not valid JSON: {exc}") from None
