"""The command lines' progress and error lines (issue 29 point 7): a ``fetching …`` line is ended
("done" / "failed") before an error line follows it, and a ref holding a newline is refused in
one line instead of splitting the lines that show it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@e", *args], cwd=path, check=True
        )
    return path


def integrate(repo: Path, tmp_path: Path, *pr: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stackbot", "integrate", "--repo", str(repo), "--base", "main",
         *(f"--pr={p}" for p in pr)],
        capture_output=True, text=True, check=False,
        env={**os.environ, "STACKBOT_DATA_DIR": str(tmp_path / "data")},
    )  # fmt: skip


def test_the_fetching_line_ends_before_the_error_line(repo: Path, tmp_path: Path) -> None:
    done = integrate(repo, tmp_path, "1=nope")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    [error] = [n for n, line in enumerate(lines) if line.startswith("stackbot integrate:")]
    assert "refs/heads/nope" in lines[error]
    assert lines[error - 1].startswith("fetching ") and lines[error - 1].endswith(" failed")
    ok = integrate(repo, tmp_path, "1=main")
    assert ok.returncode == 0, ok.stderr
    assert [line for line in ok.stderr.splitlines() if line.startswith("fetching ")] == [
        line for line in ok.stderr.splitlines() if line.startswith("fetching ") and
        line.endswith(" done")
    ]  # fmt: skip


def test_a_ref_with_a_newline_is_refused_in_one_line(repo: Path, tmp_path: Path) -> None:
    done = integrate(repo, tmp_path, "1=no\npe")
    assert done.returncode == 2, done.stderr
    assert "no\npe" not in done.stderr, done.stderr  # no line is split
    [line] = done.stderr.splitlines()
    assert line.startswith("stackbot integrate:") and '"no\\npe"' in line
