"""Real ``stackbot worker`` processes for the tests, with the test task module loaded."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.signing import REPO_ROOT

TEST_TASK_MODULES = '["tests.queue.task_modules"]'


class WorkerProcess:
    def __init__(self, database_url: str, log_path: Path, *args: str) -> None:
        env = dict(os.environ)
        env.update(
            STACKBOT_DATABASE_URL=database_url,
            STACKBOT_EXTRA_TASK_MODULES=TEST_TASK_MODULES,
            STACKBOT_WORKER__POLL_INTERVAL_S="0.05",
            PYTHONPATH=str(REPO_ROOT),
        )
        self.log_path = log_path
        self._log = log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "stackbot", "worker", *args],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.log_path.read_text()

    def wait_until_ready(self, timeout: float = 30) -> None:
        wait_for(
            lambda: "stackbot worker" in self.output(), timeout, f"worker {self.pid} banner", self
        )

    def wait(self, timeout: float = 30) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"worker {self.pid} did not exit:\n{self.output()}") from None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._log.close()


def wait_for(
    condition: Callable[[], bool], timeout: float, what: str, *workers: WorkerProcess
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- worker {w.pid}:\n{w.output()}" for w in workers)
            raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{logs}")
        time.sleep(0.05)
