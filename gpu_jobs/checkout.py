"""The tree a job tests: a given checkout, gpu_jobs' own suites, or a commit fetched into a cache.

Fetched repositories live as bare mirrors under ``CACHE/repos`` and each commit is checked out
once under ``CACHE/trees/SHA`` (a detached worktree), reused by later jobs. A file lock keeps
runners on the same host (two Slurm node daemons, two local node groups) from racing, and a
runner holds its tree's use lock until it exits, so the cache's pruning (:mod:`gpu_jobs.cache`)
never removes a tree a job runs in.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import gpu_jobs
from gpu_jobs import cache
from gpu_jobs.filelock import file_lock
from gpu_jobs.spec import JobSpec

GIT_TIMEOUT_S = 1800.0
_READY = cache.READY


class TreeError(Exception):
    """The tree cannot be had. ``status`` says whose fault: the spec's or the node's."""

    def __init__(self, status: Literal["error", "infra"], message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Tree:
    root: Path
    commit: str | None
    pytest_args: tuple[str, ...] = ()  # how pytest must be started there


def package_dir() -> Path:
    return Path(gpu_jobs.__file__).resolve().parent


def default_cache_dir() -> Path:
    explicit = os.environ.get("GPU_JOBS_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu_jobs"


def prepare_tree(spec: JobSpec, cache_dir: Path, say: Callable[[str], None]) -> Tree:
    if spec.reference:
        root = package_dir()
        # Reference suites run the same everywhere: no ini file from whatever surrounds the
        # installed package, and nodeids relative to the package.
        return Tree(root, None, ("-c", os.devnull, f"--rootdir={root}"))
    if spec.checkout is not None:
        return _given_checkout(Path(spec.checkout), spec.commit)
    assert spec.repo_url is not None and spec.commit is not None  # JobSpec guarantees it
    return _cached_checkout(spec.repo_url, spec.commit, cache_dir, say)


def split_targets(root: Path, targets: Sequence[str]) -> tuple[list[str], list[str]]:
    """(present, missing): a target is missing when its file, class or function is absent."""
    present: list[str] = []
    missing: list[str] = []
    for target in targets:
        (present if _target_exists(root, target) else missing).append(target)
    return present, missing


def _target_exists(root: Path, target: str) -> bool:
    path_text, *names = target.split("::")
    path = root / path_text
    if not path.exists():
        return False
    if not names:
        return True
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for name in names:
        bare = re.escape(name.split("[", 1)[0])
        if not re.search(rf"^\s*(?:async\s+def|def|class)\s+{bare}\b", source, re.MULTILINE):
            return False
    return True


def _given_checkout(root: Path, commit: str | None) -> Tree:
    if not root.is_dir():
        raise TreeError("error", f"checkout: {root} is not a directory")
    head = _head(root)
    if commit is not None and (head is None or not head.startswith(commit.lower())):
        raise TreeError(
            "error", f"commit: the checkout {root} is at {head or 'no commit'}, not {commit}"
        )
    return Tree(root.resolve(), head)


def _head(root: Path) -> str | None:
    try:
        return _git(["rev-parse", "HEAD"], cwd=root).strip()
    except GitFailed:
        return None


def _cached_checkout(
    repo_url: str, commit: str, cache_dir: Path, say: Callable[[str], None]
) -> Tree:
    try:
        return _cached_checkout_locked(repo_url, commit, cache_dir, say)
    except GitFailed as exc:  # a step not classified below: the tree cannot be had
        raise TreeError("infra", f"repo_url: preparing {repo_url} failed: {exc}") from None


def _cached_checkout_locked(
    repo_url: str, commit: str, cache_dir: Path, say: Callable[[str], None]
) -> Tree:
    key = hashlib.sha256(repo_url.encode()).hexdigest()[:16]
    mirror = cache_dir / "repos" / f"{key}.git"
    with file_lock(cache_dir / "repos" / f"{key}.lock"):
        if not (mirror / _READY).exists():
            _make_mirror(mirror, repo_url, say)
        sha = _resolve(mirror, commit)
        if sha is None:
            say(f"setup: fetching {commit} from {repo_url}")
            sha = _fetch(mirror, repo_url, commit)
        (mirror / _READY).touch()  # the mirror's last use, for the cache's pruning
        cache.hold_tree(cache_dir, sha)  # until this runner exits: never pruned while in use
        tree = cache_dir / "trees" / sha
        if not (tree / _READY).exists():
            say(f"setup: checking out {sha[:12]} into {tree}")
            if tree.exists():
                shutil.rmtree(tree)
                _git(["worktree", "prune"], cwd=mirror)
            tree.parent.mkdir(parents=True, exist_ok=True)
            _git(["worktree", "add", "--detach", "--force", "--", str(tree), sha], cwd=mirror)
            (tree / _READY).touch()
            _exclude_ready_marker(tree)
    return Tree(tree, sha)


def _make_mirror(mirror: Path, repo_url: str, say: Callable[[str], None]) -> None:
    """Create the cache mirror of ``repo_url``. It counts as made only once its marker exists,
    so a mirror left half-made (a crash, a refused URL) is made again, never used."""
    if (mirror / "HEAD").exists() and _origin(mirror) == repo_url:
        (mirror / _READY).touch()  # made complete by an older gpu_jobs, before the marker
        return
    say(f"setup: creating the cache mirror of {repo_url} in {mirror}")
    if mirror.exists():
        shutil.rmtree(mirror)
    mirror.parent.mkdir(parents=True, exist_ok=True)
    _git(["init", "--bare", "--quiet", "--", str(mirror)], cwd=mirror.parent)
    _git(["remote", "add", "--", "origin", repo_url], cwd=mirror)
    (mirror / _READY).touch()


def _origin(mirror: Path) -> str | None:
    try:
        return _git(["config", "--get", "remote.origin.url"], cwd=mirror).strip() or None
    except GitFailed:
        return None


def _fetch(mirror: Path, repo_url: str, commit: str) -> str:
    attempts: list[list[str]] = []
    if len(commit) == 40:
        attempts.append(["fetch", "--quiet", "--no-tags", "--", "origin", commit])
    attempts.append(
        ["fetch", "--quiet", "--tags", "--", "origin", "+refs/heads/*:refs/remotes/origin/*"]
    )
    errors = []
    for args in attempts:
        try:
            _git(args, cwd=mirror)
        except GitFailed as exc:
            errors.append(str(exc))
        sha = _resolve(mirror, commit)
        if sha is not None:
            return sha
    try:
        _git(["ls-remote", "--exit-code", "--", "origin", "HEAD"], cwd=mirror)
    except GitFailed:
        raise TreeError("infra", f"repo_url: {repo_url} cannot be reached: {errors[-1]}") from None
    raise TreeError("error", f"commit: {commit} does not exist in {repo_url}")


def _resolve(mirror: Path, commit: str) -> str | None:
    try:
        return _git(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{commit}^{{commit}}"],
            cwd=mirror,
        ).strip()
    except GitFailed:
        return None


def _exclude_ready_marker(tree: Path) -> None:
    # Keep the marker out of `git status` in the tree under test.
    info = Path(_git(["rev-parse", "--git-common-dir"], cwd=tree).strip())
    exclude = (info if info.is_absolute() else tree / info) / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    if _READY not in (exclude.read_text() if exclude.exists() else ""):
        with exclude.open("a") as handle:
            handle.write(f"{_READY}\n")


class GitFailed(Exception):
    pass


def _git(args: list[str], cwd: Path) -> str:
    """The one seam through which gpu_jobs runs git."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=GIT_TIMEOUT_S
        )
    except FileNotFoundError:
        raise TreeError("infra", "git is not installed on this node") from None
    except subprocess.TimeoutExpired:
        raise TreeError("infra", f"git {args[0]} took over {GIT_TIMEOUT_S:.0f}s") from None
    if done.returncode != 0:
        raise GitFailed(f"git {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout
