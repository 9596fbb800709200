"""Seed a database with a realistic series (PRs, edges, runs, steps, jobs) for dashboard tests
and the dashboard benchmark. Rows are written directly: this tests what the dashboard shows for
a given state, not how the pipeline got there (the end-to-end tests do that)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session

from stackbot.db.models import (
    Approval,
    DependencyEdge,
    IntegrationRun,
    IntegrationStep,
    Job,
    PullRequest,
    Repository,
    Series,
    SeriesMember,
    TestResult,
)

REPO = "NVIDIA/Megatron-LM"
LOST_RANK = (
    "rank 1 was lost (killed by SIGKILL) after 3 test results; the node failed, not the tests: "
    "none of the 6 test results the ranks wrote are counted"
)
NODE_FAIL = "a node failed under the job: the job ended NODE_FAIL (exit 0:0)"
SHAPES = (("amax-group", "1x4"), ("amax-group", "2x4"), ("blockwise-recipe", "1x4"))


def sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def seed_series(
    engine: Engine,
    *,
    prs: int = 5,
    first: int = 8034,
    jobs_per_pr: int = 3,
    extra_jobs: int = 0,
    log_dir: Path | None = None,
    infra_retries: bool = False,
) -> dict[str, object]:
    """A chain of ``prs`` PRs under tracking issue #6307, each with a stack run and jobs.

    The second PR's stack run conflicts; the last PR is superseded by a PR outside the chain.
    With ``infra_retries``, each stack run's first configuration first lost a rank on node n0
    and was retried on n1 (every fourth PR's retry lost its node too: no result).
    """
    now = datetime.now(UTC)
    numbers = [first + i for i in range(prs)]
    with Session(engine) as session:
        repo = Repository(full_name=REPO, clone_url="file:///nonexistent")
        session.add(repo)
        session.flush()
        assert repo.id is not None
        series = Series(
            repo_id=repo.id,
            key="#6307",
            tracking_issue=6307,
            order=numbers,
            status="active",
            problems=[
                {
                    "kind": "missing_parent",
                    "prs": [numbers[0], 7000],
                    "detail": "#7000 is not a pull request of this repository",
                }
            ],
        )
        session.add(series)
        session.flush()
        assert series.id is not None
        base_sha = sha("main")
        for index, number in enumerate(numbers):
            head = sha(f"head-{number}")
            session.add(
                PullRequest(
                    repo_id=repo.id,
                    number=number,
                    title=f"Pass the owner's collection, part {index}",
                    author="alice" if index % 2 else "bob",
                    head_ref=f"pstate-{number}",
                    head_sha=head,
                    base_ref="main",
                    base_sha=base_sha,
                    body="Part of #6307.",
                    superseded_by=9999 if index == prs - 1 and prs > 2 else None,
                )
            )
            session.add(SeriesMember(series_id=series.id, pr_number=number, position=index))
            if index:
                session.add(
                    DependencyEdge(
                        repo_id=repo.id,
                        child=number,
                        parent=numbers[index - 1],
                        source="depends_on" if index % 2 else "base_branch",
                    )
                )
            if index % 3 != 2:
                session.add(Approval(repo_id=repo.id, pr_number=number, sha=head, vetter="carol"))
            status = "conflict" if index == 1 else ("resolved" if index % 2 else "clean")
            run = IntegrationRun(
                repo_id=repo.id,
                kind="stack",
                target_pr=number,
                series_key="#6307",
                base_ref="main",
                base_sha=base_sha,
                status=status,
                final_tree=None if status == "conflict" else sha(f"tree-{number}"),
                final_commit=None if status == "conflict" else sha(f"commit-{number}"),
                heads={str(n): sha(f"head-{n}") for n in numbers[: index + 1]},
                allowlist={
                    "path": "tools/process_group_usage_allowlist.json",
                    "format": "scope",
                    "total": 194,
                    "entries": 194,
                    "base_total": 195,
                    "delta": -1,
                    "ok": True,
                    "new": [],
                    "stale": [
                        "megatron/core/x.py f:accessor:parallel_state.get_tensor_model_parallel_group"
                    ],
                    "unparsed": [],
                    "checker": None,
                },
                created_at=now - timedelta(minutes=prs - index),
                finished_at=now,
            )
            session.add(run)
            session.flush()
            assert run.id is not None
            session.add(
                IntegrationStep(
                    run_id=run.id,
                    position=0,
                    pr_number=number,
                    head_sha=head,
                    outcome=status,
                    tree=run.final_tree,
                    commit=run.final_commit,
                    conflicts=[{"path": "megatron/core/transformer/layer.py", "type": "contents"}]
                    if status == "conflict"
                    else [],
                    conflicts_with=[numbers[0]] if status == "conflict" else [],
                    resolution="tools/process_group_usage_allowlist.json regenerated"
                    if status == "resolved"
                    else None,
                )
            )
            if status == "conflict":
                continue
            for position, (test_set, shape) in enumerate(SHAPES[:jobs_per_pr]):
                tree = run.final_tree or ""
                retried = infra_retries and position == 0
                if retried:
                    lost = _job(repo.id, run.id, test_set, shape, tree, "infra", now, log_dir)
                    lost.node, lost.counts, lost.error = "n0", {}, LOST_RANK
                    session.add(lost)
                    session.flush()
                status = "passed" if index % 4 else "failed"
                job = _job(repo.id, run.id, test_set, shape, tree, status, now, log_dir)
                if retried:
                    job.purpose, job.retry_of_job_id, job.excluded_nodes = "retry", lost.id, ["n0"]
                    if index % 4 == 3:
                        job.status, job.counts, job.error = "infra", {}, NODE_FAIL
                session.add(job)
                session.flush()
                assert job.id is not None
                if job.status == "infra":
                    continue  # an infra job's tests never count: none are stored
                session.add(
                    TestResult(
                        job_id=job.id,
                        nodeid=f"tests/unit_tests/test_amax_reduction_group.py::test_{test_set}",
                        outcome=job.status,
                        duration_s=1.5,
                    )
                )
        for test_set, shape in SHAPES:
            session.add(
                Job(
                    repo_id=repo.id,
                    kind="baseline",
                    base_ref="main",
                    test_set=test_set,
                    shape=shape,
                    tree_sha=sha("main-tree"),
                    commit_sha=base_sha,
                    config_hash="c" * 64,
                    status="failed",
                    counts={"passed": 14, "failed": 9},
                    created_at=now,
                    started_at=now,
                    finished_at=now,
                )
            )
        series_run = IntegrationRun(
            repo_id=repo.id,
            kind="series",
            series_key="#6307",
            base_ref="main",
            base_sha=base_sha,
            status="conflict",
            final_tree=sha("series-tree"),
            final_commit=sha("series-commit"),
            heads={},
            created_at=now,
            finished_at=now,
        )
        session.add(series_run)
        session.flush()
        assert series_run.id is not None
        for index, number in enumerate(numbers):
            skipped = index == 1 or (index == 2 and prs > 3)
            session.add(
                IntegrationStep(
                    run_id=series_run.id,
                    position=index,
                    pr_number=number,
                    head_sha=sha(f"head-{number}"),
                    outcome=("conflict" if index == 1 else "skipped") if skipped else "clean",
                    tree=None if skipped else sha(f"st-{number}"),
                    commit=None if skipped else sha(f"sc-{number}"),
                    conflicts=[{"path": "megatron/core/transformer/layer.py", "type": "contents"}]
                    if index == 1
                    else [],
                    conflicts_with=[numbers[0]] if index == 1 else [],
                    skipped_reason=f"depends on #{numbers[1]}, which conflicts"
                    if index == 2 and skipped
                    else None,
                )
            )
        for i in range(extra_jobs):
            test_set, shape = SHAPES[i % len(SHAPES)]
            session.add(
                _job(
                    repo.id,
                    series_run.id,
                    test_set,
                    shape,
                    sha(f"old-{i}"),
                    "passed",
                    now - timedelta(hours=1),
                    log_dir,
                )
            )
        session.commit()
        return {"repo_id": repo.id, "numbers": numbers, "series_run_id": series_run.id}


def _job(
    repo_id: int,
    run_id: int,
    test_set: str,
    shape: str,
    tree: str,
    status: str,
    now: datetime,
    log_dir: Path | None,
) -> Job:
    out_dir = None
    if log_dir is not None:
        out = log_dir / f"{test_set}-{shape}-{tree[:8]}"
        out.mkdir(parents=True, exist_ok=True)
        progress = "".join(f"[runner] tests: {n} test results\n" for n in range(0, 60, 2))
        failures = (
            "FAILED tests/unit_tests/test_amax_reduction_group.py::test_amax_group - "
            "AssertionError: amax reduced over the wrong group\n"
            if status == "failed"
            else ""
        )
        (out / "runner.log").write_text(
            f"[runner] launching {shape}\n"
            f"[runner] setup: checking out {tree[:12]}\n"
            f"{progress}{failures}[runner] 23 tests done\n[runner] {status}\n"
        )
        out_dir = str(out)
    return Job(
        repo_id=repo_id,
        integration_run_id=run_id,
        kind="integration",
        test_set=test_set,
        shape=shape,
        tree_sha=tree,
        commit_sha=tree,
        config_hash="c" * 64,
        status=status,
        counts={"passed": 23} if status == "passed" else {"passed": 20, "failed": 3},
        node="n1",
        out_dir=out_dir,
        created_at=now,
        started_at=now - timedelta(seconds=42),
        finished_at=now,
    )
