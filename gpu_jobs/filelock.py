"""One ``flock`` on a lock file, the way the runner cache and stackbot's mirrors take theirs.

Standard library only, like the rest of gpu_jobs: stackbot imports it (its mirror lock), never
the other way round.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

POLL_S = 0.05


@contextmanager
def file_lock(path: Path, *, shared: bool = False, wait_s: float | None = None) -> Iterator[bool]:
    """Hold an ``flock`` on ``path`` (made, with its folder, if missing): shared or exclusive.
    ``wait_s`` None waits as long as it takes; otherwise the lock is tried until ``wait_s``
    seconds have passed (0: once). Yields whether the lock was taken (always True when
    waiting without a limit); it is released on the way out."""
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        if not _take(handle.fileno(), mode, wait_s):
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _take(fd: int, mode: int, wait_s: float | None) -> bool:
    if wait_s is None:
        fcntl.flock(fd, mode)
        return True
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)
