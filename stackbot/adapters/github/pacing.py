"""Write pacing: stay under GitHub's content-creation limits (80 writes a minute, 500 an hour).

GitHub counts content-creating requests (comments, check runs, statuses) per minute and per
hour and answers a secondary rate limit when they are exceeded. The pacer keeps, per window, the
times of the writes it let through and hands out the earliest slot at which both windows still
have room: a burst of 80 goes at once, the 81st waits until the first is a minute old, the 501st
until the first is an hour old. (A token bucket refilling at 80/min with room for 80 would let
160 through in one sliding minute, so the windows are kept exactly.)

A worker's writes go through the pacer of its
:class:`~stackbot.services.resources.WorkerResources`, one per worker process (``stackbot worker``
shares it between its threads); a client made outside a worker without a pacer of its own (the
CLI, scripts) takes :func:`shared_write_pacer`. Slots are
reserved under a lock and slept for outside it, so concurrent writers queue fairly. The clock
and sleep are injectable: tests check the schedule without waiting real minutes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("stackbot.adapters.github")

WRITES_PER_MINUTE = 80
WRITES_PER_HOUR = 500
LOG_WAITS_OVER_S = 1.0


@dataclass(frozen=True)
class Window:
    seconds: float
    limit: int


class WritePacer:
    def __init__(
        self,
        *,
        per_minute: int = WRITES_PER_MINUTE,
        per_hour: int = WRITES_PER_HOUR,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if per_minute < 1 or per_hour < 1:
            raise ValueError("write limits must be at least 1 per window")
        self.windows = (Window(60.0, per_minute), Window(3600.0, per_hour))
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        # Granted slot times per window, oldest first; at most `limit` are kept.
        self._granted: tuple[deque[float], ...] = tuple(deque() for _ in self.windows)

    def reserve(self) -> float:
        """Book the earliest slot both windows allow and return its time (no sleeping)."""
        with self._lock:
            now = self._clock()
            slot = now
            for window, granted in zip(self.windows, self._granted, strict=True):
                if len(granted) >= window.limit:
                    # The write `limit` places back must have left the window.
                    slot = max(slot, granted[-window.limit] + window.seconds)
            for window, granted in zip(self.windows, self._granted, strict=True):
                granted.append(slot)
                while len(granted) > window.limit:
                    granted.popleft()
            return slot

    def acquire(self, what: str = "write") -> float:
        """Wait for a write slot; returns the seconds waited."""
        slot = self.reserve()
        wait = slot - self._clock()
        if wait > 0:
            if wait >= LOG_WAITS_OVER_S:
                log.info(
                    "pacing GitHub writes: %s waits %.1fs (limits %s)", what, wait, self.describe()
                )
            self._sleep(wait)
            return wait
        return 0.0

    def describe(self) -> str:
        return ", ".join(f"{w.limit}/{w.seconds:.0f}s" for w in self.windows)


_SHARED: WritePacer | None = None
_SHARED_LOCK = threading.Lock()


_OTHERS: dict[tuple[int, int], WritePacer] = {}


def shared_write_pacer(
    per_minute: int = WRITES_PER_MINUTE, per_hour: int = WRITES_PER_HOUR
) -> WritePacer:
    """The process-wide pacer every GitHub client with these limits uses unless given its own
    (GitHub's own limits by default; a GitHub Enterprise server or the stand-in may differ)."""
    global _SHARED
    with _SHARED_LOCK:
        if (per_minute, per_hour) != (WRITES_PER_MINUTE, WRITES_PER_HOUR):
            key = (per_minute, per_hour)
            if key not in _OTHERS:
                _OTHERS[key] = WritePacer(per_minute=per_minute, per_hour=per_hour)
            return _OTHERS[key]
        if _SHARED is None:
            _SHARED = WritePacer()
        return _SHARED
