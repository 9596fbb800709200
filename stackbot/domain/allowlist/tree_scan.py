"""Scan every scanned file of a tree, reusing earlier outcomes per blob.

Integration runs scan tree after tree that differ in a few files; outcomes depend only on a
blob's content, the generation and :data:`SCANNER_VERSION`, so a tree that changed 40 files
parses 40 files. The cache is a protocol so the caller can plug in a persistent one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from stackbot.domain.allowlist.model import Generation
from stackbot.domain.allowlist.scanner import (
    SCANNER_VERSION,
    SCANNERS,
    ScanOutcome,
    is_scanned_path,
)

TreeReads = Mapping[str, ScanOutcome]  # path -> outcome, for every scanned path of a tree
Progress = Callable[[int, int], None]  # (files done, files to scan)


def scan_cache_key(blob_sha: str, generation: Generation) -> str:
    return f"allowlist-scan/{SCANNER_VERSION}/{generation.value}/{blob_sha}"


class ScanCache(Protocol):
    def get(self, key: str) -> ScanOutcome | None: ...

    def put(self, key: str, outcome: ScanOutcome) -> None: ...


@dataclass
class MemoryScanCache:
    """A dict of outcomes; ``hits`` and ``misses`` let tests and benchmarks see the reuse."""

    outcomes: dict[str, ScanOutcome] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def get(self, key: str) -> ScanOutcome | None:
        outcome = self.outcomes.get(key)
        if outcome is None:
            self.misses += 1
        else:
            self.hits += 1
        return outcome

    def put(self, key: str, outcome: ScanOutcome) -> None:
        self.outcomes[key] = outcome


@dataclass(frozen=True)
class TreeScan:
    """The outcome of every scanned file of one tree, in path order."""

    generation: Generation
    outcomes: TreeReads
    parsed: int  # files scanned now
    cache_hits: int  # files whose outcome came from the cache

    @property
    def reads(self) -> dict[str, tuple[str, ...]]:
        """Path -> entries for the files that read global state (files without are absent)."""
        return {path: o.entries for path, o in self.outcomes.items() if o.entries}

    @property
    def unparsed(self) -> dict[str, str]:
        """Path -> why it does not parse (the first generation skipped these silently)."""
        return {path: o.error for path, o in self.outcomes.items() if o.error is not None}

    @property
    def entry_count(self) -> int:
        return sum(len(o.entries) for o in self.outcomes.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation.value,
            "files_scanned": len(self.outcomes),
            "files_parsed": self.parsed,
            "cache_hits": self.cache_hits,
            "entries": self.entry_count,
            "reads": {path: list(entries) for path, entries in self.reads.items()},
            "unparsed": self.unparsed,
        }


def scan_tree(
    blobs: Mapping[str, str],
    load_blob: Callable[[str], bytes],
    generation: Generation,
    cache: ScanCache,
    progress: Progress | None = None,
) -> TreeScan:
    """Scan a tree given as path -> blob sha (all its files; the scanned ones are picked here).

    ``load_blob`` is called only for blobs the cache does not know; ``progress`` is called after
    each file with (done, total) so a long first scan can show how far it got.
    """
    paths = sorted(path for path in blobs if is_scanned_path(path))
    scan = SCANNERS[generation]
    outcomes: dict[str, ScanOutcome] = {}
    parsed = hits = 0
    for done, path in enumerate(paths, start=1):
        key = scan_cache_key(blobs[path], generation)
        outcome = cache.get(key)
        if outcome is None:
            outcome = scan(path, load_blob(blobs[path]))
            cache.put(key, outcome)
            parsed += 1
        else:
            hits += 1
        outcomes[path] = outcome
        if progress is not None:
            progress(done, len(paths))
    return TreeScan(generation, outcomes, parsed, hits)
