"""A head's own patch, computed with git, for carrying an approval to a new head
(:mod:`stackbot.domain.approval_carry` says what "own" and "the same patch" mean).

- :func:`own_patch`: the non-merge commits of a head that no trusted tip reaches, oldest first,
  each with its ``git patch-id --verbatim`` and author; a merge that is not git's automatic
  merge of its parents, a root commit, a missing head or too many commits make it unknown.
- :func:`replays_exactly`: whether a new commit's tree is what cherry-picking the approved
  commit onto the new commit's parent writes (a three-way merge with the approved commit's
  parent as the base, in-process, as the restack does).
"""

from __future__ import annotations

from collections.abc import Sequence

from stackbot.adapters.git import GitError, GitRepository
from stackbot.adapters.git_replay import merge_with_base, read_commit
from stackbot.domain.approval_carry import MAX_OWN_COMMITS, OwnCommit, OwnPatch
from stackbot.domain.types import Sha


def own_patch(
    repo: GitRepository, head: str, exclude: Sequence[str], *, limit: int = MAX_OWN_COMMITS
) -> OwnPatch:
    """The own commits of ``head``: reachable from it, from none of ``exclude`` (tips the
    mirror does not hold are ignored)."""
    if repo.try_rev_parse(head) is None:
        return OwnPatch(unknown=f"`{head[:7]}` is not in the mirror")
    stdin = "\n".join([head, *(f"^{sha}" for sha in exclude)]) + "\n"
    try:
        listed = repo.git(
            "rev-list", "--reverse", "--topo-order", "--parents", "--ignore-missing", "--stdin",
            stdin=stdin.encode(),
        )  # fmt: skip
    except GitError as error:
        return OwnPatch(unknown=f"git rev-list failed: {error.stderr[-200:]}")
    commits: list[Sha] = []
    for line in listed.stdout.decode().splitlines():
        sha, *parents = line.split()
        if not parents:
            return OwnPatch(unknown=f"`{sha[:7]}` is a root commit")
        if len(parents) > 1:
            if not _automatic_merge(repo, Sha(sha), [Sha(p) for p in parents]):
                return OwnPatch(unknown=f"merge `{sha[:7]}` has changes of its own")
            continue
        commits.append(Sha(sha))
        if len(commits) > limit:
            return OwnPatch(unknown=f"more than {limit} own commits")
    ids = _patch_ids(repo, commits)
    own = []
    for sha in commits:
        author = read_commit(repo, sha).author.rsplit(" ", 2)[0]  # less the date and zone
        own.append(OwnCommit(sha, ids.get(sha, ""), author))
    return OwnPatch(tuple(own))


def replays_exactly(repo: GitRepository, approved: str, new: str) -> bool:
    """Whether ``new`` is exactly ``approved`` cherry-picked onto ``new``'s parent."""
    old, now = read_commit(repo, Sha(approved)), read_commit(repo, Sha(new))
    if len(old.parents) != 1 or len(now.parents) != 1:
        return False
    picked = merge_with_base(
        repo, repo.tree_of(old.parents[0]), repo.tree_of(now.parents[0]), old.tree
    )
    return picked.clean and picked.tree == now.tree


def _automatic_merge(repo: GitRepository, merge: Sha, parents: Sequence[Sha]) -> bool:
    if len(parents) != 2:
        return False  # an octopus: not checked, not carried
    result = repo.merge_tree(parents[0], parents[1])
    return result.clean and result.tree == repo.tree_of(merge)


def _patch_ids(repo: GitRepository, commits: Sequence[Sha]) -> dict[str, str]:
    """``{commit: patch-id}``; a commit that changes nothing has none. Whitespace is kept
    (``--verbatim``), and binary changes are written out in full (``--binary``)."""
    if not commits:
        return {}
    diffs = repo.git(
        "diff-tree", "--stdin", "-p", "--binary", "--full-index", "--no-renames", "--no-color",
        "--no-ext-diff",
        stdin=("\n".join(commits) + "\n").encode(),
    )  # fmt: skip
    ids = repo.git("patch-id", "--verbatim", stdin=diffs.stdout).stdout.decode()
    found: dict[str, str] = {}
    for line in ids.splitlines():
        patch_id, _, commit = line.partition(" ")
        found[commit] = patch_id
    return found
