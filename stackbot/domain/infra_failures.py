"""Failures that are the machine's, not the tests' (issue 26 point 3): the stackbot side.

Two rules make a job ``infra`` (retried on another node, never counted as test results, never
evidence of a flaky test):

1. **Infrastructure signatures** in the ranks' output (NCCL timeouts and watchdog aborts, Xid and
   ECC errors, CUDA out of memory on an otherwise passing test, segfaults inside NCCL, an
   unreachable hub, a full disk, and Megatron-LM's ``is_flaky_failure`` list). The node decides
   this, where the rank logs are (:mod:`gpu_jobs.infra_signatures`, the list being data in the
   test-sets file); the job's message names the signature and the matched line, its ``cause``
   holds the lines around it. :func:`signature_of` reads them back.
2. **A mass failure**: most of a job's tests failing at once (:func:`mass_failure`). "Most" is
   more than half of the job's judged tests, and at least :data:`MASS_FAILURE_MIN_FAILED` of
   them. A real regression breaks the tests of what it touches, a few to a few dozen of a
   Megatron bucket of hundreds; more than half failing together is a GPU, a filesystem or an
   environment gone bad, and counting it as test results would record a hundred "flaky" tests
   when the confirming rerun passes elsewhere (poisoning the quarantine's evidence). The
   minimum keeps small jobs out: two of three tests failing is not enough evidence to blame the
   machine, and the confirming rerun settles it for the same one job a retry costs.
   A change *can* break most tests (a shared fixture), so the rule applies once per retry
   chain: when the retry on another node fails the same way, that result counts, as the tree's.

Tests run on fewer ranks than they need (``not judged``) and tolerated ones are not failures here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from gpu_jobs.conventions import NOT_JUDGED
from gpu_jobs.spec import JobResult

FAILING = frozenset({"failed", "error"})
MASS_FAILURE_MIN_FAILED = 10
MASS_FAILURE_SHARE = 0.5  # strictly more than this share of the judged tests
MASS_FAILURE_PREFIX = "mass failure:"
CAUSE_TESTS = 10  # failing tests named in a mass failure's cause

_SIGNATURE = re.compile(
    r"infra signature (?P<name>[a-z0-9-]+) \((?P<kind>[a-z]+)\) "
    r"(?P<where>on rank \d+|in the failing tests): (?P<line>.*?)(?:; the machine failed|$)",
    re.S,
)


@dataclass(frozen=True)
class SignatureMatch:
    """What a node's infra-by-signature message says."""

    name: str
    kind: str
    where: str  # "on rank 3" | "in the failing tests"
    line: str


def signature_of(message: str | None) -> SignatureMatch | None:
    """The signature named in a job's message (None when the job is not infra by one)."""
    found = _SIGNATURE.search(message or "")
    if found is None:
        return None
    return SignatureMatch(found["name"], found["kind"], found["where"], found["line"].strip())


@dataclass(frozen=True)
class MassFailure:
    failed: int
    judged: int

    def message(self) -> str:
        return (
            f"{MASS_FAILURE_PREFIX} {self.failed} of {self.judged} tests failed at once; the "
            "machine failed, not the tests: retried on another node, where the same counts as "
            "the tree's"
        )


def mass_failure(tests: Iterable[tuple[str, str]]) -> MassFailure | None:
    """``(outcome, message)`` of each test of a job: a mass failure, or None."""
    judged = failed = 0
    for outcome, message in tests:
        if outcome in FAILING and message.startswith(NOT_JUDGED):
            continue
        if outcome in ("skipped", "flaky"):
            continue
        judged += 1
        failed += outcome in FAILING
    if failed >= MASS_FAILURE_MIN_FAILED and failed > MASS_FAILURE_SHARE * judged:
        return MassFailure(failed, judged)
    return None


def is_mass_failure_message(message: str | None) -> bool:
    return (message or "").startswith(MASS_FAILURE_PREFIX)


def classify_result(result: JobResult, earlier_messages: Iterable[str | None]) -> JobResult:
    """``result`` as stored: a ``failed`` job that is a mass failure becomes ``infra`` (no test
    outcomes), unless an earlier attempt of its retry chain (``earlier_messages``) already was
    one: the same on a second node is the tree's."""
    if result.status != "failed":
        return result
    found = mass_failure((t.outcome, t.message) for t in result.tests)
    if found is None or any(is_mass_failure_message(m) for m in earlier_messages):
        return result
    names = [t.nodeid for t in result.tests if t.outcome in FAILING][:CAUSE_TESTS]
    cause = f"{found.failed} of {found.judged} tests failed at once, among them:\n" + "\n".join(
        names
    )
    return replace(
        result.uncounted(), status="infra", message=found.message(), error_of="node", cause=cause
    )
