"""Port a PR's change onto another branch with ``git merge-tree``, no checkout, and write one
commit that says per file what was applied verbatim, adapted or already there (the decisions and
wording are :mod:`stackbot.domain.port`'s)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stackbot.adapters.git import GitRepository
from stackbot.adapters.git_replay import (
    FileLines,
    conflict_hunks,
    line_changes,
    merge_with_base,
    read_commit,
    renames,
    short_sha,
    write_commit,
)
from stackbot.config import DEFAULT_ALLOWLIST_PATH
from stackbot.domain.integration import describe_allowlist_change, split_conflicts
from stackbot.domain.port import (
    ConflictedFile,
    FileOutcome,
    LineChange,
    PortedFile,
    PortResult,
    classify_file,
    port_message,
)
from stackbot.domain.types import PrNumber
from stackbot.services.restack import COMMITTER
from stackbot.services.tree_allowlist import TreeAllowlist

Progress = Callable[[str], None]


@dataclass(frozen=True)
class PortRequest:
    pr: PrNumber
    head_ref: str
    upstream_base_ref: str
    onto_ref: str
    generated_files: Sequence[str] = (DEFAULT_ALLOWLIST_PATH,)


def port_ref(pr: PrNumber, onto_ref: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", onto_ref).strip("-.")[:100] or "branch"
    return f"refs/stackbot/port/{pr}/{slug}"


def port(
    repo: GitRepository,
    request: PortRequest,
    *,
    allowlist: TreeAllowlist | None = None,
    progress: Progress | None = None,
) -> PortResult:
    """Apply ``upstream base → head`` onto ``onto``. Every ref is resolved first (BadInput
    before anything is written); with a conflict no commit is written."""
    say = progress or (lambda _: None)
    base, head, onto = repo.rev_parse_many(
        [request.upstream_base_ref, request.head_ref, request.onto_ref]
    )
    base_tree, head_tree, onto_tree = (repo.tree_of(c) for c in (base, head, onto))
    say(f"#{request.pr}: merging {base[:9]}..{head[:9]} onto {request.onto_ref} ({onto[:9]})")
    merged = merge_with_base(repo, base_tree, onto_tree, head_tree)
    generated = frozenset(request.generated_files)
    real, _ = split_conflicts(merged.conflicts, generated)
    if real:
        conflicts = tuple(
            ConflictedFile(
                c,
                tuple(
                    (h.line, h.ours, h.theirs) for h in conflict_hunks(repo, merged.tree, c.path)
                ),
            )
            for c in real
        )
        return PortResult(
            request.pr,
            base,
            head,
            onto,
            request.onto_ref,
            (),
            conflicts,
            None,
            None,
            conflicted_tree=merged.tree,
        )
    tree = merged.tree
    tracker = allowlist or TreeAllowlist(repo)
    rewrite = tracker.rewrite_merge(tree, onto_tree, head_tree)
    if rewrite is not None:
        tree = rewrite.tree
    pr_lines = line_changes(repo, base_tree, head_tree)
    port_lines = line_changes(repo, onto_tree, tree)
    moved = renames(repo, base_tree, onto_tree)
    files: list[PortedFile] = []
    for path in sorted(pr_lines):
        if path in generated:
            note = (
                describe_allowlist_change(rewrite.change)
                if rewrite and path == tracker.path
                else None
            )
            files.append(PortedFile(path, FileOutcome.REGENERATED, note))
            continue
        branch_path = moved.get(path)
        ported = port_lines.get(branch_path or path)
        files.append(
            classify_file(
                path,
                _lines(pr_lines[path]),
                _lines(ported) if ported else None,
                branch_path=branch_path,
            )
        )
    if rewrite is not None and rewrite.change.rewritten and tracker.path not in pr_lines:
        note = f"{describe_allowlist_change(rewrite.change)} (the PR left it as it was)"
        files.append(PortedFile(tracker.path, FileOutcome.REGENERATED, note))
    info = read_commit(repo, head)
    message = port_message(
        pr=request.pr,
        subject=info.subject,
        onto_ref=request.onto_ref,
        onto_short=short_sha(repo, onto),
        base_short=short_sha(repo, base),
        head_short=short_sha(repo, head),
        files=tuple(files),
    )
    stamp = max(repo.commit_time(onto), repo.commit_time(head))
    commit = write_commit(repo, tree, [onto], info.author, f"{COMMITTER} {stamp} +0000", message)
    ref_name = port_ref(request.pr, request.onto_ref)
    repo.update_refs({ref_name: commit})
    say(f"#{request.pr}: port written as {commit[:9]} ({ref_name})")
    return PortResult(
        request.pr, base, head, onto, request.onto_ref, tuple(files), (), commit, message, ref_name
    )


def _lines(found: FileLines) -> LineChange:
    return LineChange(found.removed, found.added, found.binary)
