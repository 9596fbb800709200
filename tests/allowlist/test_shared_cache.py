"""One scan cache per data directory, shared by every process that scans (workers, the CLI)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from stackbot.adapters.git import GitMirror
from stackbot.config import Settings
from stackbot.domain.allowlist import Generation, ScanOutcome
from stackbot.services.resources import WorkerResources
from stackbot.services.scan_cache import SharedScanCache
from tests.allowlist.test_scanner_python import CURRENT_GENERATION, PEP701, PEP701_PATH
from tests.integration.repo_builder import RepoBuilder

ROOT = Path(__file__).resolve().parents[2]
WRITER = """
import sys
from pathlib import Path
from stackbot.adapters.git import GitMirror
from stackbot.config import Settings
from stackbot.domain.allowlist import Generation, ScanOutcome
from stackbot.services.resources import WorkerResources
from stackbot.services.scan_cache import SharedScanCache
from tests.allowlist.test_scanner_python import CURRENT_GENERATION, PEP701, PEP701_PATH
from tests.integration.repo_builder import RepoBuilder
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


def test_two_workers_share_one_cache_and_scan_under_312(tmp_path: Path) -> None:
    """Two worker processes of one data directory: what one scanned, the other does not parse."""
    builder = RepoBuilder(tmp_path / "work")
    builder.commit("pep 701", {PEP701_PATH: PEP701.decode(), "megatron/core/b.py": "x = 1\n"})
    settings = Settings(data_dir=tmp_path / "data")
    first, second = WorkerResources(settings), WorkerResources(settings)
    repo = GitMirror(builder.path / ".git", str(builder.path), None)
    tree = repo.tree_of(repo.rev_parse("main"))
    scan = first.allowlist(repo).scan(tree, Generation.SCOPE)
    assert (scan.parsed, list(scan.reads[PEP701_PATH])) == (2, CURRENT_GENERATION)
    assert "Python 3.1" in scan.parser and "in process" not in scan.parser
    again = second.allowlist(repo).scan(tree, Generation.SCOPE)
    assert (again.parsed, again.cache_hits) == (0, 2) and again.outcomes == scan.outcomes
    assert (settings.data_dir / "scan-cache.sqlite3").is_file()
    repo.close()
