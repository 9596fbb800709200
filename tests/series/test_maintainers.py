"""Pattern 7 of issue 28: a dependency sentence in a comment or review by a maintainer (GitHub's
author_association OWNER, MEMBER or COLLABORATOR) declares an edge; the same sentence from
anyone else is a suggestion, shown and never acted on; the author's own comments count as
before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackbot.cli.main import main
from stackbot.domain.records import CommentRecord, PrRecord
from stackbot.domain.series import build_series_graph
from stackbot.domain.types import PrNumber

SENTENCE = "Thanks! We should land this after #11 though, it touches the same loader."


def prs(association: str, kind: str = "comment") -> list[PrRecord]:
    comment = CommentRecord(
        author="maya", body=SENTENCE, id=31, kind=kind, author_association=association
    )
    return [
        PrRecord(number=PrNumber(11), author="ana", head_ref="ana/loader"),
        PrRecord(number=PrNumber(12), author="ben", head_ref="ben/cache", comments=(comment,)),
    ]


@pytest.mark.parametrize("association", ["OWNER", "MEMBER", "COLLABORATOR"])
@pytest.mark.parametrize("kind", ["comment", "review"])
def test_a_maintainers_sentence_declares(association: str, kind: str) -> None:
    graph = build_series_graph(prs(association, kind), repo="acme/app")
    (edge,) = graph.edges
    assert (edge.child, edge.parent, edge.source) == (12, 11, "depends_on")
    assert (edge.author, edge.written_in, edge.text) == ("maya", kind, "land this after #11")
    assert graph.suggestions == ()


@pytest.mark.parametrize("association", ["NONE", "CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR"])
def test_anyone_elses_sentence_is_a_suggestion(association: str) -> None:
    graph = build_series_graph(prs(association), repo="acme/app")
    assert graph.edges == ()
    (suggestion,) = graph.suggestions
    assert (suggestion.child, suggestion.parent, suggestion.author) == (12, 11, "maya")
    assert suggestion.origin == "comment 31 by @maya"


def test_a_maintainers_quote_of_a_sentence_declares_nothing() -> None:
    quoted = CommentRecord(
        author="maya", body="> Depends on #11\n\nIt does not.", author_association="OWNER"
    )
    graph = build_series_graph(
        [PrRecord(number=PrNumber(11)), PrRecord(number=PrNumber(12), comments=(quoted,))]
    )
    assert graph.edges == () and graph.suggestions == ()


def test_cli_lists_suggestions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = [
        {"number": 11, "author": "ana"},
        {
            "number": 12,
            "author": "ben",
            "comments": [{"author": "zed", "body": SENTENCE, "id": 4}],
        },
    ]
    path = tmp_path / "prs.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    assert main(["series", "graph", "--from-json", str(path), "--json"]) == 0
    graph = json.loads(capsys.readouterr().out)
    assert graph["edges"] == []
    assert graph["suggestions"] == [
        {
            "child": 12,
            "parent": 11,
            "text": "land this after #11",
            "origin": "comment 4 by @zed",
            "author": "zed",
        }
    ]
    assert main(["series", "graph", "--from-json", str(path)]) == 0
    assert "#12 after #11 (comment 4 by @zed): land this after #11" in capsys.readouterr().out
