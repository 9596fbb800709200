"""Keeping stackbot's bare mirrors small: the mirror lock, run refs, keep refs and the repack.

**The mirror lock.** Everything that writes objects into a mirror and makes them reachable
afterwards (a fetch, then an integration's merges and its refs; the conflict matrix's merges)
holds the mirror's lock *shared*; the repack holds it *exclusive*. It is an ``flock`` on
``stackbot-mirror.lock`` inside the mirror, so it holds across worker processes on one host
(and on NFS, where Linux maps ``flock`` to POSIX locks). The repack never waits: a mirror in use
is left for the next round. A user waits at most ``wait_s`` for a repack to end, then gets
:class:`MirrorBusy` (retry later), so an integration never blocks for long.

**Run refs** are ``refs/stackbot/<kind>/<name>/{head,base}``, one pair per run name, rewritten
by each run of that name. **Keep refs** (``refs/stackbot/keep/job-N``) hold the commit of every
unfinished job: a job of an older run whose name a newer run took over still needs its commit
(the runner fetches it from the mirror), and a repack drops what no ref reaches.

After a repack, ``stackbot-pruned`` is touched: a worker's in-memory merge memo for the mirror
(commits it may reuse) is dropped when it sees the stamp change.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpu_jobs.cache import disk_usage
from gpu_jobs.filelock import file_lock
from stackbot.adapters.git_process import run_git
from stackbot.errors import RetryLater

LOCK_FILE = "stackbot-mirror.lock"
PRUNED_STAMP = "stackbot-pruned"
RUN_REF_KINDS = ("stack", "series")
KEEP_PREFIX = "refs/stackbot/keep/"
# Unreachable loose objects younger than this survive a repack (a `stackbot integrate` run by
# hand on an old stackbot that does not take the lock, a fetch's objects before their refs).
PRUNE_GRACE = "1.hour.ago"

__all__ = [
    "KEEP_PREFIX",
    "MirrorBusy",
    "RunRefs",
    "delete_refs",
    "disk_usage",
    "exclusive_use",
    "list_run_refs",
    "pruned_stamp",
    "repack",
    "set_keep_refs",
    "shared_use",
]


class MirrorBusy(RetryLater):
    """The mirror is being repacked; the task is retried after the repack."""


@contextmanager
def shared_use(git_dir: Path, *, wait_s: float) -> Iterator[None]:
    """Use the mirror (fetch, merge, write refs) while no repack runs; waits up to ``wait_s``."""
    with file_lock(git_dir / LOCK_FILE, shared=True, wait_s=wait_s) as taken:
        if not taken:
            raise MirrorBusy(
                f"the mirror {git_dir.name} is being repacked; retrying after it",
                retry_after=max(wait_s, 5.0),
            )
        yield


@contextmanager
def exclusive_use(git_dir: Path) -> Iterator[bool]:
    """The mirror to ourselves, or False at once when someone uses it."""
    with file_lock(git_dir / LOCK_FILE, wait_s=0) as taken:
        yield taken


def pruned_stamp(git_dir: Path) -> int:
    """Changes whenever a repack may have dropped unreachable objects (0: never)."""
    try:
        return (git_dir / PRUNED_STAMP).stat().st_mtime_ns
    except OSError:
        return 0


@dataclass(frozen=True)
class RunRefs:
    """The refs of one run name: ``prefix`` is ``refs/stackbot/<kind>/<name>/``."""

    prefix: str
    refs: tuple[str, ...]
    written_at: float | None  # when a run last wrote them (a loose ref's mtime), if known


def list_run_refs(git_dir: Path) -> list[RunRefs]:
    """Every run name's refs in the mirror (pushed-branch records and keep refs excluded)."""
    patterns = [f"refs/stackbot/{kind}/" for kind in RUN_REF_KINDS]
    out = run_git(git_dir, ["for-each-ref", "--format=%(refname)", *patterns]).stdout.decode()
    groups: dict[str, list[str]] = {}
    for ref in out.splitlines():
        prefix = ref.rsplit("/", 1)[0] + "/"
        groups.setdefault(prefix, []).append(ref)
    found = []
    for prefix, refs in sorted(groups.items()):
        times = []
        for ref in refs:
            try:
                times.append((git_dir / ref).stat().st_mtime)
            except OSError:  # packed: its time is not known here
                continue
        found.append(RunRefs(prefix, tuple(refs), max(times) if times else None))
    return found


def delete_refs(git_dir: Path, refs: Sequence[str]) -> None:
    if refs:
        script = "".join(f"delete {ref}\n" for ref in refs)
        run_git(git_dir, ["update-ref", "--stdin"], stdin=script.encode())


def set_keep_refs(git_dir: Path, wanted: Mapping[str, str]) -> int:
    """Make ``refs/stackbot/keep/`` exactly ``{name: commit}`` (commits the mirror lacks are
    left out). Returns how many keep refs there are."""
    out = run_git(
        git_dir, ["for-each-ref", "--format=%(refname) %(objectname)", KEEP_PREFIX]
    ).stdout.decode()
    current = dict(line.split(" ", 1) for line in out.splitlines())
    present = _existing_commits(git_dir, sorted(set(wanted.values())))
    target = {KEEP_PREFIX + name: sha for name, sha in wanted.items() if sha in present}
    script = "".join(f"delete {ref}\n" for ref in current if ref not in target)
    script += "".join(
        f"update {ref} {sha}\n" for ref, sha in target.items() if current.get(ref) != sha
    )
    if script:
        run_git(git_dir, ["update-ref", "--stdin"], stdin=script.encode())
    return len(target)


def _existing_commits(git_dir: Path, shas: Sequence[str]) -> set[str]:
    if not shas:
        return set()
    request = "".join(f"{sha}\n" for sha in shas).encode()
    out = run_git(
        git_dir, ["cat-file", "--batch-check=%(objectname) %(objecttype)"], stdin=request
    ).stdout.decode()
    return {line.split(" ")[0] for line in out.splitlines() if line.endswith(" commit")}


def repack(git_dir: Path, *, timeout: float | None = None) -> int:
    """Pack every reachable object into one pack, drop what no ref reaches (loose objects
    after :data:`PRUNE_GRACE`), forget removed worktrees. Hold :func:`exclusive_use`.
    Returns the bytes freed."""
    before = disk_usage(git_dir)
    quiet = ["-c", "gc.auto=0", "-c", "core.logAllRefUpdates=false"]
    run_git(
        git_dir, [*quiet, "repack", "-a", "-d", "-q", "--no-write-bitmap-index"], timeout=timeout
    )
    run_git(git_dir, [*quiet, "prune", f"--expire={PRUNE_GRACE}"], timeout=timeout)
    run_git(git_dir, ["worktree", "prune"], timeout=timeout)
    (git_dir / PRUNED_STAMP).touch()
    return max(0, before - disk_usage(git_dir))
