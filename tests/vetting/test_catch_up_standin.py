"""Commands GitHub never redelivered (issue 29 point 2): reconcile catches up on the comments of
every open PR and acts on each command once, whether the webhook or reconcile saw it first.
On SQLite and PostgreSQL (the ``engine`` fixture)."""

from __future__ import annotations

from sqlmodel import Session, select

from stackbot.db.engine import session_scope
from stackbot.db.models import ActedCommand
from stackbot.domain.tasks import FollowUp, Reconcile
from stackbot.taskqueue import queue
from tests.sync.pipeline import Pipeline, open_pr


def run_reconcile(pipeline: Pipeline) -> None:
    with session_scope(pipeline.engine) as session:
        queue.enqueue_follow_up(session, FollowUp.of(Reconcile(pipeline.repo)))
    pipeline.run_tasks()


def approving_tasks(pipeline: Pipeline, comment_id: int) -> list[int]:
    """The pr_command tasks that acted on the comment (claimed it)."""
    with Session(pipeline.engine) as session:
        rows = session.exec(select(ActedCommand).where(ActedCommand.comment_id == comment_id)).all()
        return [row.task_id for row in rows]


def test_an_ok_to_test_never_delivered_is_acted_on_by_reconcile_once(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    head = pipeline.head(number)
    comment = pipeline.control.comment(pipeline.repo, number, "bob", f"/ok to test {head[:7]}")
    assert pipeline.drop_deliveries() >= 1  # answered 503 while the database was down
    pipeline.run_tasks()
    assert pipeline.approvals(number) == []  # nothing told stackbot

    run_reconcile(pipeline)

    [approval] = pipeline.approvals(number)
    assert (approval.sha, approval.vetter, approval.comment_id) == (head, "bob", comment.id)
    assert any(
        t.payload["number"] == number and "approved" in str(t.payload["reason"])
        for t in pipeline.tasks("integrate")
    )
    assert len(approving_tasks(pipeline, comment.id)) == 1
    integrations = len(pipeline.tasks("integrate"))

    # The next rounds (and the delivery, should GitHub redeliver it late) change nothing.
    run_reconcile(pipeline)
    run_reconcile(pipeline)
    assert len(pipeline.approvals(number)) == 1
    assert len(pipeline.tasks("integrate")) == integrations
    assert len(approving_tasks(pipeline, comment.id)) == 1


def test_a_comment_seen_by_the_webhook_and_reconcile_is_acted_on_once(
    pipeline: Pipeline,
) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    head = pipeline.head(number)
    # A non-vetter's command: acting twice would show as a second reply.
    asked = pipeline.control.comment(pipeline.repo, number, "carol", f"/ok to test {head[:7]}")
    approved = pipeline.control.comment(pipeline.repo, number, "dave", f"/ok to test {head}")
    # Reconcile first (its tasks wait), then the webhook: both paths queue each comment.
    with session_scope(pipeline.engine) as session:
        queue.enqueue_follow_up(session, FollowUp.of(Reconcile(pipeline.repo)))
    pipeline.deliver()
    run_reconcile(pipeline)

    done = [t for t in pipeline.tasks("pr_command", status="done")]
    assert sum(t.payload["comment_id"] == asked.id for t in done) >= 2  # both paths ran
    [reply] = pipeline.replies(number)
    assert reply.body.startswith("@carol, only vetters")
    assert [(a.sha, a.vetter) for a in pipeline.approvals(number)] == [(head, "dave")]
    assert len(approving_tasks(pipeline, asked.id)) == 1
    assert len(approving_tasks(pipeline, approved.id)) == 1
