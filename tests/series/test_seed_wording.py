"""Cases shaped like the seed PR's page (a PR of the parallel_state deprecation series).

The wording follows how the seed's authors write (dependency sentences, the org-qualified
``NVIDIA#N`` form in commit messages, a closing "Superseded by" comment), in our own words.
"""

from __future__ import annotations

from stackbot.domain.records import PrRecord
from stackbot.domain.series import build_series_graph
from tests.series.helpers import REPO, edge_set, pr, problem_set

AMAX_BODY = """Depends on #8034, which adds the amax reduction group helper and the collection
keyword. Until it merges, review the commits after #8034's in the comparison with its branch.

Why. These owners hold their model's collection but reduce amaxes over the global group.

Part of #6307.
"""

CARRY_MESSAGE = """Pass owners' collections to the linears they build

#8748's linears need the collection keyword that NVIDIA#8035 adds, so without it these
constructions fail under Transformer Engine. Merge NVIDIA#8035's head (which contains
NVIDIA#8034). The merge is clean, including the allowlist.
"""

WARN_MESSAGE = """Warn when FP8 contexts fall back to the global amax group

The contexts NVIDIA#8034 and NVIDIA#8035 change are to warn on fallback, so merge
NVIDIA#8035 here. Two files conflict with NVIDIA#6293, which this branch carries.
"""

REGEN_MESSAGE = """Regenerate the allowlist

NVIDIA#8028 and NVIDIA#8035 each refreshed the allowlist. Merging them keeps one total; the
merges of NVIDIA#8017 and NVIDIA#8035 took the other. NVIDIA#8748 brings NVIDIA#8017.
"""


def seed_series() -> list[PrRecord]:
    return [
        pr(8034, "Adds the amax reduction group helper.\n\nPart of #6307.", head_ref="yx/b1-amax"),
        pr(
            8035,
            AMAX_BODY,
            state="closed",
            head_ref="yx/b2-amax-callers",
            comments=(
                "/ok to test be10fd5",
                "Superseded by #8893, which carries this change as one commit with the same "
                "title. Closing so review happens in one place.",
            ),
            commits=(("1" * 40, REGEN_MESSAGE, ("0" * 40,)),),
        ),
        pr(8893, "Carries #8035.\n\nDepends on NVIDIA/Megatron-LM#8034\n\nPart of #6307."),
        pr(8748, "Part of #6307.", commits=(("2" * 40, CARRY_MESSAGE, ("a" * 40, "b" * 40)),)),
        pr(8755, "Part of #6307.", commits=(("3" * 40, WARN_MESSAGE, ("c" * 40,)),)),
        pr(8017, "Part of #6307.", state="closed", merged=True),
    ]


def test_seed_series_graph() -> None:
    graph = build_series_graph(seed_series(), repo=REPO)
    assert edge_set(graph) == {
        (8035, 8034, "depends_on"),
        (8893, 8034, "depends_on"),
        (8748, 8893, "merged_head"),
        (8755, 8893, "merged_head"),
    }
    assert graph.superseded == {8035: 8893}
    (series,) = graph.series
    assert series.key == "#6307"
    assert series.prs == (8017, 8034, 8035, 8748, 8755, 8893)
    assert series.order == (8034, 8893, 8748, 8755)
    assert graph.stacks[8748] == [8034, 8893, 8748]
    assert problem_set(graph) == {
        ("superseded_parent", (8748, 8035)),
        ("superseded_parent", (8755, 8035)),
    }
    assert all("#8893" in problem.detail for problem in graph.problems)


def test_seed_series_without_a_configured_repository() -> None:
    # NVIDIA#8035 is still local (short same-network form); the full name cannot be checked.
    graph = build_series_graph(seed_series(), repo=None)
    assert (8748, 8893, "merged_head") in edge_set(graph)
    assert (8893, 8034, "depends_on") not in edge_set(graph)
    assert [(ref.child, ref.ref) for ref in graph.external] == [(8893, "NVIDIA/Megatron-LM#8034")]


def test_seed_series_seen_from_another_repository() -> None:
    graph = build_series_graph(seed_series(), repo="someone/fork-of-megatron")
    assert edge_set(graph) == {(8035, 8034, "depends_on")}
    assert {ref.ref for ref in graph.external} == {"NVIDIA/Megatron-LM#8034", "NVIDIA#8035"}


def test_before_supersession_the_stack_runs_through_8035() -> None:
    records = [record for record in seed_series() if record.number != 8893]
    records = [
        pr(8035, AMAX_BODY, head_ref="yx/b2-amax-callers") if r.number == 8035 else r
        for r in records
    ]
    graph = build_series_graph(records, repo=REPO)
    assert graph.stacks[8748] == [8034, 8035, 8748]
    assert graph.series[0].order == (8034, 8035, 8748, 8755)
    assert graph.problems == ()
