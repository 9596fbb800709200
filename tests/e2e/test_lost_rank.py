"""A rank lost mid-test, end to end (issue 13, failure class ``infra``): real torchrun ranks
through the real local executor, where one rank SIGKILLs itself after tests already ran on
every rank, as the kernel's OOM killer or a failing node would kill it.

The job is ``infra``, not ``error``: none of what its ranks reported counts, it is retried on
another node a bounded number of times (``infra_retries``, here 1), a retry that passes makes
the PR's row pass with the infra attempt kept as infra (never a test failure, never a finding),
and a rank lost on every attempt leaves an infra row with no counted result after the one
retry. On SQLite (embedded worker) and PostgreSQL (two worker processes)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import httpx
import pytest
from sqlmodel import Session, col, select

from stackbot.db.models import IntegrationRun, Job, TestFinding, TestResult
from tests.e2e.harness import REPO, World, running_world

pytestmark = pytest.mark.torchrun

INFRA_RETRIES = 1


def losing_test(marker: Path | None) -> str:
    """A test file whose ``test_rank_one_is_lost`` kills rank 1 with SIGKILL: only while
    ``marker`` does not exist (it is created first: the next attempt passes), or always."""
    if marker is None:
        kill = "    if os.environ['RANK'] == '1':\n"
    else:
        kill = (
            f"    if os.environ['RANK'] == '1' and not os.path.exists({str(marker)!r}):\n"
            f"        open({str(marker)!r}, 'w').close()\n"
        )
    return (
        "import os\nimport signal\n\n\n"
        "def test_feature_before():\n    assert True\n\n\n"
        f"def test_rank_one_is_lost():\n{kill}        os.kill(os.getpid(), signal.SIGKILL)\n\n\n"
        "def test_feature_after():\n    assert True\n"
    )


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    workdir = tmp_path_factory.mktemp("lost-rank")
    with running_world(workdir, request.param, infra_retries=INFRA_RETRIES) as running:
        yield running


def _open_pull(world: World, number: int, branch: str, test_file: str) -> None:
    world.control.open_pull(
        REPO,
        author="alice",  # trusted: tested without a vetter
        head=branch,
        title=f"Feature {number}",
        body="A feature.",
        number=number,
        files={"tests/test_feature.py": test_file},
    )


def _attempts(world: World, number: int) -> list[Job]:
    """The original jobs (not reused copies) of the runs that hold ``number``, oldest first."""
    with Session(world.engine) as session:
        runs = [
            r.id for r in session.exec(select(IntegrationRun)) if str(number) in (r.heads or {})
        ]
        return list(
            session.exec(
                select(Job)
                .where(col(Job.integration_run_id).in_(runs), col(Job.reused_from_job_id).is_(None))
                .order_by(col(Job.id))
            )
        )


def _stored_results(world: World, job_id: int) -> list[TestResult]:
    with Session(world.engine) as session:
        return list(session.exec(select(TestResult).where(TestResult.job_id == job_id)))


def _findings(world: World, jobs: list[Job]) -> list[TestFinding]:
    runs = sorted({j.integration_run_id for j in jobs if j.integration_run_id is not None})
    with Session(world.engine) as session:
        return list(session.exec(select(TestFinding).where(col(TestFinding.run_id).in_(runs))))


def _api_job(world: World, job_id: int) -> dict[str, object]:
    answer = httpx.get(f"{world.stack.url}/api/jobs/{job_id}", timeout=30)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert isinstance(data, dict)
    return data


def _assert_lost_and_uncounted(world: World, job: Job) -> None:
    assert job.status == "infra", (job.status, job.error)
    assert "rank 1 was lost (killed by SIGKILL) after 3 test results" in (job.error or "")
    # test_quick's two tests and test_feature_before ran on both ranks: none of it counts.
    assert not any(job.counts.values()), job.counts
    assert _stored_results(world, job.id or 0) == []
    assert job.result is not None and job.result["tests"] == []
    shown = _api_job(world, job.id or 0)
    assert shown["status"] == "infra", shown


def test_a_rank_lost_once_is_retried_and_the_retry_passing_is_a_pass(world: World) -> None:
    _open_pull(world, 31, "lost-once", losing_test(world.stack.workdir / "rank-lost-once"))
    world.settle()
    attempts = _attempts(world, 31)
    assert [(j.purpose, j.status) for j in attempts] == [("tree", "infra"), ("retry", "passed")]
    lost, retry = attempts
    _assert_lost_and_uncounted(world, lost)
    assert lost.node and retry.retry_of_job_id == lost.id and retry.excluded_nodes == [lost.node]
    assert retry.counts["passed"] == 5 and retry.counts["failed"] == 0  # 2 + 3 per rank merged
    assert _findings(world, attempts) == []  # infra is never a failing test
    _, body = world.sticky(31)
    row, note = _row_and_note(body)
    assert "✅ **quick 1x2**: 5 passed · main: 2 passed (3 not on main)" in row, row
    assert "infra" not in row and "failed" not in row, row
    # The reviewer learns that it passed only on a retry, and why the first attempt failed.
    assert note == (
        f"- 🔁 **quick 1x2** on the stack: passed on a retry on {_linked(world, retry)} after an "
        f"infra failure on {_linked(world, lost)} (rank 1 lost, killed by SIGKILL)"
    ), note
    head = world.control.pull(REPO, 31).head_sha
    [check] = [r for r in world.control.check_runs(REPO, head) if "quick 1x2" in r.name]
    assert check.conclusion == "success"
    assert f"- attempts: 🔁 {note.partition(' on the stack: ')[2]}" in check.summary, check.summary
    assert _dashboard_note(world, 31, lost) == (
        f"passed on a retry on {retry.node} after an infra failure on {lost.node} "
        "(rank 1 lost, killed by SIGKILL)"
    )


def test_a_rank_lost_on_every_attempt_stops_after_the_retries_with_no_result(
    world: World,
) -> None:
    _open_pull(world, 32, "lost-always", losing_test(None))
    world.settle()
    attempts = _attempts(world, 32)
    # The first attempt and INFRA_RETRIES retries, each of the previous one: then no more.
    assert [(j.purpose, j.status) for j in attempts] == [("tree", "infra")] + [
        ("retry", "infra")
    ] * INFRA_RETRIES
    for previous, retry in pairwise(attempts):
        assert retry.retry_of_job_id == previous.id
    for job in attempts:
        _assert_lost_and_uncounted(world, job)
    assert _findings(world, attempts) == []
    _, body = world.sticky(32)
    row, note = _row_and_note(body)
    assert row.endswith("**quick 1x2**: no tests · main: 2 passed; job infra"), row
    assert "newly fail" not in row, row
    # Under INFRA: what the node did, its results not counted.
    assert note.startswith(
        "- ⚠️ **quick 1x2** on the stack: no result (infra): rank 1 was lost (killed by SIGKILL)"
    ), note
    assert "none of the 8 test results the ranks wrote are counted" in note, note
    # The headline: how many attempts were made, on which machines, and what each one did.
    causes = "; ".join(f"{job.node}: rank 1 lost, killed by SIGKILL" for job in attempts)
    first_line = body.splitlines()[1]
    assert first_line.startswith(
        f"⚠️ **error**: quick 1x2 has no result after {len(attempts)} attempts, both infra "
        f"failures ({causes})"
    ), first_line
    head = world.control.pull(REPO, 32).head_sha
    [check] = [r for r in world.control.check_runs(REPO, head) if "quick 1x2" in r.name]
    assert check.conclusion == "neutral"  # the machine failed, not the code
    assert "rank 1 lost, killed by SIGKILL" in check.summary, check.summary
    shown = _dashboard_note(world, 32, attempts[0])
    assert shown.startswith("no result after 2 attempts, both infra failures ("), shown
    assert shown.count("rank 1 lost, killed by SIGKILL") == 2, shown


def _row_and_note(body: str) -> tuple[str, str]:
    """The comment's line of the ``quick 1x2`` row (folded under the test sets) and its line in
    the INFRA group of failures (🔁, what each attempt's machine did)."""
    lines = body.splitlines()
    row = next(line for line in lines if "**quick 1x2**:" in line)
    note = next(line for line in lines if "**quick 1x2** on the stack:" in line)
    return row, note


def _linked(world: World, job: Job) -> str:
    """The machine a job ran on, linked to its dashboard page, as the comment writes it."""
    return f"[{job.node}]({world.settings.public_url.rstrip('/')}/jobs/{job.id})"


def _dashboard_note(world: World, number: int, first: Job) -> str:
    """The retry note of the PR's ``quick 1x2`` cell, from the dashboard's JSON; its page
    shows the note linking the ``first`` attempt."""
    answer = httpx.get(f"{world.stack.url}/api/pulls/{number}", timeout=30)
    assert answer.status_code == 200, answer.text
    [cell] = [c for c in answer.json()["pull"]["tests"] if c["label"] == "quick 1x2"]
    note = cell["retry_note"]
    assert isinstance(note, str)
    page = httpx.get(f"{world.stack.url}/pulls/{number}", timeout=30)
    assert page.status_code == 200
    note_html = page.text.split('class="retry-note', 1)[-1].split("</div>", 1)[0]
    assert f'<a href="/jobs/{first.id}">{first.node}</a>' in note_html, note_html
    return note
