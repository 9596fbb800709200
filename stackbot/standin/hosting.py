"""Git hosting for the stand-in: bare repositories on disk, written like GitHub's servers would.

This module runs git itself, a deliberate exception to "only the git adapter runs git": it plays
GitHub's server side (pushes, PR refs, merge commits), which stackbot's git adapter then fetches
from like from any remote. Only the stand-in imports it.

Commits are made with plumbing (a temporary index, ``write-tree``, ``commit-tree``), never in a
working tree, so many PR branches can be built quickly and concurrently.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

GIT_TIMEOUT_S = 120.0
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


class HostingError(RuntimeError):
    """A git command failed; the message carries its stderr."""


class MergeConflict(HostingError):
    def __init__(self, message: str, paths: list[str]) -> None:
        super().__init__(message)
        self.paths = paths


@dataclass(frozen=True)
class Person:
    name: str
    email: str
    date: str  # ISO 8601 with offset, as git prints it


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    tree: str
    parents: tuple[str, ...]
    author: Person
    committer: Person
    message: str


@dataclass(frozen=True)
class FileChange:
    filename: str
    status: str  # added | removed | modified | renamed | copied | changed
    additions: int
    deletions: int
    blob_sha: str | None
    previous_filename: str | None = None


_STATUS = {
    "A": "added",
    "D": "removed",
    "M": "modified",
    "R": "renamed",
    "C": "copied",
    "T": "changed",
}


def git(
    repo: Path,
    *args: str,
    input_bytes: bytes | None = None,
    env: dict[str, str] | None = None,
    ok_codes: tuple[int, ...] = (0,),
) -> subprocess.CompletedProcess[bytes]:
    """Run git against a bare repository; failures raise HostingError with stderr."""
    full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **(env or {})}
    result = subprocess.run(
        ["git", "--git-dir", str(repo), *args],
        input=input_bytes,
        capture_output=True,
        env=full_env,
        timeout=GIT_TIMEOUT_S,
        check=False,
    )
    if result.returncode not in ok_codes:
        stderr = result.stderr.decode(errors="replace").strip()
        raise HostingError(f"git {' '.join(args[:3])} failed in {repo}: {stderr}")
    return result


def _out(repo: Path, *args: str) -> str:
    return git(repo, *args).stdout.decode().strip()


def init_bare(path: Path, default_branch: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["git", "init", "--bare", "--quiet", f"--initial-branch={default_branch}", str(path)],
        check=True,
        capture_output=True,
    )
    # A stand-in server has no user config; keep pushes into it simple.
    git(path, "config", "receive.denyCurrentBranch", "ignore")


def import_branches(bare: Path, source: Path | str) -> None:
    """Copy every branch and tag of a local repository (path or URL) into the bare one."""
    git(
        bare,
        "fetch",
        "--quiet",
        str(source),
        "+refs/heads/*:refs/heads/*",
        "+refs/tags/*:refs/tags/*",
    )


def resolve(bare: Path, rev: str) -> str | None:
    result = git(
        bare, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", ok_codes=(0, 1, 128)
    )
    sha = result.stdout.decode().strip()
    return sha if result.returncode == 0 and sha else None


def update_ref(bare: Path, ref: str, sha: str) -> None:
    git(bare, "update-ref", ref, sha)


def delete_ref(bare: Path, ref: str) -> None:
    git(bare, "update-ref", "-d", ref)


def list_refs(bare: Path, prefix: str = "refs/") -> dict[str, str]:
    text = _out(bare, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    return dict(line.split(" ", 1) for line in text.splitlines() if line)


def is_ancestor(bare: Path, ancestor: str, descendant: str) -> bool:
    result = git(bare, "merge-base", "--is-ancestor", ancestor, descendant, ok_codes=(0, 1))
    return result.returncode == 0


def merge_base(bare: Path, a: str, b: str) -> str | None:
    result = git(bare, "merge-base", a, b, ok_codes=(0, 1))
    sha = result.stdout.decode().strip()
    return sha or None


def commit_files(
    bare: Path,
    *,
    parent: str | None,
    files: Mapping[str, str | bytes | None],
    message: str,
    author: tuple[str, str],
    timestamp: float,
    extra_parents: tuple[str, ...] = (),
) -> str:
    """Write a commit whose tree is ``parent``'s with ``files`` changed (None deletes a path)."""
    with tempfile.TemporaryDirectory(prefix="standin-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(bare, "read-tree", parent or EMPTY_TREE, env=env)
        for path, content in sorted(files.items()):
            if content is None:
                git(bare, "update-index", "--force-remove", "--", path, env=env)
                continue
            data = content.encode() if isinstance(content, str) else content
            blob = (
                git(bare, "hash-object", "-w", "--stdin", input_bytes=data).stdout.decode().strip()
            )
            git(bare, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
        tree = git(bare, "write-tree", env=env).stdout.decode().strip()
    return commit_tree(
        bare,
        tree,
        (parent, *extra_parents) if parent else extra_parents,
        message,
        author,
        timestamp,
    )


def commit_tree(
    bare: Path,
    tree: str,
    parents: tuple[str, ...],
    message: str,
    author: tuple[str, str],
    timestamp: float,
) -> str:
    name, email = author
    stamp = f"{int(timestamp)} +0000"
    env = {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
        "GIT_COMMITTER_DATE": stamp,
    }
    args = ["commit-tree", tree]
    for parent in parents:
        args += ["-p", parent]
    return git(bare, *args, input_bytes=message.encode(), env=env).stdout.decode().strip()


def merge(
    bare: Path,
    base: str,
    head: str,
    *,
    message: str,
    author: tuple[str, str],
    timestamp: float,
    squash: bool = False,
) -> str:
    """A real two-parent merge commit of ``head`` into ``base`` (``git merge-tree``); with
    ``squash``, one commit on ``base`` with the merged tree (GitHub's squash merge)."""
    result = git(bare, "merge-tree", "--write-tree", "--name-only", base, head, ok_codes=(0, 1))
    lines = result.stdout.decode().splitlines()
    if result.returncode == 1:
        paths = [
            line for line in lines[1:] if line and not line.startswith(("Auto-merging", "CONFLICT"))
        ]
        raise MergeConflict(f"merging {head[:12]} into {base[:12]} conflicts", sorted(set(paths)))
    parents = (base,) if squash else (base, head)
    return commit_tree(bare, lines[0].strip(), parents, message, author, timestamp)


def rebase(
    bare: Path,
    base: str,
    head: str,
    *,
    committer: tuple[str, str],
    timestamp: float,
) -> str:
    """GitHub's rebase merge: each commit of ``head`` not on ``base`` replayed onto ``base`` in
    order (authors and messages kept, the merger as committer); the new tip. A conflicting step
    raises :class:`MergeConflict`.

    Each step's tree is the merge of the replayed tip with the original commit from their
    merge base (this git's ``merge-tree`` takes no ``--merge-base``): the earlier commits are on
    both sides alike, so the step adds exactly the commit's own change."""
    tip = base
    for commit in commits_between(bare, merge_base(bare, base, head), head):
        if len(commit.parents) > 1:
            continue  # GitHub drops merge commits when it rebases
        result = git(
            bare, "merge-tree", "--write-tree", "--name-only", tip, commit.sha, ok_codes=(0, 1)
        )
        lines = result.stdout.decode().splitlines()
        if result.returncode == 1:
            paths = [
                line
                for line in lines[1:]
                if line and not line.startswith(("Auto-merging", "CONFLICT"))
            ]
            raise MergeConflict(f"replaying {commit.sha[:12]} conflicts", sorted(set(paths)))
        tip = _replay_commit(bare, lines[0].strip(), tip, commit, committer, timestamp)
    return tip


def _replay_commit(
    bare: Path,
    tree: str,
    parent: str,
    original: CommitInfo,
    committer: tuple[str, str],
    timestamp: float,
) -> str:
    env = {
        "GIT_AUTHOR_NAME": original.author.name,
        "GIT_AUTHOR_EMAIL": original.author.email,
        "GIT_AUTHOR_DATE": original.author.date,
        "GIT_COMMITTER_NAME": committer[0],
        "GIT_COMMITTER_EMAIL": committer[1],
        "GIT_COMMITTER_DATE": f"{int(timestamp)} +0000",
    }
    args = ("commit-tree", tree, "-p", parent)
    return git(bare, *args, input_bytes=original.message.encode(), env=env).stdout.decode().strip()


_FORMAT = "%H%x00%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B%x01"


def _parse_commits(text: str) -> list[CommitInfo]:
    found = []
    for record in text.split("\x01"):
        record = record.lstrip("\n")
        if not record:
            continue
        sha, tree, parents, an, ae, ad, cn, ce, cd, body = record.split("\x00", 9)
        found.append(
            CommitInfo(
                sha=sha,
                tree=tree,
                parents=tuple(parents.split()),
                author=Person(an, ae, ad),
                committer=Person(cn, ce, cd),
                message=body.rstrip("\n"),
            )
        )
    return found


def commit_info(bare: Path, sha: str) -> CommitInfo:
    return _parse_commits(_out(bare, "log", "-1", f"--format={_FORMAT}", sha) + "\x01")[0]


def commits_between(bare: Path, base: str | None, head: str) -> list[CommitInfo]:
    """Commits reachable from ``head`` but not ``base``, oldest first (GitHub's PR commit list)."""
    spec = [head] if base is None else [head, f"^{base}"]
    text = git(bare, "log", "--topo-order", "--reverse", f"--format={_FORMAT}", *spec).stdout
    return _parse_commits(text.decode())


def count_between(bare: Path, base: str, head: str) -> int:
    return int(_out(bare, "rev-list", "--count", head, f"^{base}"))


def changed_files(bare: Path, base: str, head: str) -> list[FileChange]:
    """What ``head`` changes relative to ``base``: status, blob and line counts per file."""
    raw = git(bare, "diff", "--raw", "-z", "-M", "--no-abbrev", base, head).stdout.decode()
    numstat = git(bare, "diff", "--numstat", "-z", "-M", base, head).stdout.decode()
    counts = _parse_numstat(numstat)
    changes = []
    fields = raw.split("\x00")
    i = 0
    while i < len(fields) - 1:
        meta = fields[i].lstrip(":").split()
        status_letter = meta[4][0]
        if status_letter in "RC":
            old, new = fields[i + 1], fields[i + 2]
            i += 3
        else:
            old, new = None, fields[i + 1]
            i += 2
        added, deleted = counts.get(new, (0, 0))
        blob = None if status_letter == "D" else meta[3]
        changes.append(
            FileChange(new, _STATUS.get(status_letter, "changed"), added, deleted, blob, old)
        )
    return changes


def _parse_numstat(text: str) -> dict[str, tuple[int, int]]:
    counts: dict[str, tuple[int, int]] = {}
    fields = text.split("\x00")
    i = 0
    while i < len(fields) - 1:
        added, deleted, path = fields[i].split("\t", 2)
        if path == "":  # a rename: the old and new names follow
            path = fields[i + 2]
            i += 3
        else:
            i += 1
        counts[path] = (int(added) if added != "-" else 0, int(deleted) if deleted != "-" else 0)
    return counts
