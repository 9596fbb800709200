"""Checking an allowlist against a tree, as that tree's checker would, plus its total."""

from __future__ import annotations

from stackbot.domain.allowlist import Allowlist, Generation, check
from tests.allowlist.trees import scan_sources

SCOPE, LINE = Generation.SCOPE, Generation.LINE
PATH = "megatron/core/pipeline_parallel/schedules.py"
SOURCE = """\
from megatron.core import parallel_state as ps
def forward_step():
    ps.get_pipeline_model_parallel_rank()
    ps.get_pipeline_model_parallel_rank()
"""
RANK = "forward_step:accessor:parallel_state.get_pipeline_model_parallel_rank"
LINE_RANK = "{}:accessor:ps.get_pipeline_model_parallel_rank".format


def listing(entries: list[str], total: int | None = None) -> Allowlist:
    return Allowlist("c", {PATH: tuple(entries)}, len(entries) if total is None else total)


def test_matching_allowlist_is_ok() -> None:
    result = check(listing([RANK, RANK]), scan_sources({PATH: SOURCE}, SCOPE), SCOPE)
    assert result.ok
    assert result.new_reads == () and result.stale == ()


def test_read_beyond_the_listed_count_is_new() -> None:
    result = check(listing([RANK]), scan_sources({PATH: SOURCE}, SCOPE), SCOPE)
    assert not result.ok
    assert [(t.file, t.key, t.count, t.lines) for t in result.new_reads] == [
        (PATH, "forward_step", 1, (3, 4))
    ]
    assert result.stale == ()


def test_listed_entry_beyond_the_tree_is_stale() -> None:
    moved = "other_scope:accessor:parallel_state.get_pipeline_model_parallel_rank"
    result = check(listing([RANK, RANK, RANK, moved]), scan_sources({PATH: SOURCE}, SCOPE), SCOPE)
    assert not result.ok
    assert [(t.key, t.count) for t in result.stale] == [("forward_step", 1), ("other_scope", 1)]
    assert result.new_reads == ()


def test_total_that_does_not_match_its_entries_fails() -> None:
    result = check(listing([RANK, RANK], total=3), scan_sources({PATH: SOURCE}, SCOPE), SCOPE)
    assert result.total_mismatch
    assert (result.declared_total, result.counted_total) == (3, 2)
    assert not result.ok
    assert result.to_json()["total_mismatch"] is True


def test_unparsed_file_blocks_the_current_generation_and_is_not_compared() -> None:
    broken = "megatron/core/broken.py"
    tree = scan_sources({PATH: SOURCE, broken: "class :\n"}, SCOPE)
    allowlist = Allowlist("c", {PATH: (RANK, RANK), broken: ("f:shim:use_mpu_process_groups",)}, 3)
    result = check(allowlist, tree, SCOPE)
    assert result.stale == () and result.new_reads == ()
    assert list(result.unparsed) == [broken]
    assert result.unparsed_blocks
    assert not result.ok


def test_first_generation_skips_unparsed_files_and_compares_line_numbers() -> None:
    broken = "megatron/core/broken.py"
    tree = scan_sources({PATH: SOURCE, broken: "class :\n"}, LINE)
    exact = Allowlist("c", {PATH: (LINE_RANK(3), LINE_RANK(4))}, 2)
    assert check(exact, tree, LINE).ok
    assert not check(exact, tree, LINE).unparsed_blocks

    moved = Allowlist("c", {PATH: (LINE_RANK(3), LINE_RANK(5))}, 2)
    result = check(moved, tree, LINE)
    assert [t.key for t in result.new_reads] == ["4"]
    assert [t.key for t in result.stale] == ["5"]
    assert not result.ok


def test_first_generation_compares_sets() -> None:
    tree = scan_sources({PATH: SOURCE}, LINE)
    duplicated = Allowlist("c", {PATH: (LINE_RANK(3), LINE_RANK(3), LINE_RANK(4))}, 3)
    result = check(duplicated, tree, LINE)
    assert result.new_reads == () and result.stale == ()
    assert result.ok


def test_to_json_of_a_check() -> None:
    result = check(listing([RANK]), scan_sources({PATH: SOURCE}, SCOPE), SCOPE)
    data = result.to_json()
    assert data["ok"] is False
    assert data["new_read_count"] == 1
    assert data["new_reads"][0]["key"] == "forward_step"
    assert data["generation"] == "scope"
