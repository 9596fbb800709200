"""The series graph, source by source, and the problems it reports."""

from __future__ import annotations

import pytest

from stackbot.domain.series import SeriesInfo, build_series_graph
from stackbot.errors import BadInput
from tests.series.helpers import REPO, edge_set, pr, problem_set

# -- edges by source ---------------------------------------------------------------------------


def test_depends_on_builds_stacks_parents_first() -> None:
    graph = build_series_graph(
        [pr(10), pr(11, "Depends on #10"), pr(12, "Depends on #11 and #10")], repo=REPO
    )
    assert edge_set(graph) == {
        (11, 10, "depends_on"),
        (12, 11, "depends_on"),
        (12, 10, "depends_on"),
    }
    assert graph.stacks == {10: [10], 11: [10, 11], 12: [10, 11, 12]}
    assert graph.problems == ()
    assert graph.parents_of(12) == (10, 11)
    assert graph.children_of(10) == (11, 12)


def test_base_branch_of_an_open_pr_head() -> None:
    graph = build_series_graph(
        [pr(1, head_ref="a"), pr(2, head_ref="b", base_ref="a"), pr(3, base_ref="main")], repo=REPO
    )
    assert edge_set(graph) == {(2, 1, "base_branch")}
    assert graph.stacks[2] == [1, 2]


def test_base_branch_ignores_closed_prs_and_fork_heads() -> None:
    records = [
        pr(1, head_ref="a", state="closed"),
        pr(2, base_ref="a"),
        pr(3, head_ref="main", head_repo="someone/Megatron-LM"),
        pr(4, base_ref="main"),
    ]
    graph = build_series_graph(records, repo=REPO)
    assert graph.edges == ()
    # Without a configured repository a fork's head cannot be told apart.
    assert (4, 3, "base_branch") in edge_set(build_series_graph(records, repo=None))


def test_base_branch_shared_by_two_open_prs_is_a_conflict() -> None:
    graph = build_series_graph(
        [pr(1, head_ref="x"), pr(2, head_ref="x"), pr(3, base_ref="x")], repo=REPO
    )
    assert graph.edges == ()
    assert problem_set(graph) == {("conflict", (3, 1, 2))}


def test_native_stack_positions() -> None:
    graph = build_series_graph(
        [pr(30, stack=(7, 3)), pr(10, stack=(7, 1)), pr(20, stack=(7, 2)), pr(40, stack=(8, 2))],
        repo=REPO,
    )
    assert edge_set(graph) == {(20, 10, "native_stack"), (30, 20, "native_stack")}
    assert graph.stacks[30] == [10, 20, 30]
    # #40 is at position 2 of a stack whose position 1 was not given.
    assert problem_set(graph) == {("missing_parent", (40,))}


def test_native_stack_wins_over_a_disagreeing_source() -> None:
    records = [
        pr(10, stack=(7, 1), head_ref="s1"),
        pr(20, "Depends on #99 and #10", stack=(7, 2), base_ref="s1"),
        pr(30, "Depends on #10 and #40", stack=(7, 3)),
        pr(40),
        pr(99),
    ]
    graph = build_series_graph(records, repo=REPO)
    assert edge_set(graph) == {
        (20, 10, "native_stack"),
        (20, 10, "base_branch"),
        (20, 10, "depends_on"),
        (30, 20, "native_stack"),
        (30, 10, "depends_on"),  # below it in the same stack: agrees
    }
    assert problem_set(graph) == {("conflict", (20, 99)), ("conflict", (30, 40))}
    assert graph.stacks[30] == [10, 20, 30]


def test_a_merged_parent_agrees_with_any_native_stack() -> None:
    graph = build_series_graph(
        [pr(10, "Depends on #5", stack=(7, 1)), pr(5, state="closed", merged=True)]
    )
    assert edge_set(graph) == {(10, 5, "depends_on")}
    assert graph.problems == ()


def test_two_prs_at_one_stack_position() -> None:
    graph = build_series_graph([pr(1, stack=(5, 1)), pr(2, stack=(5, 1)), pr(3, stack=(5, 2))])
    assert ("conflict", (1, 2)) in problem_set(graph)
    assert graph.stacks[3] == [1, 2, 3]


def test_merged_head_from_message_parent_sha_and_branch_name() -> None:
    head = "c" * 40
    records = [
        pr(1, head_ref="feat-1"),
        pr(2, head_sha=head),
        pr(3),
        pr(
            9,
            commits=(
                ("a" * 40, "Merge NVIDIA#1's head (which contains NVIDIA#3)", ("0" * 40,)),
                ("b" * 40, "Resolve conflicts", ("a" * 40, head)),
                ("d" * 40, "Merge branch 'main' into feat-9", ("b" * 40, "e" * 40)),
            ),
        ),
        pr(8, commits=(("f" * 40, "Merge branch 'feat-1' into feat-8", ("1" * 40, "2" * 40)),)),
    ]
    graph = build_series_graph(records, repo=REPO)
    assert edge_set(graph) == {(9, 1, "merged_head"), (9, 2, "merged_head"), (8, 1, "merged_head")}


def test_other_repositories_are_external_not_problems() -> None:
    body = "Depends on other/lib#5, NVIDIA/Megatron-LM#2 and https://github.com/NVIDIA/apex/pull/7"
    commits = (("a" * 40, "Merge elsewhere#3", ()),)
    graph = build_series_graph([pr(1, body, commits=commits), pr(2)], repo=REPO)
    assert edge_set(graph) == {(1, 2, "depends_on")}
    assert [(ref.child, ref.ref) for ref in graph.external] == [
        (1, "NVIDIA/apex#7"),
        (1, "elsewhere#3"),
        (1, "other/lib#5"),
    ]
    assert graph.problems == ()


def test_owner_short_form_is_local_only_for_the_configured_owner() -> None:
    records = [pr(1, "Depends on NVIDIA#2"), pr(2)]
    assert edge_set(build_series_graph(records, repo=REPO)) == {(1, 2, "depends_on")}
    assert edge_set(build_series_graph(records, repo=None)) == {(1, 2, "depends_on")}
    other = build_series_graph(records, repo="someone/else")
    assert other.edges == ()
    assert [ref.ref for ref in other.external] == ["NVIDIA#2"]


def test_self_references_are_ignored() -> None:
    graph = build_series_graph([pr(1, "Depends on #1", commits=(("a", "Merge #1", ()),))])
    assert graph.edges == () and graph.problems == ()


# -- parents that cannot be stacked -----------------------------------------------------------


def test_merged_parent_leaves_the_stack_without_a_problem() -> None:
    graph = build_series_graph([pr(1, state="closed", merged=True), pr(2, "Depends on #1")])
    assert edge_set(graph) == {(2, 1, "depends_on")}
    assert graph.stacks[2] == [2]
    assert graph.problems == ()


def test_closed_parent_is_reported_and_left_out() -> None:
    graph = build_series_graph([pr(1, state="closed"), pr(2, "Depends on #1")])
    assert graph.stacks[2] == [2]
    assert problem_set(graph) == {("closed_parent", (2, 1))}


def test_missing_parent_names_the_number() -> None:
    graph = build_series_graph([pr(2, "Depends on #1")])
    assert graph.edges == ()
    assert problem_set(graph) == {("missing_parent", (2, 1))}
    assert "#1" in graph.problems[0].detail


def test_problems_only_for_live_children() -> None:
    graph = build_series_graph(
        [
            pr(2, "Depends on #1", state="closed"),
            pr(3, "Depends on #1", merged=True, state="closed"),
        ]
    )
    assert graph.problems == ()


# -- supersession -------------------------------------------------------------------------------


def test_superseded_parent_is_redirected() -> None:
    records = [
        pr(1),
        pr(2, "Depends on #1", state="closed", comments=("Superseded by #5, same change.",)),
        pr(5, "Depends on #1"),
        pr(3, "Depends on #2"),
    ]
    graph = build_series_graph(records, repo=REPO)
    assert graph.superseded == {2: 5}
    assert (3, 5, "depends_on") in edge_set(graph)
    assert (3, 2, "depends_on") not in edge_set(graph)
    assert graph.stacks[3] == [1, 5, 3]
    assert problem_set(graph) == {("superseded_parent", (3, 2))}
    assert "#5" in graph.problems[0].detail


def test_supersession_in_body_follows_chains_and_last_comment_wins() -> None:
    records = [
        pr(1, "Superseded by #2"),
        pr(2, comments=("Superseded by #8", "Actually superseded by #3")),
        pr(3),
        pr(4, "Depends on #1"),
    ]
    graph = build_series_graph(records)
    assert graph.superseded == {1: 2, 2: 3}
    assert edge_set(graph) == {(4, 3, "depends_on")}
    assert graph.stacks[4] == [3, 4]


def test_superseder_missing_and_supersession_loop() -> None:
    graph = build_series_graph([pr(1, "Superseded by #9"), pr(2, "Depends on #1")])
    assert problem_set(graph) == {("superseded_parent", (2, 1)), ("missing_parent", (2, 9))}
    loop = build_series_graph(
        [pr(1, "Superseded by #2"), pr(2, "Superseded by #1"), pr(3, "Depends on #1")]
    )
    assert ("conflict", (1, 2)) in problem_set(loop)
    assert edge_set(loop) == {(3, 1, "depends_on")}


def test_merged_pr_is_never_superseded() -> None:
    graph = build_series_graph(
        [
            pr(1, merged=True, state="closed", comments=("Superseded by #3",)),
            pr(2, "Depends on #1"),
            pr(3),
        ]
    )
    assert graph.superseded == {}
    assert edge_set(graph) == {(2, 1, "depends_on")}


# -- cycles and conflicts -----------------------------------------------------------------------


def test_cycle_is_reported_in_order_and_broken() -> None:
    graph = build_series_graph(
        [
            pr(7, "Depends on #3"),
            pr(3, "Depends on #5"),
            pr(5, "Depends on #7"),
            pr(9, "Depends on #5"),
        ]
    )
    assert problem_set(graph) == {("cycle", (3, 5, 7))}
    assert graph.cycle_breaks == ((3, 5),)
    assert graph.stacks == {3: [3], 5: [3, 7, 5], 7: [3, 7], 9: [3, 7, 5, 9]}
    assert "#3 → #5 → #7 → #3" in graph.problems[0].detail


def test_body_and_base_branch_disagree() -> None:
    graph = build_series_graph(
        [pr(1, head_ref="one"), pr(2, head_ref="two"), pr(3, "Depends on #1", base_ref="two")]
    )
    assert problem_set(graph) == {("conflict", (3, 1, 2))}
    assert edge_set(graph) == {(3, 1, "depends_on"), (3, 2, "base_branch")}
    agreeing = build_series_graph(
        [
            pr(1, head_ref="one"),
            pr(2, head_ref="two"),
            pr(3, "Depends on #1 and #2", base_ref="two"),
        ]
    )
    assert agreeing.problems == ()


def test_two_tracking_issues_conflict() -> None:
    graph = build_series_graph([pr(1, "Part of #100. Also part of #200.")])
    assert problem_set(graph) == {("conflict", (1, 100, 200))}
    assert graph.series_of(1) is not None and graph.series_of(1).key == "#100"  # type: ignore[union-attr]


def test_duplicate_numbers_are_bad_input() -> None:
    with pytest.raises(BadInput, match="#1 appears twice"):
        build_series_graph([pr(1), pr(1)])


# -- series -------------------------------------------------------------------------------------


def test_tracking_issue_keys_a_series_and_order_ties_by_number() -> None:
    records = [
        pr(40, "Part of #6307"),
        pr(30, "Part of #6307\nDepends on #50"),
        pr(50, "Part of #6307"),
        pr(20, "Part of #6307", state="closed", merged=True),
    ]
    graph = build_series_graph(records, repo=REPO)
    (series,) = graph.series
    assert (series.key, series.tracking_issue) == ("#6307", 6307)
    assert series.prs == (20, 30, 40, 50)
    assert series.order == (40, 50, 30)


def test_untracked_linked_prs_form_a_root_series() -> None:
    records = [
        pr(8, "Depends on #5"),
        pr(5),
        pr(9, "Depends on #8"),
        pr(1),
        pr(12, "Depends on #11"),
        pr(11),
    ]
    graph = build_series_graph(records)
    assert [(s.key, s.root, s.prs, s.order) for s in graph.series] == [
        ("root-#5", 5, (5, 8, 9), (5, 8, 9)),
        ("root-#11", 11, (11, 12), (11, 12)),
    ]
    assert graph.series_of(1) is None
    assert graph.stacks[1] == [1]


def test_untracked_parent_joins_its_dependents_series() -> None:
    records = [
        pr(1),
        pr(2, "Depends on #1\n\nPart of #100"),
        pr(3, "Depends on #2"),
        pr(4, "Part of #200\nDepends on #1"),
    ]
    graph = build_series_graph(records)
    by_key: dict[str, SeriesInfo] = {s.key: s for s in graph.series}
    assert set(by_key) == {"#100", "#200"}
    assert by_key["#100"].prs == (1, 2, 3)
    assert by_key["#100"].order == (1, 2, 3)
    assert by_key["#200"].prs == (4,)


def test_series_order_keeps_dependencies_through_other_series() -> None:
    records = [
        pr(1, "Part of #100\nDepends on #2"),
        pr(2, "Part of #200\nDepends on #3"),
        pr(3, "Part of #100"),
    ]
    graph = build_series_graph(records)
    assert {s.key: s.order for s in graph.series} == {"#100": (3, 1), "#200": (2,)}


def test_to_json_has_the_documented_shape() -> None:
    graph = build_series_graph(
        [
            pr(1, "Part of #100"),
            pr(2, "Depends on #1 and other/x#3\nPart of #100"),
            pr(4, "Depends on #9"),
        ],
        repo=REPO,
    )
    assert graph.to_json() == {
        "series": [{"key": "#100", "prs": [1, 2], "order": [1, 2]}],
        "edges": [
            {
                "child": 2,
                "parent": 1,
                "source": "depends_on",
                "text": "Depends on #1 and other/x#3",
                "origin": "body",
                "author": "",
                "field": "body",
            }
        ],
        "parents": {"1": [], "2": [1], "4": []},
        "stacks": {"2": [1, 2], "4": [4]},
        "problems": [
            {
                "kind": "missing_parent",
                "prs": [4, 9],
                "detail": "#4 depends on #9 (depends_on), which is not among the PRs given",
            }
        ],
        "external": [{"child": 2, "ref": "other/x#3"}],
        "superseded": [],
        "overrides": [],
        "suggestions": [],
    }
