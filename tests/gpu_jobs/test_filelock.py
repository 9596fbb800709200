"""gpu_jobs.filelock: the one flock helper of the runner cache and stackbot's mirror lock."""

from __future__ import annotations

import time
from pathlib import Path

from gpu_jobs.filelock import file_lock


def test_an_exclusive_lock_keeps_out_every_other_and_is_released(tmp_path: Path) -> None:
    path = tmp_path / "made" / "x.lock"
    with file_lock(path) as mine:
        assert mine and path.is_file()
        with file_lock(path, wait_s=0) as other, file_lock(path, shared=True, wait_s=0) as reader:
            assert (other, reader) == (False, False)
    with file_lock(path, wait_s=0) as again:
        assert again


def test_shared_locks_go_together_and_keep_out_an_exclusive_one(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    with file_lock(path, shared=True) as one, file_lock(path, shared=True, wait_s=0) as two:
        assert one and two
        started = time.monotonic()
        with file_lock(path, wait_s=0.2) as writer:
            assert not writer
        assert time.monotonic() - started >= 0.2
