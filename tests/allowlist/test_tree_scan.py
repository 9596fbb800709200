"""Scanning whole trees, and reusing outcomes per blob across trees."""

from __future__ import annotations

from stackbot.domain.allowlist import (
    SCANNER_VERSION,
    Generation,
    MemoryScanCache,
    ScanOutcome,
    choose_comment,
    scan_current,
    scan_tree,
)
from stackbot.domain.allowlist.tree_scan import scan_cache_key
from tests.allowlist.trees import blob_sha

SCOPE, LINE = Generation.SCOPE, Generation.LINE


class BlobStore:
    """Blobs by sha, counting loads so tests see what the cache saved."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.loads: list[str] = []

    def add_tree(self, files: dict[str, str]) -> dict[str, str]:
        tree = {}
        for path, source in files.items():
            content = source.encode()
            self.blobs[blob_sha(content)] = content
            tree[path] = blob_sha(content)
        return tree

    def load(self, sha: str) -> bytes:
        self.loads.append(sha)
        return self.blobs[sha]


def module(n: int) -> str:
    return f"from megatron.core import parallel_state as ps\ndef f{n}():\n    ps.get_data_parallel_rank()\n"


def twenty_files() -> dict[str, str]:
    return {f"megatron/core/pkg/m{n:02}.py": module(n) for n in range(20)}


def test_only_scanned_paths_are_scanned() -> None:
    store = BlobStore()
    files = {
        "megatron/core/a.py": module(1),
        "megatron/core/parallel_state.py": module(2),
        "megatron/core/process_groups_config.py": module(3),
        "megatron/training/b.py": module(4),
        "megatron/core/notes.md": "text",
        "tools/process_group_usage_allowlist.json": "{}",
    }
    tree = scan_tree(store.add_tree(files), store.load, SCOPE, MemoryScanCache())
    assert list(tree.outcomes) == ["megatron/core/a.py"]
    assert tree.reads == {
        "megatron/core/a.py": ("f1:accessor:parallel_state.get_data_parallel_rank",)
    }


def test_second_scan_of_a_tree_with_three_changed_files_parses_three() -> None:
    store, cache = BlobStore(), MemoryScanCache()
    files = twenty_files()
    first = scan_tree(store.add_tree(files), store.load, SCOPE, cache)
    assert (first.parsed, first.cache_hits) == (20, 0)

    for n in (3, 7, 11):
        files[f"megatron/core/pkg/m{n:02}.py"] = module(100 + n)
    store.loads.clear()
    second = scan_tree(store.add_tree(files), store.load, SCOPE, cache)
    assert (second.parsed, second.cache_hits) == (3, 17)
    assert len(store.loads) == 3
    assert second.reads["megatron/core/pkg/m03.py"] == (
        "f103:accessor:parallel_state.get_data_parallel_rank",
    )
    assert (cache.hits, cache.misses) == (17, 23)


def test_same_blob_at_two_paths_is_parsed_once() -> None:
    store = BlobStore()
    files = {"megatron/core/a/__init__.py": "", "megatron/core/b/__init__.py": ""}
    tree = scan_tree(store.add_tree(files), store.load, SCOPE, MemoryScanCache())
    assert (tree.parsed, tree.cache_hits) == (1, 1)


def test_generations_do_not_share_cached_outcomes() -> None:
    store, cache = BlobStore(), MemoryScanCache()
    blobs = store.add_tree(twenty_files())
    scan_tree(blobs, store.load, SCOPE, cache)
    line = scan_tree(blobs, store.load, LINE, cache)
    assert (line.parsed, line.cache_hits) == (20, 0)
    assert line.reads["megatron/core/pkg/m00.py"] == ("3:accessor:ps.get_data_parallel_rank",)


def test_cache_key_names_version_generation_and_blob() -> None:
    key = scan_cache_key("ab" * 20, SCOPE)
    assert SCANNER_VERSION in key and "scope" in key and "ab" * 20 in key
    assert key != scan_cache_key("ab" * 20, LINE)


def test_progress_is_reported_as_files_are_done() -> None:
    store = BlobStore()
    files = {f"megatron/core/pkg/m{n:03}.py": module(n) for n in range(150)}
    seen: list[tuple[int, int]] = []
    cache = MemoryScanCache()
    scan_tree(
        store.add_tree(files),
        store.load,
        SCOPE,
        cache,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen == [(64, 150), (128, 150), (150, 150)]  # one call per chunk scanned
    seen.clear()
    files["megatron/core/pkg/m000.py"] = module(1000)
    scan_tree(store.add_tree(files), store.load, SCOPE, cache, progress=lambda *p: seen.append(p))
    assert seen == [(149, 150), (150, 150)]  # the cached files first, then the scanned one


def test_unparsed_files_are_listed_with_their_error() -> None:
    store = BlobStore()
    files = {"megatron/core/ok.py": module(1), "megatron/core/bad.py": "def (:\n"}
    tree = scan_tree(store.add_tree(files), store.load, SCOPE, MemoryScanCache())
    assert list(tree.unparsed) == ["megatron/core/bad.py"]
    assert tree.unparsed["megatron/core/bad.py"].startswith("line 1: ")
    assert tree.to_json()["unparsed"] == tree.unparsed
    assert tree.to_json()["entries"] == 1


def test_outcomes_survive_a_json_round_trip_for_persistent_caches() -> None:
    outcome = scan_current("megatron/core/x.py", module(5).encode())
    assert ScanOutcome.from_json(outcome.to_json()) == outcome
    failed = scan_current("megatron/core/x.py", b"def (:\n")
    assert ScanOutcome.from_json(failed.to_json()) == failed


def test_choose_comment_follows_the_checker_the_merged_tree_kept() -> None:
    assert choose_comment("new", "old", "new", "ours", "theirs") == "theirs"
    assert choose_comment("old", "old", "new", "ours", "theirs") == "ours"
    assert choose_comment("same", "same", "same", "ours", "theirs") == "ours"
    assert choose_comment("other", "old", "new", "ours", "theirs") == "ours"
    assert choose_comment(None, None, None, "ours", "theirs") == "ours"
    assert choose_comment("new", "old", "new", "ours", None) == "ours"
    assert choose_comment("old", "old", "new", None, "theirs") == "theirs"
    assert choose_comment(None, None, None, None, None) == ""
