"""``/stackbot land`` through GitHub's merge queue, end to end on the stand-in, real
integrations and real torchrun jobs: ``main`` requires the merge queue and the check
``stackbot/tests: quick 1x2``; the repository lands with ``merge_method = "queue"``. A
maintainer lands a 3-PR series: the PRs are enqueued bottom-up at their tested heads (children
retargeted first, so GitHub closes none for a deleted base), the merge groups are answered
from the tree stackbot tested with no new GPU job, and all three merge; and when main moves
under the queue, the rebuilt group's tree (tested by nobody) is tested before it merges.

Each scenario runs on SQLite (embedded worker) and on PostgreSQL (two worker processes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlmodel import Session, col, select

from stackbot.db.models import IntegrationRun, Job, Landing
from stackbot.domain.landing_text import LANDING_MARKER
from stackbot.standin import deliveries, hosting, merge_queue
from tests.e2e.harness import REPO, World, running_world

pytestmark = pytest.mark.torchrun
REQUIRED = "stackbot/tests: quick 1x2"


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    with running_world(
        tmp_path_factory.mktemp("queue"),
        request.param,
        landing={"recheck_s": 1.0, "merge_method": "queue"},
    ) as running:
        c = running.control
        c.set_merge_settings(REPO, delete_branch_on_merge=True)
        c.protect_branch(REPO, "main", required_checks=[REQUIRED])
        c.require_merge_queue(REPO, "main", method="MERGE")
        yield running


def _series(world: World, numbers: tuple[int, ...], prefix: str) -> None:
    base = "main"
    for position, number in enumerate(numbers):
        world.control.open_pull(
            REPO,
            author="alice",
            head=f"{prefix}-{position}",
            base=base,
            title=f"{prefix} part {position + 1}",
            number=number,
            files={f"pkg/{prefix}_{position}.py": f"VALUE = {position}\n"},
        )
        base = f"{prefix}-{position}"


def _gpu_jobs(world: World) -> list[tuple[int | None, str | None, str | None]]:
    """The jobs that ran (a job whose result was reused from an identical tree's is left out):
    id, test set, tree."""
    with Session(world.engine) as session:
        jobs = session.exec(select(Job).where(col(Job.reused_from_job_id).is_(None))).all()
        return [(j.id, j.test_set, j.tree_sha) for j in jobs]


def _landing_comment(world: World, number: int) -> str:
    found = [
        c.body for c in world.control.comments(REPO, number) if c.body.startswith(LANDING_MARKER)
    ]
    return found[0] if found else "(no landing comment)"


def test_a_series_lands_through_the_merge_queue_answered_from_its_tested_tree(
    world: World,
) -> None:
    c = world.control
    numbers = (8034, 8035, 8748)
    _series(world, numbers, "amax")
    world.settle()
    heads = {n: c.pull(REPO, n).head_sha for n in numbers}
    jobs_before = _gpu_jobs(world)
    # the REST merge is refused on a branch that requires the queue
    with pytest.raises(Exception, match="merge queue"):
        c.merge_pull(REPO, 8034, merger="bob", sha=heads[8034])

    c.comment(REPO, 8748, "bob", "/stackbot land")
    world.settle()
    for number in numbers:
        assert c.pull(REPO, number).merged, _landing_comment(world, number)
    with Session(world.engine) as session:
        [landing] = session.exec(select(Landing).where(Landing.requested_on == 8748)).all()
    assert landing.state == "landed", landing.reason
    assert _gpu_jobs(world) == jobs_before  # the merge groups cost no GPU job

    requested = [
        deliveries.payload_of(d)["merge_group"]
        for d in c.deliveries("merge_group", "checks_requested")
    ]
    # enqueued bottom-up, each at its tested head
    assert [g["head_ref"] for g in requested] == [
        f"refs/heads/gh-readonly-queue/main/pr-{n}-{heads[n]}" for n in numbers
    ]
    last = requested[-1]["head_sha"]
    answers = [r for r in c.check_runs(REPO, last) if r.name == REQUIRED]
    assert [(r.status, r.conclusion) for r in answers] == [("completed", "success")]
    assert "No test ran again" in (answers[0].summary or "")
    bare = c.repo(REPO).bare_path
    assert hosting.resolve(bare, "refs/heads/main") == last
    assert hosting.commit_info(bare, last).tree == landing.tested_tree == landing.landed_tree
    closed = [
        deliveries.payload_of(d)
        for d in c.deliveries("pull_request", "closed")
        if deliveries.payload_of(d)["number"] in numbers
    ]
    assert [e["number"] for e in closed] == list(numbers)
    assert all(e["pull_request"]["merged"] for e in closed)  # none closed by base deletion
    destroyed = [deliveries.payload_of(d) for d in c.deliveries("merge_group", "destroyed")]
    assert [d["reason"] for d in destroyed] == ["merged"] * 3
    assert "**Landed** on `main`: #8034 → #8035 → #8748." in _landing_comment(world, 8034)


def test_a_merge_group_whose_tree_was_not_tested_is_tested_before_it_merges(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Main moves once the last PR is queued: GitHub rebuilds the groups on the new main (the
    groups stackbot was asked about are destroyed and forgotten), and the new last group's tree
    is no tree stackbot tested: it is tested, then answered, then merged."""
    c = world.control
    numbers = (8060, 8061, 8062)
    _series(world, numbers, "mq")
    world.settle()
    jobs_before = _gpu_jobs(world)
    real_enqueue = merge_queue.enqueue
    moved: dict[str, str] = {}

    def enqueue_then_move(*args: Any, **kwargs: Any) -> Any:
        done = real_enqueue(*args, **kwargs)
        if args[2].number == numbers[-1] and not moved:
            moved["main"] = c.commit(
                REPO, "main", {"NOTES.md": "moved\n"}, message="Move main", author="bob"
            )
        return done

    monkeypatch.setattr(merge_queue, "enqueue", enqueue_then_move)
    c.comment(REPO, numbers[-1], "bob", "/stackbot land")
    world.settle()
    assert moved, "the last PR was never queued"
    for number in numbers:
        assert c.pull(REPO, number).merged, _landing_comment(world, number)
    assert len(_gpu_jobs(world)) > len(jobs_before)  # the new group's tree was tested
    bare = c.repo(REPO).bare_path
    main_sha = hosting.resolve(bare, "refs/heads/main")
    assert main_sha is not None
    tree = hosting.commit_info(bare, main_sha).tree
    with Session(world.engine) as session:
        tested = session.exec(select(IntegrationRun).where(IntegrationRun.final_tree == tree)).all()
    assert tested, "main holds a tree no run tested"
    answers = [r for r in c.check_runs(REPO, main_sha) if r.name == REQUIRED]
    assert [(r.status, r.conclusion) for r in answers] == [("completed", "success")]
    assert hosting.git(bare, "show", f"{main_sha}:NOTES.md").stdout.decode() == "moved\n"
    destroyed = [
        deliveries.payload_of(d)["reason"]
        for d in c.deliveries("merge_group", "destroyed")
        if f"/pr-{numbers[-1]}-" in deliveries.payload_of(d)["merge_group"]["head_ref"]
    ]
    assert destroyed == ["invalidated", "merged"]
