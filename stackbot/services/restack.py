"""Restack a child PR onto a new base: replay its own commits with ``git merge-tree``, no
checkout (see :mod:`stackbot.domain.restack` for what is decided and reported)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stackbot.adapters.git import GitRepository
from stackbot.adapters.git_replay import (
    merge_with_base,
    own_commits,
    patch_ids,
    read_commit,
    write_replayed,
)
from stackbot.config import DEFAULT_ALLOWLIST_PATH
from stackbot.domain.integration import StepOutcome, split_conflicts, step_outcome
from stackbot.domain.restack import (
    FileSurprise,
    ReplayedCommit,
    ReplayOutcome,
    RestackResult,
    file_surprises,
)
from stackbot.domain.types import PrNumber, Sha, TreeSha
from stackbot.services.tree_allowlist import TreeAllowlist

Progress = Callable[[str], None]
COMMITTER = "stackbot <stackbot@users.noreply.localhost>"
# Commits compared on each side when looking for ghosts: a squash-merged parent is among the
# newest commits of the base, and a PR of more commits than this is no stack child.
GHOST_SCAN_LIMIT = 500


@dataclass(frozen=True)
class RestackRequest:
    pr: PrNumber
    head_ref: str
    old_base_ref: str
    onto_ref: str
    generated_files: Sequence[str] = (DEFAULT_ALLOWLIST_PATH,)


def restack_ref(pr: PrNumber) -> str:
    return f"refs/stackbot/restack/{pr}"


def ghost_commits(repo: GitRepository, head: Sha, base: Sha) -> tuple[Sha, ...]:
    """The commits of ``head`` not in ``base`` whose change (patch-id) ``base`` already has
    under another SHA — a squash- or rebase-merged parent's commits still in the child."""
    mine = patch_ids(repo, base, head, limit=GHOST_SCAN_LIMIT)
    if not mine:
        return ()
    theirs = patch_ids(repo, head, base, limit=GHOST_SCAN_LIMIT)
    return tuple(commit for patch_id, commit in mine.items() if patch_id in theirs)


def restack(
    repo: GitRepository,
    request: RestackRequest,
    *,
    allowlist: TreeAllowlist | None = None,
    progress: Progress | None = None,
) -> RestackResult:
    """Replay the request's own commits onto its new base; every ref is resolved first (an
    unknown one is BadInput before anything is written). On a conflict nothing is written
    beyond unreferenced objects, and the result names the commit and its paths."""
    say = progress or (lambda _: None)
    head, old_base, onto = repo.rev_parse_many(
        [request.head_ref, request.old_base_ref, request.onto_ref]
    )
    commits, merges = own_commits(repo, head, old_base)
    say(f"#{request.pr}: {len(commits)} own commits to replay onto {request.onto_ref}")
    generated = frozenset(request.generated_files)
    tracker = allowlist or TreeAllowlist(repo)
    current, tree = onto, repo.tree_of(onto)
    replayed: list[ReplayedCommit] = []
    trees_after: list[tuple[Sha, TreeSha]] = []
    failed = False
    for position, sha in enumerate(commits, start=1):
        info = read_commit(repo, sha)
        if failed:
            replayed.append(
                ReplayedCommit(sha, info.subject, info.author_name, ReplayOutcome.NOT_REPLAYED)
            )
            continue
        parent_tree = repo.tree_of(info.parents[0]) if info.parents else _empty_tree(repo)
        merged = merge_with_base(repo, parent_tree, tree, info.tree)
        outcome = step_outcome(merged.conflicts, generated)
        if outcome is StepOutcome.CONFLICT:
            real, _ = split_conflicts(merged.conflicts, generated)
            replayed.append(
                ReplayedCommit(
                    sha, info.subject, info.author_name, ReplayOutcome.CONFLICT, conflicts=real
                )
            )
            failed = True
            say(f"[{position}/{len(commits)}] {sha[:9]} {info.subject[:50]}: conflict")
            continue
        new_tree, note, kind = merged.tree, None, ReplayOutcome.CLEAN
        if outcome is StepOutcome.RESOLVED:
            rewrite = tracker.rewrite_merge(merged.tree, tree, info.tree)
            if rewrite is not None:
                new_tree = rewrite.tree
            kind = ReplayOutcome.RESOLVED
            note = f"{', '.join(c.path for c in merged.conflicts)} regenerated on the replayed tree"
        if new_tree == tree:
            replayed.append(
                ReplayedCommit(
                    sha,
                    info.subject,
                    info.author_name,
                    ReplayOutcome.ALREADY_IN_BASE,
                    note="its change is already on the new base; left out",
                )
            )
        else:
            current = write_replayed(repo, info, new_tree, current, COMMITTER)
            tree = new_tree
            replayed.append(
                ReplayedCommit(sha, info.subject, info.author_name, kind, current, note=note)
            )
            trees_after.append((sha, tree))
        say(
            f"[{position}/{len(commits)}] {sha[:9]} {info.subject[:50]}: {replayed[-1].outcome.value}"
        )
    surprises = _surprises(repo, onto, head, tree, trees_after) if not failed else ()
    ref_name = None
    if not failed:
        ref_name = restack_ref(request.pr)
        repo.update_refs({ref_name: current})
    return RestackResult(
        pr=request.pr,
        head=head,
        old_base=old_base,
        onto=onto,
        onto_ref=request.onto_ref,
        commits=tuple(replayed),
        new_head=None if failed else current,
        ref_name=ref_name,
        surprises=surprises,
        merges_left_out=tuple(merges),
        ghosts=ghost_commits(repo, head, onto),
    )


def _surprises(
    repo: GitRepository,
    onto: Sha,
    head: Sha,
    replay_tree: TreeSha,
    trees_after: Sequence[tuple[Sha, TreeSha]],
) -> tuple[FileSurprise, ...]:
    """Compare the replay's tree with a three-way merge of the branch into the new base."""
    merged = repo.merge_tree(onto, head)
    changed = repo.changed_paths(replay_tree, merged.tree)
    replay_has = {p: repo.blob_at(replay_tree, p) is not None for p in changed}
    merge_has = {p: repo.blob_at(merged.tree, p) is not None for p in changed}
    conflicts = {c.path: c.kind for c in merged.conflicts}
    firsts: dict[str, Sha | None] = {}
    for path in (p for p in changed if replay_has[p] != merge_has[p]):
        firsts[path] = None
        for original, tree in trees_after:
            if (repo.blob_at(tree, path) is not None) == replay_has[path]:
                firsts[path] = original
                break
    return file_surprises(replay_has, merge_has, conflicts, firsts)


def _empty_tree(repo: GitRepository) -> TreeSha:
    return TreeSha(repo.write_object(b"tree", b""))
