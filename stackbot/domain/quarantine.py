"""Quarantine on evidence, release on evidence (issue 26 points 1-2), pure.

A *flaky observation* is one test that failed on a tree and passed on a rerun of the same tree
with the same configuration (the test plan's ``flaky`` or ``quarantined`` finding; the jobs that
ran, not reused copies). A test with ``flaky_count`` observations on distinct failing jobs within
``window_days`` is quarantined for its repository. A quarantined test still runs everywhere and
its outcome is shown, but it decides no verdict (the test plan classes its flake
``quarantined``); a quarantined test that fails the same tree every time is a failure and its
quarantine is lifted. It is released after ``release_after`` consecutive clean runs and expires
``expiry_days`` after it started (or after a maintainer's renewal).

Defaults, and why:

- ``flaky_count = 3`` in ``window_days = 14``: one flake is what the rerun already absorbs; two
  can be coincidence (a test with a 1 % flake rate, run a few hundred times a fortnight at
  Megatron's ~8 merges a day over several configurations, shows two often enough); three in two
  weeks is a pattern. A deterministic failure never produces an observation (it never passes
  the rerun), so no count lets one in.
- ``release_after = 30`` clean runs: PyTorch's disable bot re-enables only after a long clean
  record. A test failing 10 % of the time passes 30 runs in a row with probability 0.9³⁰ ≈ 4 %,
  so a released test is rarely still flaky; a fixed test (0 %) is released within about a
  day of runs.
- ``expiry_days = 30``: the issue's default; a quarantine nobody renews does not become a
  permanent deselection (Megatron's ``flaky`` markers are exactly that).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

ACTIVE, RELEASED, EXPIRED, LIFTED = "active", "released", "expired", "lifted"
EVIDENCE, MAINTAINER = "evidence", "maintainer"
CLEAN = frozenset({"passed"})
FAILING = frozenset({"failed", "error"})


@dataclass(frozen=True)
class QuarantinePolicy:
    flaky_count: int = 3
    window_days: int = 14
    release_after: int = 30
    expiry_days: int = 30

    @property
    def window(self) -> timedelta:
        return timedelta(days=self.window_days)

    @property
    def expiry(self) -> timedelta:
        return timedelta(days=self.expiry_days)


@dataclass(frozen=True)
class FlakyObservation:
    nodeid: str
    test_set: str
    shape: str
    tree: str | None
    failed_job: int
    passed_job: int | None
    at: datetime

    def to_json(self) -> dict[str, object]:
        return {
            "test_set": self.test_set,
            "shape": self.shape,
            "tree": self.tree,
            "failed_job": self.failed_job,
            "passed_job": self.passed_job,
            "at": self.at.isoformat(),
        }


def to_quarantine(
    observations: Iterable[FlakyObservation],
    *,
    now: datetime,
    policy: QuarantinePolicy,
    held: Iterable[str] = (),
) -> dict[str, list[FlakyObservation]]:
    """The tests (not in ``held``: already quarantined) with enough observations in the
    window, each with the observations that are its evidence, oldest first."""
    since = now - policy.window
    held = set(held)
    by_test: dict[str, dict[int, FlakyObservation]] = {}
    for seen in observations:
        if seen.nodeid in held or seen.at < since or seen.at > now:
            continue
        by_test.setdefault(seen.nodeid, {}).setdefault(seen.failed_job, seen)
    return {
        nodeid: sorted(found.values(), key=lambda o: (o.at, o.failed_job))
        for nodeid, found in sorted(by_test.items())
        if len(found) >= policy.flaky_count
    }


def clean_streak(outcomes: Sequence[str]) -> int:
    """How many of the test's latest results (oldest first) passed in a row, counted back
    from the newest (a skipped result neither counts nor breaks the streak)."""
    streak = 0
    for outcome in reversed(outcomes):
        if outcome in CLEAN:
            streak += 1
        elif outcome in FAILING:
            break
    return streak


@dataclass(frozen=True)
class Decision:
    state: str
    note: str


def review(
    *,
    expires_at: datetime,
    outcomes_since_start: Sequence[str],
    failed_every_time: bool,
    now: datetime,
    policy: QuarantinePolicy,
) -> Decision | None:
    """What ends an active quarantine now, if anything: a deterministic failure lifts it, a
    clean record releases it, the expiry date ends it."""
    if failed_every_time:
        return Decision(LIFTED, "failed on the same tree every time: a failure, not a flake")
    streak = clean_streak(outcomes_since_start)
    if streak >= policy.release_after:
        return Decision(RELEASED, f"passed {streak} runs in a row")
    if now >= expires_at:
        return Decision(EXPIRED, f"expired after {policy.expiry_days} days without a renewal")
    return None
