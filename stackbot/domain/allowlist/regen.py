"""Rewrite the allowlist of a merged tree as that tree's checker would accept it, and check one.

The allowlist conflicts in nearly every merge of the ``parallel_state`` series and its ``total``
drifts, so stackbot never merges it: it regenerates it from the merged tree and both sides'
files (DESIGN.md, "Facts about the target repository").
"""

from __future__ import annotations

from collections import Counter

from stackbot.domain.allowlist.model import (
    Allowlist,
    AllowlistFormatError,
    FileCounts,
    Generation,
    capped_counts,
    detect_generation,
    excess_counts,
    parse_entry,
    render_allowlist,
    union_counts,
)
from stackbot.domain.allowlist.reports import AllowlistCheck, EntryTally, Regeneration
from stackbot.domain.allowlist.tree_scan import (
    LocalScanner,
    MemoryScanCache,
    ScanCache,
    Scanner,
    TreeReads,
    TreeScan,
    scan_cache_key,
    scan_tree,
)

__all__ = [
    "AllowlistCheck",
    "EntryTally",
    "LocalScanner",
    "MemoryScanCache",
    "Regeneration",
    "ScanCache",
    "Scanner",
    "TreeReads",
    "TreeScan",
    "check",
    "choose_comment",
    "regenerate",
    "scan_cache_key",
    "scan_tree",
]


def _tree_counts(tree: TreeScan) -> dict[str, Counter[str]]:
    return {path: Counter(entries) for path, entries in tree.reads.items()}


def _without_key(entry: str) -> str:
    return entry.split(":", 1)[1]


def _ignoring_lines(counts: FileCounts) -> dict[str, Counter[str]]:
    """Per file, ``KIND:DETAIL`` counts: the first generation's entries without line numbers."""
    return {
        path: Counter(_without_key(entry) for entry in entries.elements())
        for path, entries in counts.items()
    }


def _lines_of(tree: TreeScan, path: str, entry: str, *, keyed: bool) -> tuple[int, ...]:
    outcome = tree.outcomes.get(path)
    if outcome is None:
        return ()
    pairs = zip(outcome.entries, outcome.lines, strict=True)
    return tuple(sorted(n for e, n in pairs if (e if keyed else _without_key(e)) == entry))


def _tallies(counts: FileCounts, tree: TreeScan, *, keyed: bool) -> tuple[EntryTally, ...]:
    """Records for ``counts``, whose entries are ``KEY:KIND:DETAIL`` when ``keyed`` and
    ``KIND:DETAIL`` otherwise."""
    tallies = []
    for path, entries in counts.items():
        for entry, count in entries.items():
            parsed = parse_entry(entry if keyed else f"-:{entry}")
            lines = _lines_of(tree, path, entry, keyed=keyed)
            key = parsed.key if keyed else None
            tallies.append(EntryTally(path, key, parsed.kind, parsed.detail, count, lines))
    return tuple(sorted(tallies, key=lambda t: (t.file, t.key or "", t.kind, t.detail)))


def _comparable_sides(
    ours: Allowlist | None, theirs: Allowlist | None, generation: Generation
) -> tuple[list[Allowlist], tuple[str, ...]]:
    """The sides written by ``generation``'s checker, and the names of the others: KEYs and
    DETAILs of the two generations differ, so entries of the other one can match nothing."""
    used: list[Allowlist] = []
    ignored: list[str] = []
    for name, side in (("ours", ours), ("theirs", theirs)):
        if side is None:
            continue
        try:
            side_generation = detect_generation(side, generation)
        except AllowlistFormatError as error:
            raise AllowlistFormatError(f"the {name} side's allowlist: {error}") from None
        if side_generation is generation:
            used.append(side)
        else:
            ignored.append(name)
    return used, tuple(ignored)


def regenerate(
    *,
    ours: Allowlist | None,
    theirs: Allowlist | None,
    tree: TreeScan,
    generation: Generation,
    comment: str,
) -> Regeneration:
    """The allowlist for the merged ``tree``, from the tree's reads and both sides' files.

    Current generation (``SCOPE``): per file, the tree's reads capped at the multiset union of
    both sides' entries. When no read is new, that is exactly what the checker's ``--update``
    writes. When reads ARE new, the checker's ``--update`` refuses to write anything; stackbot
    still writes the capped reads (the new reads are NOT added, so the file keeps failing the
    check on exactly those reads) and reports them in ``new_reads`` as needing a human. A file
    that does not parse keeps the union of both sides' entries, since its reads are unknown.

    First generation (``LINE``): the tree's reads, which is what its ``--update`` writes. New
    reads and stale entries are compared as ``(file, kind, detail)`` counts ignoring line
    numbers, since nearly every merge moves lines.

    ``stale`` lists the entries of either side that the new file drops. A side whose file was
    written by the other generation is left out of the comparison and named in
    ``ignored_sides``.
    """
    sides, ignored = _comparable_sides(ours, theirs, generation)
    found = _tree_counts(tree)
    if generation is Generation.SCOPE:
        union = union_counts(*(side.counts() for side in sides))
        written = capped_counts(found, union)
        written.update((p, union[p]) for p in tree.unparsed if p in union)
        new_reads = _tallies(excess_counts(found, union), tree, keyed=True)
        stale = _tallies(excess_counts(union, written), tree, keyed=True)
    else:
        # Each side's (kind, detail) counts first: both sides listing one read at different
        # lines is still one read.
        listed = union_counts(*(_ignoring_lines(side.counts()) for side in sides))
        read = _ignoring_lines(found)
        written = found
        new_reads = _tallies(excess_counts(read, listed), tree, keyed=False)
        stale = _tallies(excess_counts(listed, read), tree, keyed=False)
    allowlist = Allowlist.from_reads(comment, {p: list(c.elements()) for p, c in written.items()})
    before = ours if ours is not None else theirs
    return Regeneration(
        generation=generation,
        allowlist=allowlist,
        data=render_allowlist(allowlist),
        new_reads=new_reads,
        stale=stale,
        unparsed=tree.unparsed,
        ignored_sides=ignored,
        total_before=before.entry_count if before is not None else 0,
    )


def check(allowlist: Allowlist, tree: TreeScan, generation: Generation) -> AllowlistCheck:
    """Judge ``allowlist`` against ``tree`` as that generation's checker does: per file, reads
    beyond the listed counts are new and listed entries beyond the tree's are stale (the first
    generation compares sets, line numbers included). Files that do not parse are not compared:
    their reads are unknown. A declared ``total`` unlike the entry count fails too."""
    unparsed = tree.unparsed
    listed = {p: c for p, c in allowlist.counts().items() if p not in unparsed}
    if generation is Generation.LINE:
        listed = {p: Counter(set(c)) for p, c in listed.items()}
    found = _tree_counts(tree)
    return AllowlistCheck(
        generation=generation,
        new_reads=_tallies(excess_counts(found, listed), tree, keyed=True),
        stale=_tallies(excess_counts(listed, found), tree, keyed=True),
        declared_total=allowlist.total,
        counted_total=allowlist.entry_count,
        unparsed=unparsed,
    )


def choose_comment(
    merged_checker_blob: str | None,
    ours_checker_blob: str | None,
    theirs_checker_blob: str | None,
    ours_comment: str | None,
    theirs_comment: str | None,
) -> str:
    """The ``_comment`` of the side whose checker script the merged tree kept (the sentence is
    fixed per checker version); ours when both or neither match, or when theirs has none."""
    if (
        merged_checker_blob is not None
        and merged_checker_blob == theirs_checker_blob
        and merged_checker_blob != ours_checker_blob
        and theirs_comment is not None
    ):
        return theirs_comment
    if ours_comment is not None:
        return ours_comment
    return theirs_comment or ""
