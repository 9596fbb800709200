"""The phrasing table (``phrasing_table.py``): each text gives exactly the edges a reader takes
from it, every edge keeps its source and exact words, and quoting or code-fencing a declaration
takes its edge away."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from stackbot.domain.series import SeriesGraph, build_series_graph
from tests.series import phrasing_table
from tests.series.phrasing_table import HEADS, OWN, REPO, Case, records

POSITIVES = phrasing_table.POSITIVES + phrasing_table.FRESH_POSITIVES
NEGATIVES = phrasing_table.NEGATIVES + phrasing_table.FRESH_NEGATIVES


def graph_of(item: Case) -> SeriesGraph:
    return build_series_graph(records(item), repo=REPO)


def parents(item: Case) -> set[int]:
    return {edge.parent for edge in graph_of(item).edges if edge.child == OWN}


@pytest.mark.parametrize("item", POSITIVES, ids=[item.id for item in POSITIVES])
def test_positive_phrasing_gives_its_edges(item: Case) -> None:
    assert parents(item) == set(item.expected)


@pytest.mark.parametrize("item", NEGATIVES, ids=[item.id for item in NEGATIVES])
def test_negative_phrasing_gives_no_edge(item: Case) -> None:
    assert parents(item) == set()


@pytest.mark.parametrize("item", POSITIVES, ids=[item.id for item in POSITIVES])
def test_every_edge_keeps_its_source_and_exact_words(item: Case) -> None:
    texts = {"body": item.body}
    for edge in graph_of(item).edges:
        if edge.child != OWN:
            continue
        assert edge.source == "depends_on"
        assert edge.text, edge
        if edge.origin == "body":
            source = item.body
        else:
            assert edge.origin.startswith("comment by @"), edge.origin
            author = edge.origin.removeprefix("comment by @")
            source = "\n".join(body for who, body in item.comments if who == author)
        assert edge.text in source, (edge.text, texts)
        assert str(edge.parent) in edge.text or HEADS[edge.parent] in edge.text


def test_stack_list_edge_text_is_the_two_entries() -> None:
    (item,) = [case for case in POSITIVES if case.id == "ghstack"]
    (edge,) = graph_of(item).edges
    assert edge.text == "* __->__ #1204\n* #1203"
    assert edge.origin == "body"


def test_edge_text_is_the_phrase_and_its_references() -> None:
    (item,) = [case for case in POSITIVES if case.id == "several in a sentence"]
    texts = {edge.parent: edge.text for edge in graph_of(item).edges}
    assert texts == {1203: "Stacked on #1203", 1199: "needs #1199"}


# -- quoting or fencing a declaration removes it ----------------------------------------------


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))


def _fence(text: str) -> str:
    return f"```\n{text}\n```"


def _tilde_fence(text: str) -> str:
    return f"~~~text\n{text}\n~~~"


def _html_comment(text: str) -> str:
    return f"<!--\n{text}\n-->"


def _email_reply(text: str) -> str:
    return "On Mon, Jun 2, 2025 at 9:14 AM Bob <bob@example.com> wrote:\n" + _quote(text)


def _inline_code(text: str) -> str:
    return f"`` {text} ``"


WRAPPERS = {
    "quote": _quote,
    "fence": _fence,
    "tilde fence": _tilde_fence,
    "html comment": _html_comment,
    "email reply": _email_reply,
}
AROUND = st.sampled_from(
    ["", "Adds the eval hook.\n\n", "## Summary\nFaster cache eviction.\n\n", "Thanks!\n"]
)


def _wrapped(item: Case, wrap: str, before: str, after: str) -> Case:
    wrapper = WRAPPERS.get(wrap, _inline_code)
    body = before + wrapper(item.body) + "\n\n" + after if item.body else item.body
    comments = tuple((who, wrapper(text)) for who, text in item.comments)
    if item.comments:  # the declaration is in a comment: wrap that, keep the body
        return dataclasses.replace(item, comments=comments)
    return dataclasses.replace(item, body=body)


SINGLE_LINE = [item for item in POSITIVES if "\n" not in item.body and not item.comments]


@given(st.sampled_from(POSITIVES), st.sampled_from(sorted(WRAPPERS)), AROUND, AROUND.map(str.strip))
def test_quoting_or_fencing_any_positive_removes_its_edge(
    item: Case, wrap: str, before: str, after: str
) -> None:
    # HTML comments do not nest: a text holding one cannot be hidden in another.
    assume(wrap != "html comment" or "-->" not in item.body)
    assert parents(_wrapped(item, wrap, before, after)) == set()


@given(st.sampled_from(SINGLE_LINE), AROUND, AROUND.map(str.strip))
def test_a_code_span_around_any_one_line_positive_removes_its_edge(
    item: Case, before: str, after: str
) -> None:
    assert parents(_wrapped(item, "inline code", before, after)) == set()


@given(st.sampled_from(POSITIVES), AROUND)
def test_the_same_text_by_someone_else_in_a_comment_declares_nothing(
    item: Case, before: str
) -> None:
    comments = ((("carol", before + item.body),) if item.body else ()) + tuple(
        ("carol", text) for _, text in item.comments
    )
    moved = dataclasses.replace(item, body="Adds the eval hook.", comments=comments)
    assert parents(moved) == set()
