"""One scan cache per data directory, shared by every process that scans (workers, the CLI)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from stackbot.domain.allowlist import ScanOutcome
from stackbot.services.scan_cache import SharedScanCache

ROOT = Path(__file__).resolve().parents[2]
WRITER = """
import sys
from pathlib import Path
from stackbot.domain.allowlist import ScanOutcome
from stackbot.services.scan_cache import SharedScanCache
cache = SharedScanCache(Path(sys.argv[1]))
me = int(sys.argv[2])
for batch in range(40):
    # Every writer writes keys 0-99 (the same outcome for a key, as content addressing gives)
    # and keys of its own.
    shared = {f"k{n}": ScanOutcome((f"f:accessor:parallel_state.get_{n}_group",), (n,)) for n in range(100)}
    own = {f"w{me}-{batch}-{n}": ScanOutcome(error=f"line {n}: x") for n in range(25)}
    cache.put_many({**shared, **own})
    assert len(cache.get_many(list(shared))) == 100
cache.close()
"""


def test_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    store = tmp_path / "data" / "scan-cache.sqlite3"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(store), str(n)], env=env)
        for n in range(4)
    ]
    assert [w.wait(timeout=300) for w in writers] == [0, 0, 0, 0]
    reader = SharedScanCache(store)
    keys = [f"k{n}" for n in range(100)]
    keys += [f"w{w}-{b}-{n}" for w in range(4) for b in range(40) for n in range(25)]
    found = reader.get_many(keys)
    assert len(found) == 100 + 4 * 40 * 25 and reader.misses == 0
    assert found["k7"] == ScanOutcome(("f:accessor:parallel_state.get_7_group",), (7,))
    assert found["w3-39-24"] == ScanOutcome(error="line 24: x")
    reader.close()


def test_a_process_sees_what_another_wrote_after_it_opened(tmp_path: Path) -> None:
    store = tmp_path / "scan-cache.sqlite3"
    first, second = SharedScanCache(store), SharedScanCache(store)
    assert second.get_many(["a"]) == {}
    first.put_many({"a": ScanOutcome(("x:shim:use_mpu_process_groups",), (1,))})
    assert second.get_many(["a"]) == {"a": ScanOutcome(("x:shim:use_mpu_process_groups",), (1,))}
    first.close()
    second.close()


def test_an_unusable_store_acts_as_empty(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    cache = SharedScanCache(blocked / "scan-cache.sqlite3")  # its directory is a file
    cache.put_many({"a": ScanOutcome()})
    assert cache.get_many(["a"]) == {"a": ScanOutcome()}  # this process still remembers
    assert SharedScanCache(blocked / "scan-cache.sqlite3").get_many(["a"]) == {}
