"""PR sync and reconciliation against the GitHub stand-in, through the real intake and worker."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from stackbot.db import github_store as store
from stackbot.db.engine import session_scope
from stackbot.domain.tasks import FollowUp, Reconcile
from stackbot.services.sync import sync_pull_request
from stackbot.taskqueue import queue
from tests.sync.pipeline import Pipeline, open_pr, push


def stored(pipeline: Pipeline, number: int) -> dict[str, object]:
    with session_scope(pipeline.engine) as session:
        repository = store.get_repository(session, full_name=pipeline.repo)
        assert repository is not None and repository.id is not None
        row = store.get_pull(session, repo_id=repository.id, number=number)
        assert row is not None, f"#{number} is not stored"
        return {
            "head": row.head_sha,
            "state": row.state,
            "history": list(row.head_history),
            "series": store.series_keys_of(session, repo_id=repository.id, number=number),
            "edges": [
                (e.child, e.parent, e.source)
                for e in store.list_edges(session, repo_id=repository.id)
            ],
            "clone_url": repository.clone_url,
        }


def tracked_stack(pipeline: Pipeline) -> tuple[int, int, int]:
    issue = pipeline.control.open_issue(
        pipeline.repo, author="alice", title="[TRACKING] explicit groups"
    ).number
    parent = open_pr(
        pipeline, author="carol", branch="carol/amax", title="Amax group", body=f"Part of #{issue}."
    )
    child = open_pr(
        pipeline,
        author="carol",
        branch="carol/callers",
        title="Callers",
        base="carol/amax",
        body=f"Part of #{issue}.",
    )
    return issue, parent, child


def test_opened_prs_are_stored_with_their_graph_and_series(pipeline: Pipeline) -> None:
    issue, parent, child = tracked_stack(pipeline)
    pipeline.deliver()
    child_row = stored(pipeline, child)
    assert child_row["head"] == pipeline.head(child)
    assert child_row["series"] == [f"#{issue}"]
    assert (child, parent, "base_branch") in child_row["edges"]  # type: ignore[operator]
    assert str(child_row["clone_url"]).startswith("file://")
    [task] = pipeline.tasks("integrate")  # both PRs' syncs collapse into one pending integration
    assert task.dedupe_key == f"integrate:{pipeline.repo}:#{issue}"
    assert task.payload["series_key"] == f"#{issue}" and task.payload["repo"] == pipeline.repo


def test_a_sync_without_changes_asks_for_nothing(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    client = pipeline.client()
    first = sync_pull_request(
        pipeline.engine, client, pipeline.settings, repo=pipeline.repo, number=number
    )
    again = sync_pull_request(
        pipeline.engine, client, pipeline.settings, repo=pipeline.repo, number=number
    )
    assert first.changed and not again.changed
    pipeline.control.edit_pull(pipeline.repo, number, title="Fix, retitled")
    retitled = sync_pull_request(
        pipeline.engine, client, pipeline.settings, repo=pipeline.repo, number=number
    )
    assert not retitled.changed  # a title does not change an integration
    push(pipeline, number, author="carol")
    pushed = sync_pull_request(
        pipeline.engine, client, pipeline.settings, repo=pipeline.repo, number=number
    )
    assert pushed.changed


def test_a_lone_pr_is_integrated_on_its_own_and_a_closed_one_is_not(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    [task] = pipeline.tasks("integrate")
    assert task.dedupe_key == f"integrate:{pipeline.repo}:pr-#{number}"
    assert task.payload["series_key"] is None and task.payload["number"] == number
    with session_scope(pipeline.engine) as session:
        session.delete(session.get(type(task), task.id))
    pipeline.control.close_pull(pipeline.repo, number)
    pipeline.deliver()
    assert stored(pipeline, number)["state"] == "closed"
    assert pipeline.tasks("integrate") == []


def run_reconcile(pipeline: Pipeline) -> None:
    with session_scope(pipeline.engine) as session:
        queue.enqueue_follow_up(session, FollowUp.of(Reconcile(pipeline.repo)))
    pipeline.run_tasks()


def test_reconciliation_repairs_lost_deliveries(pipeline: Pipeline) -> None:
    issue, parent, child = tracked_stack(pipeline)
    pipeline.deliver()
    old_head = pipeline.head(child)
    new_head = push(pipeline, child, author="carol")  # a synchronize whose delivery is lost
    pipeline.control.close_pull(pipeline.repo, parent)  # a close whose delivery is lost
    late = open_pr(
        pipeline, author="carol", branch="carol/late", title="Late", body=f"Part of #{issue}."
    )
    assert pipeline.drop_deliveries() >= 3
    pipeline.run_tasks()
    assert stored(pipeline, child)["head"] == old_head  # nothing told stackbot

    run_reconcile(pipeline)

    assert stored(pipeline, child)["head"] == new_head
    assert stored(pipeline, child)["history"] == [old_head]
    assert stored(pipeline, parent)["state"] == "closed"
    assert stored(pipeline, late)["series"] == [f"#{issue}"]
    syncs = pipeline.tasks("sync_pull", status="done")
    assert {t.payload["number"] for t in syncs if t.payload.get("action") == "reconcile"} == {
        parent,
        child,
        late,
    }
    rounds = pipeline.tasks("reconcile")
    [next_round] = [t for t in rounds if t.payload.get("repo") == pipeline.repo]  # rescheduled
    # and the round over every tracked repository, which the first sync started, is pending
    assert [t.payload for t in rounds if t.payload.get("repo") is None] == [{"repo": None}]
    assert next_round.dedupe_key == f"reconcile:{pipeline.repo}"
    due = next_round.run_after.replace(tzinfo=next_round.run_after.tzinfo or UTC)
    interval = timedelta(seconds=pipeline.settings.worker.reconcile_interval_s)
    assert (
        datetime.now(UTC) + interval - timedelta(seconds=60) < due <= datetime.now(UTC) + interval
    )


def test_reconciliation_of_an_unchanged_repository_syncs_nothing(pipeline: Pipeline) -> None:
    tracked_stack(pipeline)
    pipeline.deliver()
    done_before = len(pipeline.tasks("sync_pull", status="done"))
    run_reconcile(pipeline)
    assert len(pipeline.tasks("sync_pull", status="done")) == done_before


def test_reconciliation_fans_out_to_tracked_repositories(pipeline: Pipeline) -> None:
    tracked_stack(pipeline)
    pipeline.deliver()
    with session_scope(pipeline.engine) as session:
        queue.enqueue_follow_up(session, FollowUp.of(Reconcile(None)))
    pipeline.run_tasks()
    done = pipeline.tasks("reconcile", status="done")
    assert sorted(str(t.payload["repo"]) for t in done) == sorted(["None", pipeline.repo])
    pending = sorted(str(t.payload["repo"]) for t in pipeline.tasks("reconcile"))
    assert pending == sorted(["None", pipeline.repo])  # both come round again
