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


def patch_ids(repo: GitRepository, exclude: Sha, include: Sha) -> dict[str, Sha]:
    """``{patch-id: commit}`` for the non-merge commits of ``include`` not in ``exclude``
    (``git patch-id --stable``: the same change gives the same id whatever its context)."""
    log = repo.git("log", "--no-merges", "-p", "--format=commit %H", f"^{exclude}", include, "--")
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
