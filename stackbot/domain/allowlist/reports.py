"""What regeneration and checking tell the caller, ready for ``--json`` and the database."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stackbot.domain.allowlist.model import Allowlist, Generation


@dataclass(frozen=True)
class EntryTally:
    """One entry counted ``count`` times in one file. ``key`` is None when the first generation
    compared ``(file, kind, detail)`` ignoring line numbers; ``lines`` are where the tree reads
    it (empty for entries the tree no longer has)."""

    file: str
    key: str | None
    kind: str
    detail: str
    count: int
    lines: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "key": self.key,
            "kind": self.kind,
            "detail": self.detail,
            "count": self.count,
            "lines": list(self.lines),
        }


def _tallies_json(tallies: tuple[EntryTally, ...]) -> list[dict[str, Any]]:
    return [tally.to_json() for tally in tallies]


def _tally_count(tallies: tuple[EntryTally, ...]) -> int:
    return sum(tally.count for tally in tallies)


@dataclass(frozen=True)
class Regeneration:
    """The allowlist rewritten for one merged tree, and what a human must look at.

    ``total_before`` counts the entries of ``ours`` (else ``theirs``; 0 without either), which
    is the allowlist the merge started from; ``ignored_sides`` names a side whose allowlist was
    written by the other checker generation and so could not be compared."""

    generation: Generation
    allowlist: Allowlist
    data: bytes
    new_reads: tuple[EntryTally, ...]
    stale: tuple[EntryTally, ...]
    unparsed: Mapping[str, str]
    ignored_sides: tuple[str, ...]
    total_before: int

    @property
    def total_after(self) -> int:
        return self.allowlist.total

    @property
    def delta(self) -> int:
        return self.total_after - self.total_before

    @property
    def needs_human(self) -> bool:
        """New reads never get allowlisted by stackbot, and the current checker stops on a file
        that does not parse."""
        return bool(self.new_reads) or (self.generation is Generation.SCOPE and bool(self.unparsed))

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation.value,
            "total_before": self.total_before,
            "total_after": self.total_after,
            "delta": self.delta,
            "files": len(self.allowlist.allowed),
            "new_read_count": _tally_count(self.new_reads),
            "stale_count": _tally_count(self.stale),
            "new_reads": _tallies_json(self.new_reads),
            "stale": _tallies_json(self.stale),
            "unparsed": dict(sorted(self.unparsed.items())),
            "ignored_sides": list(self.ignored_sides),
            "needs_human": self.needs_human,
        }


@dataclass(frozen=True)
class AllowlistCheck:
    """An allowlist judged against one tree, as that tree's checker would judge it, plus the
    ``total`` the checker itself never looks at."""

    generation: Generation
    new_reads: tuple[EntryTally, ...]
    stale: tuple[EntryTally, ...]
    declared_total: int
    counted_total: int
    unparsed: Mapping[str, str]

    @property
    def total_mismatch(self) -> bool:
        return self.declared_total != self.counted_total

    @property
    def unparsed_blocks(self) -> bool:
        """The current checker stops on a file that does not parse; the first skips it."""
        return self.generation is Generation.SCOPE and bool(self.unparsed)

    @property
    def ok(self) -> bool:
        return not (self.new_reads or self.stale or self.total_mismatch or self.unparsed_blocks)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "generation": self.generation.value,
            "declared_total": self.declared_total,
            "counted_total": self.counted_total,
            "total_mismatch": self.total_mismatch,
            "new_read_count": _tally_count(self.new_reads),
            "stale_count": _tally_count(self.stale),
            "new_reads": _tallies_json(self.new_reads),
            "stale": _tallies_json(self.stale),
            "unparsed": dict(sorted(self.unparsed.items())),
            "unparsed_blocks": self.unparsed_blocks,
        }
