"""The allowlist file (``tools/process_group_usage_allowlist.json``) as a value.

An entry is ``KEY:KIND:DETAIL``. The current checker generation keys entries by scope
(``TEGroupedLinear.__init__``, ``<module>``) and counts duplicates; the first generation keys
them by line number and deduplicates them per file. Entries are compared as multisets per file,
which for the first generation (no duplicates) is the same as comparing sets.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from json.encoder import encode_basestring_ascii
from typing import Any

from stackbot.errors import BadInput

KINDS = ("accessor", "shim")


class Generation(Enum):
    """Which checker generation a tree uses; the values are the CLI's ``--format`` words."""

    SCOPE = "scope"  # current: KEY is the enclosing def/class chain, duplicates counted
    LINE = "line"  # first: KEY is a line number, entries deduplicated per file


class AllowlistFormatError(BadInput):
    """The allowlist file is not what the checker writes; the message says what is wrong."""


@dataclass(frozen=True, order=True)
class Entry:
    key: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.key}:{self.kind}:{self.detail}"


def parse_entry(text: str) -> Entry:
    """Split ``KEY:KIND:DETAIL``; raises :class:`AllowlistFormatError` on anything else."""
    parts = text.split(":", 2)
    if len(parts) != 3 or not parts[0] or not parts[2]:
        raise AllowlistFormatError(f"entry {text!r} is not of the form KEY:KIND:DETAIL")
    if parts[1] not in KINDS:
        raise AllowlistFormatError(
            f"entry {text!r} has kind {parts[1]!r}; the kind must be 'accessor' or 'shim'"
        )
    return Entry(parts[0], parts[1], parts[2])


@dataclass(frozen=True)
class Allowlist:
    """One allowlist file. ``total`` is what the file declares, which may drift from
    :attr:`entry_count` in a hand-merged file; :func:`render_allowlist` always writes the count."""

    comment: str
    allowed: Mapping[str, tuple[str, ...]]
    total: int

    @classmethod
    def from_reads(cls, comment: str, reads: Mapping[str, Iterable[str]]) -> Allowlist:
        """The checker's form of ``reads``: entries sorted, empty files left out, total counted."""
        allowed = {path: tuple(sorted(entries)) for path, entries in sorted(reads.items())}
        allowed = {path: entries for path, entries in allowed.items() if entries}
        return cls(comment, allowed, sum(len(entries) for entries in allowed.values()))

    @property
    def entry_count(self) -> int:
        return sum(len(entries) for entries in self.allowed.values())

    @cached_property
    def keys(self) -> frozenset[str]:
        """Every entry's KEY (computed once: integration steps ask for it again and again)."""
        # Entries were checked when the file was parsed (or come from the scanner).
        return frozenset(
            entry.split(":", 1)[0] for entries in self.allowed.values() for entry in entries
        )

    def counts(self) -> dict[str, Counter[str]]:
        """Per file, each entry with how many times it is listed."""
        return {path: Counter(entries) for path, entries in self.allowed.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "_comment": self.comment,
            "allowed": {path: list(entries) for path, entries in sorted(self.allowed.items())},
            "total": self.total,
        }


def parse_allowlist(data: bytes) -> Allowlist:
    """Read an allowlist file; a merge-conflicted or hand-broken file raises
    :class:`AllowlistFormatError` naming the problem (never loses or guesses entries)."""
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AllowlistFormatError(f"the allowlist is not valid JSON: {error}") from error
    if not isinstance(document, dict):
        raise AllowlistFormatError("the allowlist must be a JSON object with 'allowed' and 'total'")
    unknown = sorted(set(document) - {"_comment", "allowed", "total"})
    if unknown:
        raise AllowlistFormatError(f"the allowlist has unknown top-level keys: {unknown}")
    comment = document.get("_comment", "")
    if not isinstance(comment, str):
        raise AllowlistFormatError("the allowlist's '_comment' must be a string")
    total = document.get("total")
    if not isinstance(total, int) or isinstance(total, bool):
        raise AllowlistFormatError("the allowlist's 'total' is missing or not an integer")
    return Allowlist(comment, _parse_allowed(document.get("allowed")), total)


def _parse_allowed(allowed: object) -> dict[str, tuple[str, ...]]:
    if not isinstance(allowed, dict):
        raise AllowlistFormatError("the allowlist's 'allowed' is missing or not an object")
    parsed: dict[str, tuple[str, ...]] = {}
    for path, entries in allowed.items():
        if not path:
            raise AllowlistFormatError("the allowlist has an empty file path in 'allowed'")
        if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            raise AllowlistFormatError(f"'allowed' of {path!r} must be a list of strings")
        for entry in entries:
            try:
                parse_entry(entry)
            except AllowlistFormatError as error:
                raise AllowlistFormatError(f"in {path!r}: {error}") from None
        parsed[path] = tuple(entries)
    return parsed


# What json.dumps does to a str (ensure_ascii), without its per-call overhead.
_quote: Callable[[str], str] = encode_basestring_ascii


def render_allowlist(allowlist: Allowlist) -> bytes:
    """Byte for byte what the checker's ``--update`` writes for these entries:
    ``_quote({"_comment", "allowed", "total"}, indent=2, sort_keys=True) + "\\n"``.

    Written out line by line, each string escaped by ``json.dumps`` itself: with ``indent``
    json falls back to its pure-Python encoder, which was the largest cost of an integration
    step after git (the tests compare both forms)."""
    canonical = Allowlist.from_reads(allowlist.comment, allowlist.allowed)
    lines = ["{", f'  "_comment": {_quote(canonical.comment)},']
    if canonical.allowed:
        lines.append('  "allowed": {')
        files = sorted(canonical.allowed.items())
        for index, (path, entries) in enumerate(files):
            lines.append(f"    {_quote(path)}: [")
            lines.extend(f"      {_quote(entry)}," for entry in entries[:-1])
            lines.append(f"      {_quote(entries[-1])}")
            lines.append("    ]," if index < len(files) - 1 else "    ]")
        lines.append("  },")
    else:
        lines.append('  "allowed": {},')
    lines.append(f'  "total": {canonical.total}')
    lines.append("}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def render_allowlist_with_json(allowlist: Allowlist) -> bytes:
    """The reference form of :func:`render_allowlist` (json's own encoder), for the tests."""
    canonical = Allowlist.from_reads(allowlist.comment, allowlist.allowed)
    return (json.dumps(canonical.to_json(), indent=2, sort_keys=True) + "\n").encode("utf-8")


def detect_generation(allowlist: Allowlist, default: Generation) -> Generation:
    """The generation whose checker wrote ``allowlist``, from its KEYs: line numbers are the first
    generation, scopes the current one; a file without entries says nothing (``default``)."""
    keys = allowlist.keys
    numeric = {key for key in keys if key.isdigit()}
    if not keys:
        return default
    if numeric and numeric != keys:
        raise AllowlistFormatError(
            "the allowlist mixes line-number and scope keys "
            f"(e.g. {min(numeric)!r} and {min(keys - numeric)!r}); regenerate it with one checker"
        )
    return Generation.LINE if numeric else Generation.SCOPE


# Multisets of entries, per file. Counter's operators are the multiset ones: | is the union
# (largest count), & the intersection (smallest), - the excess (never negative).
FileCounts = Mapping[str, Counter[str]]


def union_counts(*sides: FileCounts) -> dict[str, Counter[str]]:
    """Per file, each entry as many times as the side that lists it most."""
    union: dict[str, Counter[str]] = {}
    for side in sides:
        for path, counts in side.items():
            union[path] = union.get(path, Counter()) | counts
    return {path: counts for path, counts in union.items() if counts}


def excess_counts(left: FileCounts, right: FileCounts) -> dict[str, Counter[str]]:
    """Per file, what ``left`` has beyond ``right``'s counts (the checker's comparison)."""
    excess = {path: counts - right.get(path, Counter()) for path, counts in left.items()}
    return {path: counts for path, counts in excess.items() if counts}


def capped_counts(left: FileCounts, cap: FileCounts) -> dict[str, Counter[str]]:
    """Per file, ``left``'s entries but never more of each than ``cap`` has."""
    capped = {path: counts & cap.get(path, Counter()) for path, counts in left.items()}
    return {path: counts for path, counts in capped.items() if counts}
