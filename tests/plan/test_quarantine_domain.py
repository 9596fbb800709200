"""The quarantine rules (stackbot.domain.quarantine), pure: the window, distinct failing jobs,
the clean streak and what ends a quarantine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from stackbot.domain.quarantine import (
    EXPIRED,
    LIFTED,
    RELEASED,
    FlakyObservation,
    QuarantinePolicy,
    clean_streak,
    review,
    to_quarantine,
)

NOW = datetime(2026, 6, 1, tzinfo=UTC)
POLICY = QuarantinePolicy()


def _seen(nodeid: str, job: int, days_ago: float) -> FlakyObservation:
    return FlakyObservation(
        nodeid, "unit", "1x8", f"t{job}", job, job + 1000, NOW - timedelta(days_ago)
    )


def test_three_observations_on_distinct_jobs_within_the_window_quarantine() -> None:
    seen = [_seen("a", 1, 13), _seen("a", 2, 5), _seen("a", 3, 0)]
    assert list(to_quarantine(seen, now=NOW, policy=POLICY)) == ["a"]
    # One outside the window, or the same failing job reported twice, is not a third.
    assert to_quarantine([_seen("a", 1, 15), *seen[1:]], now=NOW, policy=POLICY) == {}
    assert to_quarantine([seen[0], seen[0], seen[1]], now=NOW, policy=POLICY) == {}
    # A test already held is not quarantined again.
    assert to_quarantine(seen, now=NOW, policy=POLICY, held={"a"}) == {}


def test_the_clean_streak_counts_back_from_the_newest_result() -> None:
    assert clean_streak(["passed", "failed", "passed", "skipped", "passed"]) == 2
    assert clean_streak(["failed"]) == 0


def test_what_ends_a_quarantine() -> None:
    later = NOW + timedelta(days=1)
    ok = ["passed"] * 30

    def decide(outcomes: list[str], *, every: bool = False, now: datetime = NOW) -> str | None:
        found = review(
            expires_at=later,
            outcomes_since_start=outcomes,
            failed_every_time=every,
            now=now,
            policy=POLICY,
        )
        return found.state if found else None

    assert decide(ok[:29]) is None
    assert decide(ok) == RELEASED
    assert decide(ok, every=True) == LIFTED  # a deterministic failure is never held
    assert decide([], now=later) == EXPIRED
