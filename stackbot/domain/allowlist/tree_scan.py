"""Scan every scanned file of a tree, reusing earlier outcomes per blob.

Integration runs scan tree after tree that differ in a few files; outcomes depend only on a
blob's content, the generation and :data:`SCANNER_VERSION`, so a tree that changed 40 files
parses 40 files. The cache is a protocol so the caller can plug in a persistent one (shared
by processes), and so is the scanner, so the caller can have another Python parse: what parses
depends on the interpreter's grammar (Megatron-LM's PEP 701 f-strings need 3.12), which is why
the grammar is part of the cache key.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from stackbot.domain.allowlist.model import Generation
from stackbot.domain.allowlist.scanner import (
    SCANNER_VERSION,
    ScanOutcome,
    is_scanned_path,
    scan_sources,
)

TreeReads = Mapping[str, ScanOutcome]  # path -> outcome, for every scanned path of a tree
Progress = Callable[[int, int], None]  # (files done, files to scan)
LOAD_CHUNK = 2000  # blobs read from git at a time: a first scan holds this many in memory
LOCAL_CHUNK = 64  # files between progress calls when this process scans


def scan_cache_key(blob_sha: str, generation: Generation, grammar: str = "") -> str:
    """``grammar`` names the Python whose parser read the blob (``py3.12``)."""
    return (
        f"allowlist-scan/{SCANNER_VERSION}/{grammar or THIS_GRAMMAR}/{generation.value}/{blob_sha}"
    )


THIS_GRAMMAR = f"py{sys.version_info[0]}.{sys.version_info[1]}"


class ScanCache(Protocol):
    def get_many(self, keys: Iterable[str]) -> dict[str, ScanOutcome]:
        """The outcomes known for ``keys`` (unknown keys are absent)."""
        ...

    def put_many(self, outcomes: Mapping[str, ScanOutcome]) -> None: ...


class Scanner(Protocol):
    """Scans blobs in bulk. ``grammar`` names the Python that parses (part of the cache key);
    ``description`` says which, for reports; ``progress`` gets the number of blobs done."""

    @property
    def grammar(self) -> str: ...

    @property
    def description(self) -> str: ...

    def scan(
        self,
        generation: Generation,
        sources: Sequence[bytes],
        progress: Callable[[int], None] | None = None,
    ) -> list[ScanOutcome]: ...


@dataclass(frozen=True)
class LocalScanner:
    """This process's Python scans. ``note`` is appended to every parse error: a caller that
    knows this Python is older than the repository's says there how to get the right one."""

    note: str | None = None
    grammar: str = THIS_GRAMMAR
    description: str = f"Python {sys.version.split()[0]} (in process)"

    def scan(
        self,
        generation: Generation,
        sources: Sequence[bytes],
        progress: Callable[[int], None] | None = None,
    ) -> list[ScanOutcome]:
        outcomes: list[ScanOutcome] = []
        for start in range(0, len(sources), LOCAL_CHUNK):
            outcomes += scan_sources(generation, sources[start : start + LOCAL_CHUNK])
            if progress is not None:
                progress(len(outcomes))
        if self.note:
            outcomes = [
                replace(o, error=f"{o.error} ({self.note})") if o.error is not None else o
                for o in outcomes
            ]
        return outcomes


@dataclass
class MemoryScanCache:
    """A dict of outcomes; ``hits`` and ``misses`` let tests and benchmarks see the reuse."""

    outcomes: dict[str, ScanOutcome] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def get_many(self, keys: Iterable[str]) -> dict[str, ScanOutcome]:
        found = {}
        for key in keys:
            outcome = self.outcomes.get(key)
            if outcome is None:
                self.misses += 1
            else:
                self.hits += 1
                found[key] = outcome
        return found

    def put_many(self, outcomes: Mapping[str, ScanOutcome]) -> None:
        self.outcomes.update(outcomes)


@dataclass(frozen=True)
class TreeScan:
    """The outcome of every scanned file of one tree, in path order."""

    generation: Generation
    outcomes: TreeReads
    parsed: int  # files scanned now
    cache_hits: int  # files whose outcome came from the cache
    parser: str = ""  # which Python parsed (Scanner.description)

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
            "parser": self.parser,
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
    *,
    scanner: Scanner | None = None,
    load_blobs: Callable[[Sequence[str]], Mapping[str, bytes]] | None = None,
) -> TreeScan:
    """Scan a tree given as path -> blob sha (all its files; the scanned ones are picked here).

    Only blobs the cache does not know are read (``load_blobs`` reads many at once, else
    ``load_blob`` one by one) and scanned, in bulk by ``scanner`` (default: this process);
    ``progress`` is called with (done, total) as files are done, so a long first scan shows how
    far it got.
    """
    scanner = scanner if scanner is not None else LocalScanner()
    paths = sorted(path for path in blobs if is_scanned_path(path))
    keys = {path: scan_cache_key(blobs[path], generation, scanner.grammar) for path in paths}
    known = cache.get_many(dict.fromkeys(keys.values()))
    missing = list(dict.fromkeys(blobs[p] for p in paths if keys[p] not in known))
    done = len(paths) - sum(1 for p in paths if keys[p] not in known)
    if progress is not None and done:
        progress(done, len(paths))
    for start in range(0, len(missing), LOAD_CHUNK):
        shas = missing[start : start + LOAD_CHUNK]
        contents = load_blobs(shas) if load_blobs is not None else {s: load_blob(s) for s in shas}
        offset = done

        def scanned(count: int, offset: int = offset) -> None:
            if progress is not None:
                progress(offset + count, len(paths))

        outcomes = scanner.scan(generation, [contents[s] for s in shas], scanned)
        fresh = {
            scan_cache_key(s, generation, scanner.grammar): o
            for s, o in zip(shas, outcomes, strict=True)
        }
        cache.put_many(fresh)
        known.update(fresh)
        done += len(shas)
    outcomes_by_path = {path: known[keys[path]] for path in paths}
    return TreeScan(
        generation, outcomes_by_path, len(missing), len(paths) - len(missing), scanner.description
    )
