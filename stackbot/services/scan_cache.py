"""Allowlist scan outcomes kept in a file between command runs.

Outcomes depend only on a blob, the checker generation and the scanner version (all in the
key), so a cache file can never be stale, only incomplete. Without it every ``stackbot
integrate`` or ``stackbot allowlist`` would parse all of ``megatron/core`` again.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from stackbot.domain.allowlist import MemoryScanCache, ScanOutcome

LIMIT = 200_000  # outcomes kept; the oldest go first


@dataclass
class FileScanCache(MemoryScanCache):
    path: Path = field(default=Path("scan-cache.json"))
    dirty: bool = False

    @classmethod
    def load(cls, path: Path) -> FileScanCache:
        """The cache in ``path``; an unreadable file counts as empty (it is only a cache)."""
        try:
            stored = json.loads(path.read_text())
            outcomes = {key: ScanOutcome.from_json(value) for key, value in stored.items()}
        except (OSError, ValueError, KeyError, TypeError):
            outcomes = {}
        return cls(outcomes=outcomes, path=path)

    def put(self, key: str, outcome: ScanOutcome) -> None:
        super().put(key, outcome)
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        kept = list(self.outcomes.items())[-LIMIT:]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".scan-cache-", dir=self.path.parent)
        with os.fdopen(fd, "w") as handle:
            json.dump({key: outcome.to_json() for key, outcome in kept}, handle)
        os.replace(temporary, self.path)
        self.dirty = False
