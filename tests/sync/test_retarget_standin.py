"""A parent PR merges: its open children are moved to its base before its branch goes, through
the stand-in, which closes the children of a deleted branch as GitHub does (SQLite and
PostgreSQL)."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi.testclient import TestClient

from stackbot.db.engine import session_scope
from stackbot.domain.tasks import RetargetChildren
from stackbot.taskqueue import queue
from stackbot.web.app import create_app
from tests.support.standin import StandinWorld
from tests.sync.pipeline import Pipeline, open_pr


@pytest.fixture
def pipeline(stack_pipeline: Pipeline) -> Pipeline:
    return stack_pipeline


def stack_of_three(pipeline: Pipeline) -> tuple[int, int, int]:
    parent = open_pr(pipeline, author="carol", branch="carol/base", title="Base")
    child = open_pr(pipeline, author="carol", branch="carol/mid", title="Mid", base="carol/base")
    other = open_pr(pipeline, author="erin", branch="erin/other", title="Other", base="carol/base")
    pipeline.deliver()
    return parent, child, other


def test_merged_parent_children_are_retargeted_before_the_branch_goes(
    pipeline: Pipeline,
) -> None:
    control, repo = pipeline.control, pipeline.repo
    parent, child, other = stack_of_three(pipeline)
    parent_head = pipeline.head(parent)
    control.merge_pull(repo, parent, merger="bob")
    pipeline.deliver()
    for number in (child, other):
        pull = control.pull(repo, number)
        assert (pull.state, pull.base_ref) == ("open", "main")
        [said] = pipeline.replies(number)
        assert said.body.startswith("<!-- stackbot:retarget:")
        text = said.body.split("\n", 1)[1]
        assert text.startswith(
            f"#{parent} was merged into `main`, so stackbot changed this pull request's base "
            "from `carol/base` to `main`"
        )
        assert f"--old-base {parent_head} --onto main" in text
    # The branch goes; the children stay open (without the retarget GitHub closes them).
    control.set_branch(repo, "carol/base", None, pusher="bob")
    pipeline.deliver()
    assert control.pull(repo, child).state == "open"
    # A redone task (a crash after the comment, a redelivery) changes and says nothing twice.
    with session_scope(pipeline.engine) as session:
        task = RetargetChildren(repo, parent)
        queue.enqueue(session, task.KIND, task.to_payload())
    edits_before = len(control.requests("PATCH", f"/pulls/{child}"))
    assert pipeline.run_tasks() >= 1
    assert len(pipeline.replies(child)) == 1
    assert len(control.requests("PATCH", f"/pulls/{child}")) == edits_before


def test_the_standin_closes_the_children_of_a_deleted_branch(
    pipeline: Pipeline, standin: StandinWorld
) -> None:
    """What GitHub does when stackbot is not there: the child is closed, cannot be reopened."""
    control, repo = pipeline.control, pipeline.repo
    parent, child, other = stack_of_three(pipeline)
    control.close_pull(repo, parent, sender="carol")  # closed, not merged: nothing retargets
    pipeline.deliver()
    assert control.pull(repo, child).base_ref == "carol/base"
    token = control.create_token("bob")
    api = httpx.Client(base_url=standin.url, headers={"Authorization": f"token {token}"})
    with api:
        answer = api.delete(f"/repos/{repo}/git/refs/heads/carol/base")
        assert answer.status_code == 204
        pipeline.deliver()
        closed = [json.loads(d.body) for d in control.deliveries("pull_request", "closed")]
        assert {d["number"] for d in closed} >= {child, other}
        child_closed = next(d for d in closed if d["number"] == child)
        assert child_closed["pull_request"]["merged"] is False
        assert child_closed["sender"]["login"] == "bob"
        assert [json.loads(d.body)["deleted"] for d in control.deliveries("push")][-1] is True
        assert control.pull(repo, child).state == "closed"
        reopen = api.patch(f"/repos/{repo}/pulls/{child}", json={"state": "open"})
        assert reopen.status_code == 422
        assert "no longer exists" in reopen.text
        moved = api.patch(f"/repos/{repo}/pulls/{child}", json={"base": "main"})
        assert moved.status_code == 422  # a closed PR's base cannot change either


def test_a_child_closed_before_stackbot_could_move_it_is_on_the_dashboard(
    pipeline: Pipeline,
) -> None:
    control, repo = pipeline.control, pipeline.repo
    parent, child, other = stack_of_three(pipeline)
    parent_head = pipeline.head(parent)
    control.merge_pull(repo, parent, merger="bob")
    control.set_branch(repo, "carol/base", None, pusher="bob")  # before stackbot hears of it
    pipeline.deliver()
    assert control.pull(repo, child).state == "closed"
    assert pipeline.replies(child) == []  # nothing to retarget any more: nothing said
    with TestClient(create_app(pipeline.settings, engine=pipeline.engine)) as web:
        page = web.get("/")
    assert page.status_code == 200
    assert "Closed with their base branch" in page.text
    for number in (child, other):
        command = (
            f"git push origin {parent_head}:refs/heads/carol/base &amp;&amp; gh pr reopen "
            f"{number} &amp;&amp; gh pr edit {number} --base main &amp;&amp; "
            "git push origin --delete carol/base"
        )
        assert command in page.text
    # The recovery works on the stand-in: branch back, reopen, move the base, branch gone.
    control.set_branch(repo, "carol/base", parent_head, pusher="carol")
    control.reopen_pull(repo, child, sender="carol")
    control.edit_pull(repo, child, base="main", editor="carol")
    control.set_branch(repo, "carol/base", None, pusher="carol")
    pipeline.deliver()
    assert (control.pull(repo, child).state, control.pull(repo, child).base_ref) == ("open", "main")
    with TestClient(create_app(pipeline.settings, engine=pipeline.engine)) as web:
        page = web.get("/")
    assert f"gh pr reopen {child} " not in page.text and f"gh pr reopen {other} " in page.text
