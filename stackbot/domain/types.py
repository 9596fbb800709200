"""Small value types shared across the domain."""

from __future__ import annotations

from typing import NewType

PrNumber = NewType("PrNumber", int)
Sha = NewType("Sha", str)  # a full 40-hex git object id
TreeSha = NewType("TreeSha", str)
RepoName = NewType("RepoName", str)  # "owner/name"
SeriesKey = NewType("SeriesKey", str)  # "#6307" (tracking issue) or "root-#8034"

HEX_DIGITS = frozenset("0123456789abcdef")


def is_full_sha(value: str) -> bool:
    return len(value) == 40 and set(value) <= HEX_DIGITS


def is_sha_prefix(value: str, *, min_length: int = 7) -> bool:
    return min_length <= len(value) <= 40 and set(value.lower()) <= HEX_DIGITS
