"""Replaying commits without a checkout: three-way merges with a chosen base, commits that keep
their author and message, the child's own commits, patch-ids and the hunks of a conflicted file.

git 2.39's ``merge-tree --write-tree`` takes two commits and finds their merge base itself
(``--merge-base`` came in 2.40). A cherry-pick of C onto X is the merge of X and C *with C's
parent P as the base*, so :func:`merge_with_base` writes three throwaway commits in-process — B
with P's tree and no parent, then X' and C' with X's and C's trees, each with B as its only
parent — and merges X' and C': their one merge base is B, so git merges exactly
``P → C`` into ``X``. The throwaway commits are loose objects nothing refers to (gc drops them);
no index, worktree or ref is touched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from stackbot.adapters.git import GitRepository
from stackbot.adapters.git_objects import MergeTreeResult
from stackbot.domain.types import Sha, TreeSha


@dataclass(frozen=True)
class CommitInfo:
    """What a replay keeps of a commit: its author line (name, email, date and zone as
    written), its message, and the headers that must travel with the message."""

    sha: Sha
    tree: TreeSha
    parents: tuple[Sha, ...]
    author: str  # "Name <email> 1700000000 +0100"
    committer: str
    message: str
    encoding: str | None = None

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0].strip()

    @property
    def author_name(self) -> str:
        return self.author.split(" <", 1)[0]


def read_commit(repo: GitRepository, sha: Sha) -> CommitInfo:
    data = repo.read_object(sha)
    header, _, message = data.partition(b"\n\n")
    fields: dict[str, str] = {}
    parents: list[Sha] = []
    for line in header.decode(errors="surrogateescape").split("\n"):
        if line.startswith(" "):  # the continuation of a multi-line header (gpgsig, mergetag)
            continue
        key, _, value = line.partition(" ")
        if key == "parent":
            parents.append(Sha(value))
        else:
            fields.setdefault(key, value)
    encoding = fields.get("encoding")
    return CommitInfo(
        sha=sha,
        tree=TreeSha(fields["tree"]),
        parents=tuple(parents),
        author=fields["author"],
        committer=fields["committer"],
        message=message.decode(encoding or "utf-8", errors="surrogateescape"),
        encoding=encoding,
    )


def write_replayed(
    repo: GitRepository, original: CommitInfo, tree: TreeSha, parent: Sha, committer: str
) -> Sha:
    """A commit with ``original``'s author line and message on ``tree`` with one parent.
    The committer is stackbot, dated as the original committer was, so the same replay gives
    the same SHAs every time (a retried task writes nothing new). Signatures are dropped: they
    signed another commit."""
    date = original.committer.rsplit(" ", 2)
    stamp = " ".join(date[-2:]) if len(date) == 3 else "0 +0000"
    lines = [f"tree {tree}", f"parent {parent}", f"author {original.author}"]
    lines.append(f"committer {committer} {stamp}")
    if original.encoding:
        lines.append(f"encoding {original.encoding}")
    body = original.message.encode(original.encoding or "utf-8", errors="surrogateescape")
    data = "\n".join(lines).encode(errors="surrogateescape") + b"\n\n" + body
    return repo.write_object(b"commit", data)


def merge_with_base(
    repo: GitRepository, base: TreeSha, ours: TreeSha, theirs: TreeSha
) -> MergeTreeResult:
    """The three-way merge of the trees ``ours`` and ``theirs`` from ``base``."""
    root = repo.commit_tree(base, [], "stackbot: merge base (throwaway)", timestamp=0)
    ours_commit = repo.commit_tree(ours, [root], "stackbot: ours (throwaway)", timestamp=0)
    theirs_commit = repo.commit_tree(theirs, [root], "stackbot: theirs (throwaway)", timestamp=0)
    return repo.merge_tree(ours_commit, theirs_commit)


def own_commits(repo: GitRepository, head: Sha, old_base: Sha) -> tuple[list[Sha], list[Sha]]:
    """(the commits of ``head`` not reachable from ``old_base``, oldest first, without
    merges; the merge commits among them, which a replay leaves out as ``git rebase`` does)."""
    listed = repo.git(
        "rev-list", "--reverse", "--topo-order", "--parents", f"^{old_base}", head, "--"
    )
    commits: list[Sha] = []
    merges: list[Sha] = []
    for line in listed.stdout.decode().splitlines():
        sha, *parents = line.split()
        (merges if len(parents) > 1 else commits).append(Sha(sha))
    return commits, merges


def patch_ids(
    repo: GitRepository, exclude: Sha, include: Sha, *, limit: int | None = None
) -> dict[str, Sha]:
    """``{patch-id: commit}`` for the non-merge commits of ``include`` not in ``exclude``, the
    newest ``limit`` of them (``git patch-id --stable``: the same change gives the same id
    whatever its context)."""
    count = [f"--max-count={limit}"] if limit else []
    log = repo.git(
        "log", "--no-merges", *count, "-p", "--format=commit %H", f"^{exclude}", include, "--"
    )
    if not log.stdout.strip():
        return {}
    ids = repo.git("patch-id", "--stable", stdin=log.stdout).stdout.decode()
    found: dict[str, Sha] = {}
    for line in ids.splitlines():
        patch_id, _, commit = line.partition(" ")
        found.setdefault(patch_id, Sha(commit))
    return found


@dataclass(frozen=True)
class ConflictHunk:
    """One ``<<<<<<< … >>>>>>>`` block of a conflicted file in a merge-tree result."""

    line: int  # 1-based, in the conflicted file
    ours: tuple[str, ...]
    theirs: tuple[str, ...]


_MARK = re.compile(r"^(<{7}|\|{7}|={7}|>{7})( |$)")


def conflict_hunks(repo: GitRepository, tree: TreeSha, path: str) -> tuple[ConflictHunk, ...]:
    """The conflict blocks merge-tree wrote into ``path`` (none for a binary file or a
    modify/delete conflict, which leave no markers)."""
    blob = repo.blob_at(tree, path)
    if blob is None:
        return ()
    text = repo.read_blob(blob).decode(errors="replace").split("\n")
    hunks: list[ConflictHunk] = []
    start, side = 0, ""
    ours: list[str] = []
    theirs: list[str] = []
    for number, line in enumerate(text, start=1):
        mark = _MARK.match(line)
        if mark and mark.group(1).startswith("<"):
            start, side, ours, theirs = number, "ours", [], []
        elif mark and mark.group(1).startswith("|") and side == "ours":
            side = "base"  # diff3 / zdiff3 style: the base's lines are not a side
        elif mark and mark.group(1).startswith("=") and side in ("ours", "base"):
            side = "theirs"
        elif mark and mark.group(1).startswith(">") and side == "theirs":
            hunks.append(ConflictHunk(start, tuple(ours), tuple(theirs)))
            side = ""
        elif side == "ours":
            ours.append(line)
        elif side == "theirs":
            theirs.append(line)
    return tuple(hunks)


def write_commit(
    repo: GitRepository,
    tree: TreeSha,
    parents: Sequence[Sha],
    author: str,
    committer: str,
    message: str,
) -> Sha:
    """A commit with the author and committer lines as given (``Name <email> time zone``)."""
    lines = [f"tree {tree}", *(f"parent {p}" for p in parents)]
    lines += [f"author {author}", f"committer {committer}"]
    data = "\n".join(lines) + "\n\n" + message
    return repo.write_object(b"commit", data.encode(errors="surrogateescape"))


@dataclass(frozen=True)
class FileLines:
    """What a diff does to one path: the lines it removes and adds (no context)."""

    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    binary: bool = False


def line_changes(repo: GitRepository, old: str, new: str) -> dict[str, FileLines]:
    """``{path: FileLines}`` for every path whose content differs between two trees (or
    commits), renames not followed: one ``git diff-tree -p -U0`` for the whole change."""
    done = repo.git(
        "-c", "core.quotePath=false", "diff-tree", "-r", "-p", "-U0", "--no-color",
        "--no-renames", "--no-ext-diff", "--end-of-options", old, new,
    )  # fmt: skip
    changes: dict[str, FileLines] = {}
    path: str | None = None
    removed: list[str] = []
    added: list[str] = []
    binary = False

    def close() -> None:
        if path is not None:
            changes[path] = FileLines(tuple(removed), tuple(added), binary)

    in_hunk = False
    for raw in done.stdout.decode(errors="surrogateescape").split("\n"):
        if raw.startswith("diff --git "):
            close()
            rest = raw[len("diff --git ") :]
            path = rest[2 : 2 + (len(rest) - 5) // 2]
            removed, added, binary, in_hunk = [], [], False, False
        elif raw.startswith("@@"):
            in_hunk = True
        elif in_hunk and raw.startswith("-"):
            removed.append(raw[1:])
        elif in_hunk and raw.startswith("+"):
            added.append(raw[1:])
        elif raw.startswith("Binary files ") and not in_hunk:
            binary = True
    close()
    return changes


def renames(repo: GitRepository, old: str, new: str) -> dict[str, str]:
    """``{old path: new path}`` for the files git sees renamed between two trees."""
    done = repo.git(
        "diff-tree", "-r", "-M", "--name-status", "-z", "--no-ext-diff", "--end-of-options",
        old, new,
    )  # fmt: skip
    fields = done.stdout.decode(errors="surrogateescape").split("\0")
    found: dict[str, str] = {}
    i = 0
    while i < len(fields) and fields[i]:
        status = fields[i]
        if status.startswith(("R", "C")):
            if status.startswith("R"):
                found[fields[i + 1]] = fields[i + 2]
            i += 3
        else:
            i += 2
    return found


def short_sha(repo: GitRepository, sha: Sha) -> str:
    """The shortest unambiguous abbreviation of at least 7 digits."""
    return repo.git("rev-parse", "--short=7", "--end-of-options", sha).stdout.decode().strip()
