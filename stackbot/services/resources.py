"""What a worker keeps between tasks: its GitHub client, its executor and test sets, and the
caches that make a later integration redo only what changed.

One :class:`WorkerResources` is made by the process that runs workers (``stackbot worker``
makes one for all its threads, ``stackbot serve --worker`` and the demo one each) and reaches
every handler as ``ctx.services``. Nothing here is a module global: two workers made with
different settings in one process (the tests do that) never share a cache, an executor or a
GitHub client by accident.

- the allowlist scanner (processes under a Python >= 3.12) and the data directory's scan cache,
  which every process shares: a later run re-parses only files whose blobs changed;
- merge-step memos, per mirror: a stack run repeats no merge the series run already made;
- conflict-matrix caches, per mirror: a push to one PR recomputes only that PR's pairs;
- the executor (its local GPU pool is the process's) and the test sets (re-read when their
  file changes);
- the GitHub client, with one write pacer for the process's writes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gpu_jobs.executors import Executor, make_executor
from gpu_jobs.testsets import OwnTests, TestSet, load_own_tests, load_test_sets
from stackbot.adapters.git import GitMirror
from stackbot.adapters.git_maintenance import pruned_stamp
from stackbot.config import Settings
from stackbot.services.conflicts import ConflictCache
from stackbot.services.executors import executor_config
from stackbot.services.integration import StepMemo
from stackbot.services.tree_allowlist import ScanTools, TreeAllowlist

if TYPE_CHECKING:
    from stackbot.adapters.github.port import GitHubPort


class WorkerResources:
    """What a worker builds once and lends each task: the GitHub client, caches, executor."""

    def __init__(
        self, settings: Settings, *, github: Callable[[], GitHubPort] | None = None
    ) -> None:
        """``github``: how to make the GitHub client (default: from the settings)."""
        self.settings = settings
        self._make_github = github
        self._github: GitHubPort | None = None
        self._lock = threading.Lock()
        self._allowlists: dict[str, TreeAllowlist] = {}
        self._scan_tools: ScanTools | None = None
        self._step_memos: dict[str, StepMemo] = {}
        self._memo_stamps: dict[str, int] = {}
        self._conflict_caches: dict[str, ConflictCache] = {}
        self._executor: Executor | None = None
        self._test_sets: tuple[tuple[str, float], dict[str, TestSet]] | None = None
        self._own_tests: tuple[tuple[str, float], OwnTests | None] | None = None

    def github(self) -> GitHubPort:
        """The GitHub client, built on first use (PyGithub is imported only then)."""
        with self._lock:
            if self._github is None:
                self._github = self._new_github()
            return self._github

    def _new_github(self) -> GitHubPort:
        if self._make_github is not None:
            return self._make_github()
        from stackbot.adapters.github import GitHubClient, WritePacer

        pacer = WritePacer(
            per_minute=self.settings.github_writes_per_minute,
            per_hour=self.settings.github_writes_per_hour,
        )
        return GitHubClient.from_settings(self.settings, pacer=pacer)

    def allowlist(self, mirror: GitMirror) -> TreeAllowlist:
        """The mirror's allowlist reader, whose scan outcomes outlive one run."""
        with self._lock:
            key = str(mirror.git_dir)
            tracker = self._allowlists.get(key)
            if tracker is None:
                if self._scan_tools is None:
                    self._scan_tools = ScanTools.from_settings(self.settings)
                tools = self._scan_tools
                tracker = TreeAllowlist(mirror, cache=tools.cache, scanner=tools.scanner)
                self._allowlists[key] = tracker
            return tracker

    def step_memo(self, mirror: GitMirror) -> StepMemo:
        """The mirror's merge memo; a new one after a repack may have dropped the commits the
        old one would reuse."""
        stamp = pruned_stamp(mirror.git_dir)
        with self._lock:
            key = str(mirror.git_dir)
            memo = self._step_memos.get(key)
            if memo is None or self._memo_stamps.get(key) != stamp:
                memo = self._step_memos[key] = StepMemo()
                self._memo_stamps[key] = stamp
            return memo

    def conflict_cache(self, mirror: GitMirror) -> ConflictCache:
        with self._lock:
            return self._conflict_caches.setdefault(str(mirror.git_dir), ConflictCache())

    def executor(self) -> Executor:
        with self._lock:
            if self._executor is None:
                self._executor = make_executor(executor_config(self.settings))
            return self._executor

    def test_sets(self) -> dict[str, TestSet]:
        """The configured test sets, re-read when their file changes."""
        path = self.settings.test_sets_file
        stamp = (str(path), Path(path).stat().st_mtime if path is not None else 0.0)
        with self._lock:
            if self._test_sets is None or self._test_sets[0] != stamp:
                self._test_sets = (stamp, load_test_sets(path))
            return self._test_sets[1]

    def own_tests(self) -> OwnTests | None:
        """How PRs' own test files run (the test-set file's ``[own_tests]``; None: not run)."""
        path = self.settings.test_sets_file
        stamp = (str(path), Path(path).stat().st_mtime if path is not None else 0.0)
        with self._lock:
            if self._own_tests is None or self._own_tests[0] != stamp:
                self._own_tests = (stamp, load_own_tests(path))
            return self._own_tests[1]
