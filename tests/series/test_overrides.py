"""Overrides, the author's comments, branch names and supersession in the graph and its JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackbot.cli.main import main
from stackbot.domain.records import CommentRecord, PrRecord
from stackbot.domain.series import DependencyOverride, build_series_graph
from stackbot.domain.types import PrNumber
from tests.series.helpers import REPO, edge_set, problem_set


def record(number: int, body: str = "", **fields: object) -> PrRecord:
    fields.setdefault("author", "alice")
    fields.setdefault("head_ref", f"alice/{number}")
    return PrRecord(number=PrNumber(number), body=body, **fields)  # type: ignore[arg-type]


def override(child: int, parent: int, kind: str, by: str = "alice") -> DependencyOverride:
    return DependencyOverride(PrNumber(child), PrNumber(parent), kind, by, 5, "/stackbot ...")  # type: ignore[arg-type]


def test_no_dependency_removes_what_text_says_and_depends_on_adds() -> None:
    records = [record(1), record(2), record(3, "Depends on #1")]
    graph = build_series_graph(
        records,
        repo=REPO,
        overrides=[override(3, 1, "no_dependency"), override(3, 2, "depends_on")],
    )
    assert edge_set(graph) == {(3, 2, "override")}
    (edge,) = graph.edges
    assert edge.origin == "/stackbot depends-on by @alice (comment 5)"
    assert graph.problems == ()


def test_the_latest_override_of_a_pair_wins() -> None:
    records = [record(1), record(3, "Depends on #1")]
    later_yes = [override(3, 1, "no_dependency"), override(3, 1, "depends_on")]
    later_no = list(reversed(later_yes))
    assert edge_set(build_series_graph(records, overrides=later_yes)) == {
        (3, 1, "depends_on"),
        (3, 1, "override"),
    }
    assert edge_set(build_series_graph(records, overrides=later_no)) == set()


def test_no_dependency_on_a_base_branch_parent_keeps_the_edge_and_says_why() -> None:
    records = [record(1), record(2, base_ref="alice/1")]
    graph = build_series_graph(records, repo=REPO, overrides=[override(2, 1, "no_dependency")])
    assert edge_set(graph) == {(2, 1, "base_branch")}
    assert problem_set(graph) == {("conflict", (2, 1))}
    assert "base_branch edge holds #1's commits" in graph.problems[0].detail


def test_only_the_authors_comments_count_and_the_origin_names_the_comment() -> None:
    comments = (
        CommentRecord("bob", "Stacked on #1", id=10),
        CommentRecord("Alice", "Stacked on #2", id=11),
    )
    graph = build_series_graph([record(1), record(2), record(3, comments=comments)], repo=REPO)
    assert edge_set(graph) == {(3, 2, "depends_on")}
    assert graph.edges[0].origin == "comment 11 by @Alice"
    assert graph.edges[0].text == "Stacked on #2"


def test_a_branch_name_resolves_to_the_open_pr_whose_head_it_is() -> None:
    records = [
        record(1, head_ref="feat/x", state="closed"),
        record(2, head_ref="feat/x"),
        record(3, "Stacked on `feat/x`"),
        record(4, "Based on branch nobody/has-this"),
    ]
    assert edge_set(build_series_graph(records, repo=REPO)) == {(3, 2, "depends_on")}
    shared = [
        record(1, head_ref="feat/x"),
        record(2, head_ref="feat/x"),
        record(3, "Stacked on feat/x"),
    ]
    graph = build_series_graph(shared, repo=REPO)
    assert graph.edges == ()
    assert problem_set(graph) == {("conflict", (3, 1, 2))}


def test_json_lists_supersession_with_its_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = [
        {"number": 1, "author": "a", "body": "Superseded by #3"},
        {
            "number": 2,
            "author": "a",
            "comments": [{"author": "b", "id": 9, "body": "Superseded by #3, closing."}],
        },
        {"number": 3, "author": "a"},
    ]
    path = tmp_path / "prs.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["series", "graph", "--from-json", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["superseded"] == [
        {"pr": 1, "by": 3, "source": "body", "text": "Superseded by #3"},
        {"pr": 2, "by": 3, "source": "comment 9 by @b", "text": "Superseded by #3"},
    ]


def test_cli_applies_the_authors_override_commands_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = [
        {"number": 1, "author": "a"},
        {"number": 2, "author": "a"},
        {
            "number": 3,
            "author": "a",
            "body": "Depends on #1",
            "comments": [
                {"author": "a", "id": 7, "body": "/stackbot no-dependency #1"},
                {"author": "mallory", "id": 8, "body": "/stackbot depends-on #2"},
            ],
        },
    ]
    path = tmp_path / "prs.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["series", "graph", "--from-json", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["edges"] == []
    assert out["overrides"] == [
        {
            "child": 3,
            "parent": 1,
            "kind": "no_dependency",
            "by": "a",
            "comment_id": 7,
            "text": "/stackbot no-dependency #1",
        }
    ]
    assert main(["series", "graph", "--from-json", str(path)]) == 0
    assert "superseded" not in capsys.readouterr().out
