"""Regenerating the allowlist of a merged tree from the tree's reads and both sides' files."""

from __future__ import annotations

import pytest

from stackbot.domain.allowlist import (
    Allowlist,
    AllowlistFormatError,
    EntryTally,
    Generation,
    parse_allowlist,
    regenerate,
    render_allowlist,
)
from tests.allowlist.trees import scan_sources

SCOPE, LINE = Generation.SCOPE, Generation.LINE
ROUTER = "megatron/core/transformer/moe/router.py"
TP = "TopKRouter.__init__:accessor:parallel_state.get_tensor_model_parallel_group"
ROUTER_WITH_CALLS = """\
from megatron.core import parallel_state as ps
class TopKRouter:
    def __init__(self):
{calls}"""


def router(calls: int) -> str:
    body = "        ps.get_tensor_model_parallel_group()\n" * calls
    return ROUTER_WITH_CALLS.format(calls=body or "        pass\n")


def side(allowed: dict[str, list[str]], comment: str = "side") -> Allowlist:
    return Allowlist.from_reads(comment, allowed)


def test_tree_reads_are_capped_at_the_union_of_both_sides() -> None:
    tree = scan_sources({ROUTER: router(4)}, SCOPE)
    result = regenerate(
        ours=side({ROUTER: [TP] * 2}),
        theirs=side({ROUTER: [TP] * 3}),
        tree=tree,
        generation=SCOPE,
        comment="merged",
    )
    assert result.allowlist.allowed == {ROUTER: (TP,) * 3}
    key, kind, detail = TP.split(":")
    assert result.new_reads == (EntryTally(ROUTER, key, kind, detail, 1, (4, 5, 6, 7)),)
    assert result.stale == ()
    assert result.needs_human


def test_reads_that_went_away_are_dropped_as_stale() -> None:
    tree = scan_sources({ROUTER: router(1)}, SCOPE)
    result = regenerate(
        ours=side({ROUTER: [TP] * 2}),
        theirs=side({ROUTER: [TP] * 3}),
        tree=tree,
        generation=SCOPE,
        comment="merged",
    )
    assert result.allowlist.allowed == {ROUTER: (TP,)}
    assert [(t.file, t.key, t.count, t.lines) for t in result.stale] == [
        (ROUTER, "TopKRouter.__init__", 2, (4,))
    ]
    assert result.new_reads == ()
    assert not result.needs_human


def test_a_read_listed_by_only_one_side_is_kept() -> None:
    other = "megatron/core/models/gpt/gpt_model.py"
    tree = scan_sources(
        {
            ROUTER: router(1),
            other: """
                from .process_groups_config import ProcessGroupCollection
                def build():
                    return ProcessGroupCollection.use_mpu_process_groups()
            """,
        },
        SCOPE,
    )
    result = regenerate(
        ours=side({ROUTER: [TP]}),
        theirs=side({other: ["build:shim:use_mpu_process_groups"]}),
        tree=tree,
        generation=SCOPE,
        comment="merged",
    )
    assert result.allowlist.allowed == {
        other: ("build:shim:use_mpu_process_groups",),
        ROUTER: (TP,),
    }
    assert result.new_reads == () and result.stale == ()


def test_entries_of_deleted_and_exempt_files_are_stale() -> None:
    tree = scan_sources({ROUTER: router(1), "megatron/core/parallel_state.py": router(2)}, SCOPE)
    gone = "megatron/core/deleted.py"
    exempt = "megatron/core/parallel_state.py"
    result = regenerate(
        ours=side({ROUTER: [TP], gone: ["f:shim:use_mpu_process_groups"]}),
        theirs=side({exempt: [TP]}),
        tree=tree,
        generation=SCOPE,
        comment="merged",
    )
    assert result.allowlist.allowed == {ROUTER: (TP,)}
    assert [(t.file, t.kind, t.count) for t in result.stale] == [
        (gone, "shim", 1),
        (exempt, "accessor", 1),
    ]


def test_a_file_that_does_not_parse_keeps_both_sides_entries_and_needs_a_human() -> None:
    broken = "megatron/core/broken.py"
    tree = scan_sources({ROUTER: router(1), broken: "def f(:\n"}, SCOPE)
    result = regenerate(
        ours=side({ROUTER: [TP], broken: ["f:shim:use_mpu_process_groups"] * 2}),
        theirs=side({broken: ["f:shim:use_mpu_process_groups", "g:shim:use_mpu_process_groups"]}),
        tree=tree,
        generation=SCOPE,
        comment="merged",
    )
    assert result.allowlist.allowed[broken] == (
        "f:shim:use_mpu_process_groups",
        "f:shim:use_mpu_process_groups",
        "g:shim:use_mpu_process_groups",
    )
    assert list(result.unparsed) == [broken]
    assert result.stale == () and result.new_reads == ()
    assert result.needs_human


def test_without_either_side_every_read_is_new_and_nothing_is_allowed() -> None:
    tree = scan_sources({ROUTER: router(2)}, SCOPE)
    result = regenerate(ours=None, theirs=None, tree=tree, generation=SCOPE, comment="c")
    assert result.allowlist.allowed == {}
    assert [t.count for t in result.new_reads] == [2]
    assert result.total_before == 0 and result.total_after == 0


def test_totals_data_and_comment() -> None:
    tree = scan_sources({ROUTER: router(2)}, SCOPE)
    ours = Allowlist("ours' sentence", {ROUTER: (TP,) * 3}, 5)  # declared total drifted
    result = regenerate(
        ours=ours, theirs=side({ROUTER: [TP]}), tree=tree, generation=SCOPE, comment="chosen"
    )
    assert result.total_before == 3
    assert result.total_after == 2
    assert result.delta == -1
    assert result.data == render_allowlist(result.allowlist)
    reparsed = parse_allowlist(result.data)
    assert reparsed.comment == "chosen"
    assert reparsed.total == 2
    assert reparsed.allowed == {ROUTER: (TP, TP)}


def test_a_side_written_by_the_other_generation_is_ignored_and_named() -> None:
    tree = scan_sources({ROUTER: router(1)}, SCOPE)
    result = regenerate(
        ours=side({ROUTER: [TP]}),
        theirs=side({ROUTER: ["4:accessor:ps.get_tensor_model_parallel_group"]}),
        tree=tree,
        generation=SCOPE,
        comment="c",
    )
    assert result.ignored_sides == ("theirs",)
    assert result.allowlist.allowed == {ROUTER: (TP,)}
    assert result.stale == ()


def test_a_side_mixing_generations_is_refused_naming_the_side() -> None:
    tree = scan_sources({ROUTER: router(1)}, SCOPE)
    mixed = side({ROUTER: [TP, "4:accessor:ps.get_tensor_model_parallel_group"]})
    with pytest.raises(AllowlistFormatError, match=r"the theirs side.s allowlist: .*mixes"):
        regenerate(ours=None, theirs=mixed, tree=tree, generation=SCOPE, comment="c")


GPT = "megatron/core/models/gpt/gpt_model.py"
GPT_SOURCE = """\
from megatron.core import parallel_state
def f():
    parallel_state.get_data_parallel_group()
def g():
    parallel_state.get_data_parallel_group()
"""
DP_AT = "{}:accessor:parallel_state.get_data_parallel_group".format


def test_first_generation_writes_the_tree_reads_and_compares_ignoring_lines() -> None:
    tree = scan_sources({GPT: GPT_SOURCE}, LINE)
    result = regenerate(
        ours=side({GPT: [DP_AT(7)]}),  # the same read, listed at another line
        theirs=side({GPT: [DP_AT(2), "9:accessor:mpu.get_data_parallel_rank"]}),
        tree=tree,
        generation=LINE,
        comment="first",
    )
    assert result.allowlist.allowed == {GPT: (DP_AT(3), DP_AT(5))}
    # Each side listed one get_data_parallel_group; the tree has two: one is new.
    assert result.new_reads == (
        EntryTally(GPT, None, "accessor", "parallel_state.get_data_parallel_group", 1, (3, 5)),
    )
    assert result.stale == (EntryTally(GPT, None, "accessor", "mpu.get_data_parallel_rank", 1),)


def test_first_generation_moved_reads_are_neither_new_nor_stale() -> None:
    tree = scan_sources({GPT: GPT_SOURCE}, LINE)
    result = regenerate(
        ours=side({GPT: [DP_AT(30), DP_AT(50)]}),
        theirs=None,
        tree=tree,
        generation=LINE,
        comment="first",
    )
    assert result.new_reads == () and result.stale == ()
    assert result.allowlist.allowed == {GPT: (DP_AT(3), DP_AT(5))}
    assert not result.needs_human


def test_first_generation_skips_files_that_do_not_parse() -> None:
    broken = "megatron/core/broken.py"
    tree = scan_sources({GPT: GPT_SOURCE, broken: "ps.get_data_parallel_group(\n"}, LINE)
    result = regenerate(
        ours=side({GPT: [DP_AT(3), DP_AT(5)], broken: ["1:accessor:ps.get_data_parallel_group"]}),
        theirs=None,
        tree=tree,
        generation=LINE,
        comment="first",
    )
    assert result.allowlist.allowed == {GPT: (DP_AT(3), DP_AT(5))}
    assert list(result.unparsed) == [broken]
    assert [(t.file, t.detail) for t in result.stale] == [(broken, "ps.get_data_parallel_group")]
    assert not result.needs_human


def test_to_json_reports_what_a_human_must_see() -> None:
    tree = scan_sources({ROUTER: router(3)}, SCOPE)
    result = regenerate(
        ours=side({ROUTER: [TP] * 2}), theirs=None, tree=tree, generation=SCOPE, comment="c"
    )
    assert result.to_json() == {
        "generation": "scope",
        "total_before": 2,
        "total_after": 2,
        "delta": 0,
        "files": 1,
        "new_read_count": 1,
        "stale_count": 0,
        "new_reads": [
            {
                "file": ROUTER,
                "key": "TopKRouter.__init__",
                "kind": "accessor",
                "detail": "parallel_state.get_tensor_model_parallel_group",
                "count": 1,
                "lines": [4, 5, 6],
            }
        ],
        "stale": [],
        "unparsed": {},
        "ignored_sides": [],
        "needs_human": True,
    }
