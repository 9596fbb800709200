"""Builds real git repositories for the integration tests, with plain git in a working repo."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}

FileContent = str | bytes | None  # None deletes the file


class RepoBuilder:
    """A working repository on ``main``; each commit gets a distinct, increasing date."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._clock = 1_700_000_000
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "--quiet", "--initial-branch=main")

    def git(self, *args: str) -> str:
        self._clock += 60
        env = {**os.environ, **_ENV, "GIT_AUTHOR_DATE": f"@{self._clock} +0000"}
        env["GIT_COMMITTER_DATE"] = env["GIT_AUTHOR_DATE"]
        done = subprocess.run(
            ["git", *args], cwd=self.path, env=env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
        return done.stdout.strip()

    def write(self, files: Mapping[str, FileContent]) -> None:
        for name, content in files.items():
            target = self.path / name
            if content is None:
                self.git("rm", "--quiet", "--", name)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
            self.git("add", "--", name)

    def commit(self, message: str, files: Mapping[str, FileContent] | None = None) -> str:
        self.write(files or {})
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        return self.rev("HEAD")

    def rename(self, old: str, new: str) -> None:
        (self.path / new).parent.mkdir(parents=True, exist_ok=True)
        self.git("mv", old, new)

    def branch(self, name: str, start: str = "main") -> None:
        self.git("checkout", "--quiet", "-b", name, start)

    def checkout(self, name: str) -> None:
        self.git("checkout", "--quiet", name)

    def merge(self, ref: str, message: str) -> str:
        self.git("merge", "--quiet", "--no-ff", "-m", message, ref)
        return self.rev("HEAD")

    def rev(self, ref: str) -> str:
        return self.git("rev-parse", ref)

    def set_pull_head(self, number: int, ref: str) -> None:
        """What GitHub publishes for every PR: ``refs/pull/<n>/head``."""
        self.git("update-ref", f"refs/pull/{number}/head", self.rev(ref))

    def pr_branch(self, name: str, files: Mapping[str, FileContent], *, start: str = "main") -> str:
        """A branch off ``start`` with one commit; back on ``main`` afterwards."""
        self.branch(name, start)
        sha = self.commit(f"{name}: change", files)
        self.checkout("main")
        return sha
