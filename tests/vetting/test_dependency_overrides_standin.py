"""Dependencies from the author's comments and the override commands, end to end: the stand-in
sends the comment (with its real author), the webhook intake records it, the worker stores the
override and rebuilds the graph, and the API shows the edge with its source and words. Runs on
SQLite and PostgreSQL (the ``engine`` fixture)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from stackbot.db import github_store as store
from stackbot.db.engine import session_scope
from stackbot.web.app import create_app
from tests.sync.pipeline import Pipeline, open_pr


def edges(pipeline: Pipeline) -> set[tuple[int, int, str]]:
    return {(e["child"], e["parent"], e["source"]) for e in stored_edges(pipeline)}


def stored_edges(pipeline: Pipeline) -> list[dict[str, Any]]:
    with session_scope(pipeline.engine) as session:
        repository = store.get_repository(session, full_name=pipeline.repo)
        assert repository is not None and repository.id is not None
        return [
            {
                "child": e.child,
                "parent": e.parent,
                "source": e.source,
                "text": e.text,
                "origin": e.origin,
            }
            for e in store.list_edges(session, repo_id=repository.id)
        ]


def api(pipeline: Pipeline, path: str) -> Any:
    with TestClient(create_app(pipeline.settings, engine=pipeline.engine)) as client:
        answer = client.get(path)
        assert answer.status_code == 200, answer.text
        return answer.json()


def two_prs(pipeline: Pipeline, body: str = "") -> tuple[int, int]:
    parent = open_pr(pipeline, author="carol", branch="carol/base", title="Base")
    child = open_pr(pipeline, author="carol", branch="carol/top", title="Top", body=body)
    pipeline.deliver()
    return parent, child


def test_the_authors_depends_on_command_draws_an_edge_shown_in_the_api(
    pipeline: Pipeline,
) -> None:
    parent, child = two_prs(pipeline)
    assert edges(pipeline) == set()
    comment = pipeline.control.comment(
        pipeline.repo, child, "carol", f"/stackbot depends-on #{parent}"
    )
    pipeline.deliver()
    assert edges(pipeline) == {(child, parent, "override")}
    [edge] = stored_edges(pipeline)
    assert edge["text"] == f"/stackbot depends-on #{parent}"
    assert edge["origin"] == f"/stackbot depends-on by @carol (comment {comment.id})"
    assert pipeline.replies(child) == []  # acting is the answer; the report shows the graph
    series = api(pipeline, f"/api/series/root-{parent}")
    assert series["edges"] == [
        {
            "child": child,
            "parent": parent,
            "source": "override",
            "text": f"/stackbot depends-on #{parent}",
            "origin": f"/stackbot depends-on by @carol (comment {comment.id})",
        }
    ]
    pull = api(pipeline, f"/api/pulls/{child}")
    assert [(d["parent"], d["source"]) for d in pull["dependencies"]] == [(parent, "override")]
    page = TestClient(create_app(pipeline.settings, engine=pipeline.engine)).get(
        f"/series/root-{parent}"
    )
    assert f"override (/stackbot depends-on by @carol (comment {comment.id}))" in page.text


def test_a_strangers_override_is_ignored_with_one_fixed_reply(pipeline: Pipeline) -> None:
    parent, child = two_prs(pipeline)
    pipeline.control.comment(pipeline.repo, child, "mallory", f"/stackbot depends-on #{parent}")
    pipeline.control.comment(pipeline.repo, child, "mallory", f"/stackbot depends-on #{parent}")
    pipeline.deliver()
    assert edges(pipeline) == set()
    replies = [c.body for c in pipeline.replies(child)]
    # A non-vetter gets at most one reply per PR, a fixed text that echoes nothing.
    assert replies == [
        "@mallory, only the PR's author and vetters can change what it depends on "
        "(`/stackbot depends-on #N`, `/stackbot no-dependency #N`)."
    ]


def test_a_vetters_no_dependency_beats_the_body_and_depends_on_restores_it(
    pipeline: Pipeline,
) -> None:
    parent, child = two_prs(pipeline, body="Stacked on top of #1.")
    assert parent == 1
    assert edges(pipeline) == {(child, parent, "depends_on")}
    pipeline.control.comment(pipeline.repo, child, "dave", f"/stackbot no-dependency #{parent}")
    pipeline.deliver()
    assert edges(pipeline) == set()
    graph = api(pipeline, f"/api/pulls/{child}")
    assert graph["dependencies"] == []
    pipeline.control.comment(pipeline.repo, child, "carol", f"/stackbot depends-on {parent}")
    pipeline.deliver()
    assert edges(pipeline) == {(child, parent, "depends_on"), (child, parent, "override")}


def test_only_the_authors_comments_declare_dependencies(pipeline: Pipeline) -> None:
    parent, child = two_prs(pipeline)
    other = open_pr(pipeline, author="bob", branch="bob/other", title="Other")
    pipeline.deliver()
    pipeline.control.comment(pipeline.repo, child, "mallory", f"Blocked by #{other}, surely?")
    pipeline.deliver()
    assert edges(pipeline) == set()
    comment = pipeline.control.comment(
        pipeline.repo, child, "carol", "Heads-up: this is stacked on `carol/base` now."
    )
    pipeline.deliver()
    assert stored_edges(pipeline) == [
        {
            "child": child,
            "parent": parent,
            "source": "depends_on",
            "text": "stacked on `carol/base`",
            "origin": f"comment {comment.id} by @carol",
        }
    ]
