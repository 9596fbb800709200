"""One real ``stackbot demo`` per session (the README's main command, as a subprocess), left
serving so the browser tests can open its dashboard."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# The demo's budget; a slow machine may give it more (STACKBOT_TEST_ variables reach the tests).
DEMO_TIMEOUT_S = int(os.environ.get("STACKBOT_TEST_DEMO_TIMEOUT_S", "900"))
TAIL_LINES = 40  # of each of the demo's outputs, in the fixture's error


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that starts the demo (the first to ask for it) gets the demo's budget and some:
    the fixture's own limit, which shows the demo's last lines, then ends first, not
    pytest-timeout's default with a bare thread dump."""
    for item in items:
        uses_demo = "demo" in getattr(item, "fixturenames", ())
        if uses_demo and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DEMO_TIMEOUT_S + 120))


def demo_tail(stdout_lines: list[str], stderr_lines: list[str]) -> str:
    """The demo's last lines: its progress and log (stderr), then what it printed (stdout)."""
    parts = []
    for name, lines in (("stderr", stderr_lines), ("stdout", stdout_lines)):
        shown = lines[-TAIL_LINES:]
        more = f", the last {len(shown)} of {len(lines)}" if len(lines) > len(shown) else ""
        parts.append(f"── the demo's {name}{more} ──\n" + ("\n".join(shown) or "(nothing)"))
    return "\n".join(parts)


@dataclass
class DemoRun:
    url: str
    github_url: str
    workdir: Path
    stdout_lines: list[str] = field(default_factory=list)
    stderr_lines: list[str] = field(default_factory=list)

    @property
    def stdout(self) -> str:
        return "\n".join(self.stdout_lines)

    @property
    def database(self) -> Path:
        return self.workdir / "stackbot" / "stackbot.db"

    def sticky(self, number: int) -> str:
        marker = f"──── sticky comment on #{number} "
        start = self.stdout.index(marker)
        rest = self.stdout[start + len(marker) :].partition("\n")[2]  # after the header line
        ends = [
            rest.find(mark)
            for mark in ("──── sticky comment on #", "──── the landing ", "Act on it as a user")
        ]
        found = [end for end in ends if end >= 0]
        return rest[: min(found)] if found else rest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoRun]:
    workdir = tmp_path_factory.mktemp("demo") / "work"
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKBOT_")}
    env["PYTHONUNBUFFERED"] = "1"
    # The demo runs from a temporary directory: put this checkout first on its path, or an
    # editable install of another checkout (a git worktree's main) is what gets tested.
    checkout = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (checkout, env.get("PYTHONPATH")) if p)
    process = subprocess.Popen(
        [sys.executable, "-m", "stackbot", "demo", "--port", str(port), "--workdir", str(workdir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=workdir.parent,
    )
    stdout_lines: list[str] = []

    def read_stdout() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            stdout_lines.append(line.rstrip("\n"))

    reader = threading.Thread(target=read_stdout, daemon=True)
    stderr_lines: list[str] = []
    done = threading.Event()

    def read_stderr() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            stderr_lines.append(line.rstrip())
            if "every report is posted" in line or "demo did not finish" in line:
                done.set()
        done.set()

    threading.Thread(target=read_stderr, daemon=True).start()
    reader.start()
    try:
        if not done.wait(DEMO_TIMEOUT_S):
            pytest.fail(
                f"stackbot demo did not finish in {DEMO_TIMEOUT_S} s (a busy machine?); where it "
                f"was:\n{demo_tail(list(stdout_lines), list(stderr_lines))}",
                pytrace=False,
            )
        if not any("every report is posted" in line for line in stderr_lines):
            code = process.poll()
            ended = f"exited with status {code}" if code is not None else "is still running"
            pytest.fail(
                f"stackbot demo failed ({ended}):\n"
                + demo_tail(list(stdout_lines), list(stderr_lines)),
                pytrace=False,
            )
        github = next(
            re.search(r"on (http://\S+)", line).group(1)  # type: ignore[union-attr]
            for line in stderr_lines
            if "GitHub stand-in on" in line
        )
        time.sleep(0.5)  # let stdout's last comment flush through the pipe
        yield DemoRun(f"http://127.0.0.1:{port}", github, workdir, stdout_lines, stderr_lines)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
        reader.join(timeout=10)
