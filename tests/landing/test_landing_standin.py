"""A landing that GitHub stops half-way, on the stand-in and both databases: a PR pushed while
the landing merges, a PR branch protection refuses. What merged stays merged, the rest stays open
and correctly based (never closed with a deleted base), and every PR of the landing says so.

The landing is written in the merging state with the heads that were tested (what the waiting
state hands over once the tree tested green), so the test drives exactly the merge loop."""

from __future__ import annotations

from typing import Any

import pytest
from sqlmodel import Session, col, delete, select

from stackbot.db import github_store
from stackbot.db.engine import session_scope
from stackbot.db.models import IntegrationRun, IntegrationStep, Job, Landing, Task
from stackbot.domain.landing import LandingEntry, LandingState
from stackbot.domain.landing_text import LANDING_MARKER
from stackbot.domain.tasks import Land
from stackbot.services import landing, merge_group
from stackbot.standin import deliveries, hosting, merging
from stackbot.taskqueue import queue
from stackbot.web.landing_metrics import landing_lines
from tests.sync.pipeline import Pipeline, open_pr, push


def _series(pipeline: Pipeline) -> list[int]:
    first = open_pr(pipeline, author="carol", branch="amax-group", title="Amax group")
    second = open_pr(
        pipeline, author="carol", branch="amax-tests", title="Tests", base="amax-group"
    )
    third = open_pr(pipeline, author="carol", branch="amax-docs", title="Docs", base="amax-tests")
    pipeline.deliver()
    pipeline.control.set_merge_settings(pipeline.repo, delete_branch_on_merge=True)
    return [first, second, third]


def _merging(
    pipeline: Pipeline,
    numbers: list[int],
    heads: dict[int, str],
    method: str = "squash",
    state: LandingState = LandingState.MERGING,
) -> int:
    with session_scope(pipeline.engine) as session:
        repo = github_store.get_repository(session, full_name=pipeline.repo)
        assert repo is not None and repo.id is not None
        row = Landing(
            repo_id=repo.id,
            series_key=f"root-#{numbers[0]}",
            requested_on=numbers[-1],
            requested_by="bob",
            comment_id=1,
            state=state.value,
            merge_method=method,
            entries=[LandingEntry(n, heads[n]).to_json() for n in numbers],
        )
        session.add(row)
        session.flush()
        assert row.id is not None
        landing_id = row.id
    with session_scope(pipeline.engine) as session:
        queue.enqueue(session, "land", Land(pipeline.repo, landing_id).to_payload())
    return landing_id


def _run_landing(pipeline: Pipeline) -> None:
    landing.register_tasks(pipeline.worker.registry)
    pipeline.handled = (*pipeline.handled, "land")
    pipeline.run_tasks()


def _row(pipeline: Pipeline, landing_id: int) -> Landing:
    with Session(pipeline.engine) as session:
        row = session.exec(select(Landing).where(Landing.id == landing_id)).one()
        return row


def _comment(pipeline: Pipeline, number: int) -> str:
    found = [c.body for c in pipeline.bot_comments(number) if c.body.startswith(LANDING_MARKER)]
    assert len(found) == 1, f"#{number}: {len(found)} landing comments"
    return found[0]


def test_a_push_mid_landing_stops_it_with_the_rest_open_and_based_on_main(
    pipeline: Pipeline,
) -> None:
    first, second, third = numbers = _series(pipeline)
    tested = {n: pipeline.head(n) for n in numbers}
    landing_id = _merging(pipeline, numbers, tested)
    push(pipeline, second, author="carol")  # after the tree was tested, before it lands
    _run_landing(pipeline)

    control, repo = pipeline.control, pipeline.repo
    assert control.pull(repo, first).merged
    middle, top = control.pull(repo, second), control.pull(repo, third)
    assert middle.state == "open" and middle.base_ref == "main"  # retargeted before #first merged
    assert top.state == "open" and top.base_ref == "amax-tests"  # its parent is still open
    row = _row(pipeline, landing_id)
    assert row.state == "stopped"
    assert (
        row.reason == f"#{second} did not merge: a new push: its head is no longer the tested one"
    )
    for number in numbers:
        body = _comment(pipeline, number)
        assert f"⛔ **Landing stopped**: #{second} did not merge: a new push" in body
        assert f"#{first} (tested head `{tested[first][:10]}`) merged into `main`" in body
        assert f"Still open: #{second}, #{third}" in body
    assert not [
        p for p in control.repo(repo).pulls.values() if p.state == "closed" and not p.merged
    ]
    metrics = landing_lines(pipeline.engine)
    assert 'stackbot_landings{state="stopped"} 1' in metrics
    assert "stackbot_landed_prs_total 1" in metrics
    assert 'stackbot_landings_stopped_total{cause="new push"} 1' in metrics


def test_branch_protection_refusing_a_merge_is_reported_as_blocked(pipeline: Pipeline) -> None:
    first, second, third = numbers = _series(pipeline)
    tested = {n: pipeline.head(n) for n in numbers}
    control, repo = pipeline.control, pipeline.repo
    landing_id = _merging(pipeline, numbers, tested)
    control.protect_branch(repo, "main", approvals=1)
    control.approve(repo, first, "bob")  # bob has write access: #first may merge, #second not
    _run_landing(pipeline)

    assert control.pull(repo, first).merged
    assert not control.pull(repo, second).merged and control.pull(repo, second).base_ref == "main"
    row = _row(pipeline, landing_id)
    assert row.state == "stopped" and row.reason is not None
    assert row.reason.startswith(f"#{second} did not merge: blocked: needs")
    assert "approving review" in row.reason
    assert f"not reached: #{second} did not merge" in _comment(pipeline, third)


def _tested_green(
    pipeline: Pipeline,
    numbers: list[int],
    series_key: str,
    left_out: dict[int, int] | None = None,
) -> None:
    """A series run of the PRs' current heads on the current main, its one job passed: what the
    integration and the test plan leave once the tree tested green. ``left_out``: PRs the run
    also merged but left out of its tree for a conflict (with the PR named), as a series run
    leaves out a conflicting sibling (its status is then ``conflict``)."""
    left_out = left_out or {}
    main = pipeline.control.repo(pipeline.repo).bare_path
    main_sha = hosting.resolve(main, "refs/heads/main")
    with session_scope(pipeline.engine) as session:
        repo = github_store.get_repository(session, full_name=pipeline.repo)
        assert repo is not None and repo.id is not None and main_sha is not None
        run = IntegrationRun(
            repo_id=repo.id,
            kind="series",
            series_key=series_key,
            base_ref="main",
            base_sha=main_sha,
            status="conflict" if left_out else "clean",
            final_tree="f" * 40,
            final_commit="c" * 40,
            heads={str(n): pipeline.head(n) for n in [*numbers, *left_out]},
        )
        session.add(run)
        session.flush()
        assert run.id is not None
        for position, number in enumerate([*numbers, *left_out]):
            session.add(
                IntegrationStep(
                    run_id=run.id,
                    position=position,
                    pr_number=number,
                    head_sha=pipeline.head(number),
                    outcome="conflict" if number in left_out else "clean",
                    conflicts_with=[left_out[number]] if number in left_out else [],
                )
            )
        session.add(
            Job(
                repo_id=repo.id,
                integration_run_id=run.id,
                test_set="amax-group",
                shape="1x4",
                tree_sha="f" * 40,
                commit_sha="c" * 40,
                config_hash="h" * 64,
                status="passed",
            )
        )


def test_a_vetter_lands_and_cancels_and_protection_blocks_before_anything_merges(
    pipeline: Pipeline,
) -> None:
    first, second, third = numbers = _series(pipeline)
    control, repo = pipeline.control, pipeline.repo
    with session_scope(pipeline.engine) as session:
        stored = github_store.get_repository(session, full_name=repo)
        assert stored is not None and stored.id is not None
        [key] = github_store.series_keys_of(session, repo_id=stored.id, number=second)
    control.comment(repo, second, "bob", f"/stackbot land #{second}")
    pipeline.deliver()
    [reply] = [c.body for c in pipeline.replies(second) if "landing" in c.body]
    assert reply.startswith(f"Queued the series up to #{second} for landing: #{first} → #{second},")
    control.comment(repo, third, "bob", "/stackbot land cancel")
    pipeline.deliver()
    assert any(
        c.body == f"Landing of #{first} → #{second} cancelled; nothing more merges."
        for c in pipeline.replies(third)
    )

    control.protect_branch(repo, "main", approvals=1)
    _tested_green(pipeline, numbers, key)
    control.comment(repo, third, "bob", "/stackbot land")
    pipeline.deliver()
    _run_landing(pipeline)  # green, but nobody approved: blocked, nothing merged
    assert not any(control.pull(repo, n).merged for n in numbers)
    body = _comment(pipeline, third)
    assert f"**Queued for landing**: #{first} → #{second} → #{third}." in body
    assert (
        f"#{first} is blocked: needs 1 more approving review by someone with write access" in body
    )
    for number in numbers:
        control.approve(repo, number, "bob")
    with Session(pipeline.engine) as session:  # look again now rather than in a minute
        active = session.exec(select(Landing).where(Landing.state == "waiting")).one()
        assert active.id is not None
        queue.enqueue(session, "land", Land(repo, active.id).to_payload())
        session.commit()
    pipeline.run_tasks()
    assert all(control.pull(repo, n).merged for n in numbers), _comment(pipeline, third)
    assert "✅ **Landed** on `main`" in _comment(pipeline, first)


def _series_key(pipeline: Pipeline, number: int) -> str:
    with session_scope(pipeline.engine) as session:
        stored = github_store.get_repository(session, full_name=pipeline.repo)
        assert stored is not None and stored.id is not None
        [key] = github_store.series_keys_of(session, repo_id=stored.id, number=number)
        return key


def _look_again(pipeline: Pipeline) -> None:
    """Run the waiting landing now rather than after its recheck delay."""
    with Session(pipeline.engine) as session:
        active = session.exec(select(Landing).where(Landing.state == "waiting")).one()
        assert active.id is not None
        queue.enqueue(session, "land", Land(pipeline.repo, active.id).to_payload())
        session.commit()
    pipeline.run_tasks()


def test_main_moved_by_someone_else_mid_landing_makes_the_rest_wait_for_its_tests(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the first PR merged, a commit lands on main: merging the next PR would leave main
    on a tree nobody tested, so the landing waits for the rest to be tested on the new main,
    then merges it; what merged stays merged."""
    first, second, third = numbers = _series(pipeline)
    control, repo = pipeline.control, pipeline.repo
    tested = {n: pipeline.head(n) for n in numbers}
    real_merge = merging.merge_pull
    moved: list[str] = []

    def merge_then_move(*args: Any, **kwargs: Any) -> Any:
        done = real_merge(*args, **kwargs)
        if args[2].number == first and not moved:
            moved.append(
                control.commit(repo, "main", {"NOTES.md": "x\n"}, message="M", author="bob")
            )
        return done

    monkeypatch.setattr(merging, "merge_pull", merge_then_move)
    landing_id = _merging(pipeline, numbers, tested)
    _run_landing(pipeline)

    assert moved and control.pull(repo, first).merged
    assert not control.pull(repo, second).merged and not control.pull(repo, third).merged
    assert control.pull(repo, second).base_ref == "main"  # retargeted before #first merged
    row = _row(pipeline, landing_id)
    assert row.state == "waiting", (row.state, row.reason)
    # it looked again at once: the rest waits for its tree on the moved main
    assert row.waiting_for is not None
    assert f"the tree to land to be tested on `main` at `{moved[0][:10]}`" in row.waiting_for
    body = _comment(pipeline, third)
    assert "**Queued for landing**" in body
    assert f"#{first} (tested head `{tested[first][:10]}`) merged into `main`" in body

    _tested_green(pipeline, [second, third], f"root-#{first}")  # the rest, on the new main
    _look_again(pipeline)
    assert all(control.pull(repo, n).merged for n in numbers), _comment(pipeline, third)
    row = _row(pipeline, landing_id)
    assert row.state == "landed" and row.main_sha == moved[0]
    assert [e["state"] for e in row.entries] == ["merged"] * 3


def test_a_conflicting_sibling_left_out_of_the_tested_tree_stays_open_and_the_rest_lands(
    pipeline: Pipeline,
) -> None:
    """The series run left #sibling out of its tree (it conflicts with #second): `/stackbot
    land` takes the PRs the tested tree holds, says #sibling stays open, and lands them."""
    first, second, third = numbers = _series(pipeline)
    sibling = open_pr(pipeline, author="carol", branch="amax-side", title="Side", base="amax-group")
    pipeline.deliver()
    control, repo = pipeline.control, pipeline.repo
    key = _series_key(pipeline, second)
    assert key == _series_key(pipeline, sibling)
    _tested_green(pipeline, numbers, key, left_out={sibling: second})
    for number in numbers:
        control.approve(repo, number, "bob")
    control.comment(repo, third, "bob", "/stackbot land")
    pipeline.deliver()
    [reply] = [c.body for c in pipeline.replies(third) if "landing" in c.body]
    assert reply.startswith(f"Queued the series for landing: #{first} → #{second} → #{third},")
    assert f"#{sibling} is not landed (it conflicts with #{second}" in reply
    _run_landing(pipeline)

    assert all(control.pull(repo, n).merged for n in numbers), _comment(pipeline, third)
    side = control.pull(repo, sibling)
    assert side.state == "open" and side.base_ref == "main"  # retargeted, never closed
    assert "✅ **Landed** on `main`" in _comment(pipeline, first)
    assert not [c for c in pipeline.bot_comments(sibling) if c.body.startswith(LANDING_MARKER)]


REQUIRED = "stackbot/tests: quick 1x2"


def _queued(pipeline: Pipeline) -> list[int]:
    """The PRs in GitHub's merge queue of main, in order."""
    return [e.pull_number for e in pipeline.control.repo(pipeline.repo).queue]


def _in_the_queue(pipeline: Pipeline) -> tuple[list[int], int]:
    """A 3-PR landing in queue mode (main requires the merge queue and a check nobody answers
    here, so no group merges) that has put its PRs into the queue."""
    numbers = _series(pipeline)
    control, repo = pipeline.control, pipeline.repo
    control.protect_branch(repo, "main", required_checks=[REQUIRED])
    control.require_merge_queue(repo, "main", method="MERGE")
    tested = {n: pipeline.head(n) for n in numbers}
    client = pipeline.client()
    for head in tested.values():  # GitHub queues a PR whose required checks passed
        client.create_check_run(
            repo, head, REQUIRED, status="completed", conclusion="success", title="ok", summary=""
        )
    landing_id = _merging(pipeline, numbers, tested, method="queue")
    _run_landing(pipeline)
    assert _queued(pipeline) == numbers, _row(pipeline, landing_id).reason
    return numbers, landing_id


def test_a_push_to_a_queued_pr_stops_the_landing_and_takes_the_rest_out_of_the_queue(
    pipeline: Pipeline,
) -> None:
    """GitHub takes a pushed PR out of its merge queue, but the groups of the PRs behind it hold
    its tested commits: a landing that stops takes its other PRs out, or GitHub would merge them
    without the PR that stopped it."""
    (first, second, third), landing_id = _in_the_queue(pipeline)
    push(pipeline, second, author="carol")
    assert _queued(pipeline) == [first, third]  # GitHub took the pushed PR out
    with Session(pipeline.engine) as session:  # the landing's next look, now
        queue.enqueue(session, "land", Land(pipeline.repo, landing_id).to_payload())
        session.commit()
    pipeline.run_tasks()

    assert _queued(pipeline) == []
    control, repo = pipeline.control, pipeline.repo
    assert not any(control.pull(repo, n).merged for n in (first, second, third))
    assert all(control.pull(repo, n).state == "open" for n in (first, second, third))
    row = _row(pipeline, landing_id)
    assert row.state == "stopped"
    assert row.reason == f"#{second} did not merge: {landing.NEW_PUSH}"
    for number in (first, second, third):
        assert f"⛔ **Landing stopped**: #{second} did not merge: a new push" in _comment(
            pipeline, number
        )


def test_a_cancelled_landing_takes_its_prs_out_of_the_merge_queue(pipeline: Pipeline) -> None:
    (first, second, third), landing_id = _in_the_queue(pipeline)
    pipeline.control.comment(pipeline.repo, third, "bob", "/stackbot land cancel")
    pipeline.deliver()

    assert _queued(pipeline) == []  # "nothing more merges" holds: GitHub's queue is empty
    row = _row(pipeline, landing_id)
    assert row.state == "cancelled"
    assert [(e["state"], e["note"]) for e in row.entries] == [
        ("not merged", landing.TAKEN_OUT_NOTE)
    ] * 3
    for number in (first, second, third):
        assert f"not merged: {landing.TAKEN_OUT_NOTE}" in _comment(pipeline, number)
    assert any(
        c.body == f"Landing of #{first} → #{second} → #{third} cancelled; nothing more merges."
        for c in pipeline.replies(third)
    )
    pipeline.run_tasks()  # the landing looked at again: nothing is taken out twice
    assert _queued(pipeline) == []


def test_a_pr_github_takes_out_of_the_queue_stops_the_landing_through_its_merge_group(
    pipeline: Pipeline,
) -> None:
    """GitHub's ``merge_group`` ``destroyed`` (reason ``dequeued``) for a PR of the landing,
    answered before the landing looks again: the landing stops naming that PR, and its other
    PRs leave the queue."""
    merge_group.register_tasks(pipeline.worker.registry)
    pipeline.handled = (*pipeline.handled, "merge_group")
    (first, second, third), landing_id = _in_the_queue(pipeline)
    push(pipeline, second, author="carol")
    pipeline.deliver()

    assert _queued(pipeline) == []
    destroyed = [
        (deliveries.payload_of(d)["merge_group"]["head_ref"], deliveries.payload_of(d)["reason"])
        for d in pipeline.control.deliveries("merge_group", "destroyed")
    ]
    assert any(f"/pr-{second}-" in ref and why == "dequeued" for ref, why in destroyed)
    row = _row(pipeline, landing_id)
    assert row.state == "stopped"
    assert row.reason == (
        f"#{second} did not merge: taken out of GitHub's merge queue (a failed required check, "
        "a push, or by hand)"
    )
    assert [e["state"] for e in row.entries] == ["not merged"] * 3
    for number in (first, second, third):
        assert pipeline.control.pull(pipeline.repo, number).state == "open"
        assert f"#{second} did not merge: taken out of GitHub's merge queue" in _comment(
            pipeline, number
        )


def test_a_pr_of_a_waiting_landing_closed_on_github_stops_the_landing_at_once(
    pipeline: Pipeline,
) -> None:
    """The ``pull_request`` ``closed`` delivery wakes the landing that holds the PR: it stops
    with its account now, not at its next recheck (a minute later by default)."""
    landing.register_tasks(pipeline.worker.registry)
    pipeline.handled = (*pipeline.handled, "land")
    first, second, _ = numbers = _series(pipeline)
    tested = {n: pipeline.head(n) for n in numbers}
    landing_id = _merging(pipeline, numbers, tested, state=LandingState.WAITING)
    with Session(pipeline.engine) as session:  # written here: nothing queued its look yet
        session.exec(delete(Task).where(col(Task.kind) == "land"))  # type: ignore[call-overload]
        session.commit()
    pipeline.control.close_pull(pipeline.repo, second, sender="carol")
    pipeline.deliver()

    row = _row(pipeline, landing_id)
    assert row.state == "stopped", row.reason
    assert row.reason == f"#{second} was closed outside the landing; `/stackbot land` again"
    assert not any(pipeline.control.pull(pipeline.repo, n).merged for n in numbers)
    assert "⛔ **Landing stopped**" in _comment(pipeline, first)
