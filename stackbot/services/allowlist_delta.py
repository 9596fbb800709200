"""Regenerate a merged tree's allowlist, handing the domain only the files whose inputs differ.

The domain's :func:`~stackbot.domain.allowlist.regenerate` works file by file (DESIGN.md: "per
file, the tree's reads capped at the multiset union of both sides' entries"). A file that both
sides list exactly as the merged tree reads it comes out unchanged, with nothing new and nothing
stale. In an integration step that is nearly every file, and ``regenerate`` costs time in
proportion to all the entries, so only the other files go through it. The result is the same
value; ``tests/integration/test_allowlist_delta.py`` compares the two on generated inputs.
"""

from __future__ import annotations

from stackbot.domain.allowlist import (
    Allowlist,
    Generation,
    Regeneration,
    TreeScan,
    detect_generation,
    regenerate,
    render_allowlist,
)


def _written_by(side: Allowlist, generation: Generation) -> bool:
    return detect_generation(side, generation) is generation


def regenerate_by_file(
    *,
    ours: Allowlist | None,
    theirs: Allowlist | None,
    tree: TreeScan,
    generation: Generation,
    comment: str,
    sides_checked: bool = False,
) -> Regeneration:
    """What ``regenerate`` returns for the same arguments (and raises what it raises).
    ``sides_checked``: the caller knows both sides were written by ``generation``'s checker
    (detecting it reads every entry, and a run knows it from the step before)."""
    sides = [side for side in (ours, theirs) if side is not None]
    if not sides or not (sides_checked or all(_written_by(side, generation) for side in sides)):
        # A side of the other generation is left out whole: the domain decides that.
        return regenerate(
            ours=ours, theirs=theirs, tree=tree, generation=generation, comment=comment
        )
    reads = tree.reads
    unparsed = tree.unparsed
    paths = set(reads) | set(unparsed) | {path for side in sides for path in side.allowed}
    settled = {
        path
        for path in paths
        if path not in unparsed
        and all(side.allowed.get(path, ()) == reads.get(path, ()) for side in sides)
    }
    open_paths = paths - settled

    def only_open(side: Allowlist | None) -> Allowlist | None:
        if side is None:
            return None
        return Allowlist(
            side.comment, {p: e for p, e in side.allowed.items() if p in open_paths}, side.total
        )

    open_tree = TreeScan(
        tree.generation,
        {path: outcome for path, outcome in tree.outcomes.items() if path in open_paths},
        tree.parsed,
        tree.cache_hits,
        tree.parser,
    )
    partial = regenerate(
        ours=only_open(ours),
        theirs=only_open(theirs),
        tree=open_tree,
        generation=generation,
        comment=comment,
    )
    written = {path: list(reads[path]) for path in settled if path in reads}
    written.update({path: list(entries) for path, entries in partial.allowlist.allowed.items()})
    allowlist = Allowlist.from_reads(comment, written)
    return Regeneration(
        generation=generation,
        allowlist=allowlist,
        data=render_allowlist(allowlist),
        new_reads=partial.new_reads,
        stale=partial.stale,
        unparsed=unparsed,
        ignored_sides=partial.ignored_sides,
        total_before=sides[0].entry_count,
    )
