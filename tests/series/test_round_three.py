"""Round three of dependency phrasings (issue 28, ``phrasing_round_three.py``): each case gives
exactly the edges and supersessions a reader takes from it; every edge keeps its words."""

from __future__ import annotations

import pytest

from stackbot.domain.series import SeriesGraph, build_series_graph
from tests.series import phrasing_round_three as table
from tests.series.phrasing_round_three import REPO, Case, records

POSITIVES = table.POSITIVES + table.HELD_OUT_POSITIVES
CASES = POSITIVES + table.NEGATIVES + table.HELD_OUT_NEGATIVES


def graph_of(item: Case) -> SeriesGraph:
    return build_series_graph(records(item), repo=REPO)


@pytest.mark.parametrize("item", CASES, ids=[item.id for item in CASES])
def test_case_gives_exactly_its_edges(item: Case) -> None:
    graph = graph_of(item)
    assert {(edge.child, edge.parent) for edge in graph.edges} == set(item.edges)


@pytest.mark.parametrize("item", CASES, ids=[item.id for item in CASES])
def test_case_gives_exactly_its_supersessions(item: Case) -> None:
    graph = graph_of(item)
    assert set(graph.superseded.items()) == set(item.superseded)


@pytest.mark.parametrize("item", POSITIVES, ids=[item.id for item in POSITIVES])
def test_every_edge_keeps_words_found_in_the_texts(item: Case) -> None:
    texts = [item.title, item.body, *(body for _, body in item.comments)]
    texts += [body for _, body in item.others]
    for edge in graph_of(item).edges:
        assert edge.source == "depends_on"
        assert any(edge.text in text for text in texts), edge
