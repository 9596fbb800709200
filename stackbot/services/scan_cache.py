"""Allowlist scan outcomes in one store shared by every process of a data directory.

Outcomes depend only on a blob, the checker generation, the parsing Python's grammar and the
scanner version (all in the key), so the store is content-addressed: it can never be stale, only
incomplete, and two processes that write one key write the same value. It is a SQLite file
(``<data dir>/scan-cache.sqlite3``, WAL): every worker process, ``stackbot integrate`` and
``stackbot allowlist`` read and add to it at once, each write one short transaction of
``INSERT OR IGNORE``. A process keeps what it read in memory too, so a warm rescan does not go
back to the file. A broken or unwritable file only costs speed: the cache then acts as empty
(logged once), never fails a scan.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from stackbot.domain.allowlist import ScanOutcome

log = logging.getLogger(__name__)

LIMIT = 500_000  # rows kept; the oldest go first (about 100 bytes each)
MEMORY_LIMIT = 100_000  # outcomes a process keeps in memory besides the file
BUSY_TIMEOUT_S = 30.0
_BATCH = 500  # keys per SELECT (SQLite's variable limit is 999 on old builds)
FILE_NAME = "scan-cache.sqlite3"


def scan_cache_file(data_dir: Path) -> Path:
    return data_dir / FILE_NAME


class SharedScanCache:
    """The store at ``path``, opened on first use; thread-safe (one connection, one lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.hits = 0
        self.misses = 0
        self._memory: dict[str, ScanOutcome] = {}
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._broken = False

    def get_many(self, keys: Iterable[str]) -> dict[str, ScanOutcome]:
        wanted = list(dict.fromkeys(keys))
        with self._lock:
            found = {k: self._memory[k] for k in wanted if k in self._memory}
            missing = [k for k in wanted if k not in found]
            for start in range(0, len(missing), _BATCH):
                found.update(self._select(missing[start : start + _BATCH]))
            self._remember(found)
            self.hits += len(found)
            self.misses += len(wanted) - len(found)
        return found

    def put_many(self, outcomes: Mapping[str, ScanOutcome]) -> None:
        if not outcomes:
            return
        with self._lock:
            self._remember(outcomes)
            rows = [(key, _encode(outcome)) for key, outcome in outcomes.items()]
            self._write(rows)

    def _remember(self, outcomes: Mapping[str, ScanOutcome]) -> None:
        if len(self._memory) + len(outcomes) > MEMORY_LIMIT:
            self._memory.clear()  # the file still has them
        self._memory.update(outcomes)

    def _select(self, keys: list[str]) -> dict[str, ScanOutcome]:
        connection = self._connect()
        if connection is None or not keys:
            return {}
        marks = ",".join("?" * len(keys))
        try:
            rows = connection.execute(
                f"SELECT key, outcome FROM scan_outcomes WHERE key IN ({marks})", keys
            ).fetchall()
        except sqlite3.Error as error:
            self._give_up("read", error)
            return {}
        return {key: _decode(value) for key, value in rows}

    def _write(self, rows: list[tuple[str, str]]) -> None:
        connection = self._connect()
        if connection is None:
            return
        try:
            with connection:
                connection.executemany(
                    "INSERT OR IGNORE INTO scan_outcomes (key, outcome) VALUES (?, ?)", rows
                )
                connection.execute(
                    "DELETE FROM scan_outcomes WHERE rowid <= "
                    "(SELECT MAX(rowid) FROM scan_outcomes) - ?",
                    (LIMIT,),
                )
        except sqlite3.Error as error:
            self._give_up("write", error)

    def _connect(self) -> sqlite3.Connection | None:
        if self._connection is not None or self._broken:
            return self._connection
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None
            )
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute(
                "CREATE TABLE IF NOT EXISTS scan_outcomes "
                "(key TEXT PRIMARY KEY, outcome TEXT NOT NULL)"
            )
        except (OSError, sqlite3.Error) as error:
            self._give_up("open", error)
            return None
        # Opened in autocommit, which switching to WAL needs; from here on `with connection`
        # makes each write one transaction.
        connection.isolation_level = "DEFERRED"
        self._connection = connection
        return connection

    def _give_up(self, what: str, error: Exception) -> None:
        log.warning(
            "allowlist scan cache %s: cannot %s it (%s); scanning without it",
            self.path,
            what,
            error,
        )
        self._broken = True
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


def _encode(outcome: ScanOutcome) -> str:
    return json.dumps([list(outcome.entries), list(outcome.lines), outcome.error])


def _decode(value: str) -> ScanOutcome:
    entries, lines, error = json.loads(value)
    return ScanOutcome(tuple(entries), tuple(lines), error)
