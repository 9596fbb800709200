"""The runner's repository cache: which entries are in use, and pruning it by age and size.

Layout (:mod:`gpu_jobs.checkout` makes it): ``repos/KEY.git`` bare mirrors (``repos/KEY.lock``
serialises runners making or fetching one), ``trees/SHA`` one checked-out commit each, and
``trees/SHA.use``, the tree's use lock. A runner holds a shared lock on ``SHA.use`` from before
it looks at the tree until its process ends, and touches it, so its mtime is the tree's last
use. The pruner removes a tree only under an exclusive, non-blocking lock on the same file: a
tree a job runs in is never removed, and a runner that arrives while its tree is being removed
waits, then finds no ready marker and checks it out again. ``prune.lock`` (exclusive for the
pruner around each removal, shared for a runner taking its use lock) keeps the pruner from
unlinking a lock file a runner has just opened.

A mirror is removed once no tree is checked out from it and it is older than the age limit (or
the size limit asks for room), under its ``KEY.lock``, non-blocking.

Standard library only: the stackbot host prunes the cache it shares with the nodes
(``shared_dir``) through this module, and nodes may import it too.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from gpu_jobs.filelock import file_lock

READY = ".gpu_jobs_ready"
HALF_MADE_GRACE_S = 3600.0  # an entry without its marker younger than this may be being made
_HELD: list[IO[str]] = []  # use locks this process holds until it exits


def disk_usage(path: Path) -> int:
    """Bytes ``path`` takes on disk (allocated blocks), following no symlinks."""
    try:
        top = path.lstat()
    except OSError:
        return 0
    total = top.st_blocks * 512
    if not path.is_dir() or path.is_symlink():
        return total
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total


def hold_tree(cache_dir: Path, sha: str) -> None:
    """Mark ``trees/SHA`` in use by this process until it exits (and note the use's time).
    Blocks while the pruner is removing that tree."""
    trees = cache_dir / "trees"
    with file_lock(cache_dir / "prune.lock", shared=True):
        use = trees / f"{sha}.use"
        trees.mkdir(parents=True, exist_ok=True)
        handle = use.open("a")
        fcntl.flock(handle, fcntl.LOCK_SH)
    os.utime(use)
    _HELD.append(handle)


def release_trees() -> None:
    """Give up every use lock this process holds (tests; a runner just exits)."""
    while _HELD:
        handle = _HELD.pop()
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


@dataclass(frozen=True)
class CacheEntry:
    path: Path
    kind: str  # tree | repo
    last_used: float
    size: int
    ready: bool


@dataclass
class PruneReport:
    removed: list[str] = field(default_factory=list)  # "trees/SHA", "repos/KEY.git"
    kept_in_use: list[str] = field(default_factory=list)
    freed_bytes: int = 0
    remaining_bytes: int = 0
    remaining_entries: int = 0


def _last_used(path: Path, *stamps: Path) -> float:
    """The newest of the use stamps; the entry's own mtime when it has none (half-made)."""
    times = []
    for candidate in stamps:
        try:
            times.append(candidate.stat().st_mtime)
        except OSError:
            continue
    if not times:
        with suppress(OSError):
            times.append(path.stat().st_mtime)
    return max(times, default=0.0)


def scan(cache_dir: Path) -> list[CacheEntry]:
    """Every tree and mirror of the cache, with its size and last use."""
    entries = []
    trees = cache_dir / "trees"
    if trees.is_dir():
        for path in sorted(p for p in trees.iterdir() if p.is_dir()):
            used = _last_used(path, trees / f"{path.name}.use", path / READY)
            ready = (path / READY).exists()
            entries.append(CacheEntry(path, "tree", used, disk_usage(path), ready))
    repos = cache_dir / "repos"
    if repos.is_dir():
        for path in sorted(p for p in repos.iterdir() if p.is_dir()):
            used = _last_used(path, path / READY)
            ready = (path / READY).exists()
            entries.append(CacheEntry(path, "repo", used, disk_usage(path), ready))
    return entries


def _worktrees_of(repo: Path) -> list[Path]:
    """The trees checked out from ``repo`` that still exist."""
    found = []
    admin = repo / "worktrees"
    if admin.is_dir():
        for entry in admin.iterdir():
            try:
                gitdir = Path((entry / "gitdir").read_text().strip())
            except OSError:
                continue
            if gitdir.parent.exists():
                found.append(gitdir.parent)
    return found


def prune(
    cache_dir: Path,
    *,
    max_age_s: float,
    max_bytes: int,
    dry_run: bool = False,
    now: float | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> PruneReport:
    """Remove trees unused for ``max_age_s``, then the least recently used ones until the cache
    takes at most ``max_bytes``; then mirrors no tree uses, by the same two rules. Entries in
    use are kept whatever their age; ``dry_run`` removes nothing and reports what would go."""
    now = time.time() if now is None else now
    report = PruneReport()
    entries = scan(cache_dir)
    total = sum(e.size for e in entries)
    for kind in ("tree", "repo"):
        # Oldest first: past the age limit, or while the cache is over its size.
        for entry in sorted((e for e in entries if e.kind == kind), key=lambda e: e.last_used):
            too_old = now - entry.last_used > max_age_s
            half_made = not entry.ready and now - entry.last_used > HALF_MADE_GRACE_S
            if not (too_old or half_made or total > max_bytes):
                continue
            name = f"{entry.path.parent.name}/{entry.path.name}"
            gone = not _in_use(cache_dir, entry) if dry_run else _remove(cache_dir, entry)
            if not gone:
                report.kept_in_use.append(name)
                continue
            say(f"runner cache: {'would remove' if dry_run else 'removed'} {name}")
            report.removed.append(name)
            report.freed_bytes += entry.size
            total -= entry.size
    report.remaining_bytes = total
    report.remaining_entries = len(entries) - len(report.removed)
    return report


def _in_use(cache_dir: Path, entry: CacheEntry) -> bool:
    if entry.kind == "repo":
        return bool(_worktrees_of(entry.path))
    with file_lock(entry.path.parent / f"{entry.path.name}.use", wait_s=0) as free:
        return not free


def _remove(cache_dir: Path, entry: CacheEntry) -> bool:
    if entry.kind == "tree":
        use = entry.path.parent / f"{entry.path.name}.use"
        with (
            file_lock(cache_dir / "prune.lock"),
            file_lock(use, wait_s=0) as free,
        ):
            if not free:
                return False
            shutil.rmtree(entry.path, ignore_errors=True)
            use.unlink(missing_ok=True)
        return True
    lock = entry.path.parent / f"{entry.path.name.removesuffix('.git')}.lock"
    with file_lock(lock, wait_s=0) as free:
        if not free or _worktrees_of(entry.path):
            return False
        shutil.rmtree(entry.path, ignore_errors=True)
    return True
