"""A clock for the queue's leases that only the test moves (``queue.Clock``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class FakeClock:
    def __init__(self) -> None:
        # An hour ahead of the real clock: tasks enqueued on the real clock are due, and a lease
        # measured on the real clock by mistake is long expired, so the test shows it.
        self.now = datetime.now(UTC) + timedelta(hours=1)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
