"""The runner's repository cache is pruned by age and by size, never removing a tree in use.

Real git repositories and real checkouts made by the runner's own code; "in use" is a real
runner process that prepared its tree and is still running (it holds the tree's use lock).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_jobs import cache, checkout
from gpu_jobs.spec import JobSpec, Shape

DAY = 86400.0


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, list[str]]:
    """A repository with three commits (each a different tree)."""
    path = tmp_path / "repo"
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    shas = []
    for n in range(3):
        (path / "test_x.py").write_text(f"def test_x():\n    assert {n} == {n}\n" + "#" * 5000)
        _git(path, "add", ".")
        _git(path, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", f"c{n}")
        shas.append(_git(path, "rev-parse", "HEAD"))
    return path, shas


@pytest.fixture(autouse=True)
def _release() -> Iterator[None]:
    yield
    cache.release_trees()


def _spec(repo: Path, sha: str) -> JobSpec:
    return JobSpec(
        job_id="c", test_set="t", targets=("test_x.py",), shape=Shape(1, 1),
        repo_url=str(repo), commit=sha,
    )  # fmt: skip


def _age(cache_dir: Path, sha: str, days: float) -> None:
    """Make tree ``sha`` look last used ``days`` ago."""
    when = time.time() - days * DAY
    for path in (cache_dir / "trees" / f"{sha}.use", cache_dir / "trees" / sha / cache.READY):
        os.utime(path, (when, when))


def _trees(cache_dir: Path) -> set[str]:
    return {p.name for p in (cache_dir / "trees").iterdir() if p.is_dir()}


class Runner:
    """A real process that prepares a tree as a job's runner does and keeps running."""

    def __init__(self, cache_dir: Path, repo: Path, sha: str) -> None:
        code = (
            "import sys, time\n"
            "from gpu_jobs import checkout\n"
            "from gpu_jobs.spec import JobSpec, Shape\n"
            "spec = JobSpec(job_id='c', test_set='t', targets=('test_x.py',), shape=Shape(1, 1),"
            f" repo_url={str(repo)!r}, commit={sha!r})\n"
            f"checkout.prepare_tree(spec, __import__('pathlib').Path({str(cache_dir)!r}), print)\n"
            "print('ready', flush=True)\n"
            "time.sleep(120)\n"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.strip() == "ready":
                return
        raise AssertionError("the runner did not prepare its tree")

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def test_trees_unused_past_the_age_go_and_one_in_use_stays(
    tmp_path: Path, repo: tuple[Path, list[str]]
) -> None:
    path, (a, b, c) = repo
    cache_dir = tmp_path / "cache"
    for sha in (a, c):
        checkout.prepare_tree(_spec(path, sha), cache_dir, lambda _: None)
    cache.release_trees()  # those runners finished
    runner = Runner(cache_dir, path, b)  # this one still runs its job in tree b
    try:
        _age(cache_dir, a, 20)
        _age(cache_dir, b, 20)  # prepared long ago, still running
        _age(cache_dir, c, 1)
        report = cache.prune(cache_dir, max_age_s=14 * DAY, max_bytes=10**12)
        assert report.removed == [f"trees/{a}"]
        assert report.kept_in_use == [f"trees/{b}"]
        assert report.freed_bytes > 0
        assert _trees(cache_dir) == {b, c}
        assert (cache_dir / "trees" / b / "test_x.py").is_file()
    finally:
        runner.stop()
    # Its runner gone, tree b is old enough to go; the mirror stays while c is checked out.
    report = cache.prune(cache_dir, max_age_s=14 * DAY, max_bytes=10**12)
    assert report.removed == [f"trees/{b}"]
    assert _trees(cache_dir) == {c}
    assert len(list((cache_dir / "repos").glob("*.git"))) == 1


def test_the_least_recently_used_trees_go_until_the_cache_fits(
    tmp_path: Path, repo: tuple[Path, list[str]]
) -> None:
    path, (a, b, c) = repo
    cache_dir = tmp_path / "cache"
    for sha in (a, b, c):
        checkout.prepare_tree(_spec(path, sha), cache_dir, lambda _: None)
    cache.release_trees()
    _age(cache_dir, a, 3)
    _age(cache_dir, b, 1)
    _age(cache_dir, c, 2)
    sizes = {e.path.name: e.size for e in cache.scan(cache_dir)}
    total = sum(sizes.values())
    # Room for everything but one tree: the least recently used (a) goes, nothing else.
    limit = total - sizes[a] + 1
    dry = cache.prune(cache_dir, max_age_s=14 * DAY, max_bytes=limit, dry_run=True)
    assert dry.removed == [f"trees/{a}"] and _trees(cache_dir) == {a, b, c}
    report = cache.prune(cache_dir, max_age_s=14 * DAY, max_bytes=limit)
    assert report.removed == [f"trees/{a}"]
    assert report.remaining_bytes <= limit
    assert _trees(cache_dir) == {b, c}
    # A later job on the pruned commit checks it out again.
    tree = checkout.prepare_tree(_spec(path, a), cache_dir, lambda _: None)
    assert (tree.root / "test_x.py").is_file()


def test_a_mirror_goes_only_once_no_tree_uses_it(
    tmp_path: Path, repo: tuple[Path, list[str]]
) -> None:
    path, (a, _b, _c) = repo
    cache_dir = tmp_path / "cache"
    checkout.prepare_tree(_spec(path, a), cache_dir, lambda _: None)
    cache.release_trees()
    old = time.time() - 30 * DAY
    mirror = next((cache_dir / "repos").glob("*.git"))
    os.utime(mirror / cache.READY, (old, old))
    os.utime(mirror, (old, old))
    _age(cache_dir, a, 30)
    report = cache.prune(cache_dir, max_age_s=14 * DAY, max_bytes=10**12)
    assert report.removed == [f"trees/{a}", f"repos/{mirror.name}"]
    assert not mirror.exists() and _trees(cache_dir) == set()
