"""``/metrics`` for landings on SQLite and PostgreSQL: the queue depth per repository, stopped
landings by cause, and the GPU-hours of landings' trees per landed PR, counting the jobs of gate
runs and of each landing's tested run, and not a series' stack runs nor a reused result."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine
from sqlmodel import Session

from stackbot.db.models import IntegrationRun, Job, Landing, Repository
from stackbot.domain.landing import LandingEntry
from stackbot.web.landing_metrics import landing_lines

NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)


def _run(session: Session, repo_id: int, kind: str, gpu_hours: list[float], reused: int = 0) -> int:
    run = IntegrationRun(
        repo_id=repo_id, kind=kind, series_key="#1", base_ref="main", base_sha="a" * 40
    )
    session.add(run)
    session.flush()
    assert run.id is not None
    source = None
    for index, hours in enumerate(gpu_hours):
        job = Job(
            repo_id=repo_id,
            integration_run_id=run.id,
            kind="integration",
            test_set="amax-group",
            shape="1x4",
            tree_sha=f"{kind}{index}",
            commit_sha=f"{kind}{index}",
            config_hash="c" * 64,
            status="passed",
            gpu_seconds=hours * 3600.0,
        )
        session.add(job)
        session.flush()
        source = job.id
    for _ in range(reused):  # a reused result: its own GPU-seconds are 0, never counted
        session.add(
            Job(
                repo_id=repo_id,
                integration_run_id=run.id,
                kind="integration",
                test_set="amax-group",
                shape="1x4",
                tree_sha="reused",
                commit_sha="reused",
                config_hash="c" * 64,
                status="passed",
                reused_from_job_id=source,
                gpu_seconds=0.0,
            )
        )
    return run.id


def _landing(repo_id: int, comment: int, state: str, merged: int, **fields: object) -> Landing:
    entries = [
        LandingEntry(n, "h" * 40, "merged" if n < merged else "pending").to_json() for n in range(3)
    ]
    return Landing(
        repo_id=repo_id,
        series_key="#1",
        requested_on=1,
        requested_by="bob",
        comment_id=comment,
        state=state,
        entries=entries,
        created_at=NOW,
        **fields,
    )


def test_metrics_export_queue_depth_causes_and_gpu_hours_per_landed_pr(engine: Engine) -> None:
    with Session(engine) as session:
        repos = [Repository(full_name=name, clone_url="file:///x") for name in ("o/a", "o/b")]
        session.add_all(repos)
        session.flush()
        a, b = (r.id for r in repos)
        assert a is not None and b is not None
        _run(session, a, "stack", [5.0])  # a series' development: not landing's cost
        tested = _run(session, a, "series", [2.0, 1.0], reused=2)
        _run(session, a, "gate", [1.5])  # speculation, thrown away or not
        _run(session, b, "gate", [0.5])
        session.add_all(
            [
                _landing(
                    a, 1, "landed", 3, tested_run_id=tested, finished_at=NOW + timedelta(minutes=20)
                ),
                _landing(a, 2, "waiting", 0),
                _landing(a, 3, "merging", 1),
                _landing(a, 4, "stopped", 1, reason="#1 did not merge: a new push: its head moved"),
                _landing(b, 5, "stopped", 0, reason="#2 is blocked: needs 1 more approving review"),
            ]
        )
        session.commit()
    lines = landing_lines(engine)
    assert 'stackbot_landing_queue_depth{repo="o/a"} 2' in lines
    assert 'stackbot_landing_queue_depth{repo="o/b"} 0' in lines
    assert 'stackbot_landings_stopped_total{cause="new push"} 1' in lines
    assert 'stackbot_landings_stopped_total{cause="blocked"} 1' in lines
    assert "stackbot_landed_prs_total 5" in lines  # 3 + 1 + 1
    assert "stackbot_landing_seconds_sum 1200.000" in lines
    # (2 + 1) tested run + 1.5 + 0.5 gate runs = 5 GPU-hours, over 5 landed PRs
    assert "stackbot_landing_gpu_hours_total 5.000" in lines
    assert "stackbot_landing_gpu_hours_per_landed_pr 1.000" in lines


def test_no_landed_pr_gives_no_per_pr_line(engine: Engine) -> None:
    with Session(engine) as session:
        repo = Repository(full_name="o/a", clone_url="file:///x")
        session.add(repo)
        session.flush()
        assert repo.id is not None
        _run(session, repo.id, "gate", [1.0])
        session.add(_landing(repo.id, 1, "waiting", 0))
        session.commit()
    lines = landing_lines(engine)
    assert "stackbot_landing_gpu_hours_total 1.000" in lines
    assert not [
        line for line in lines if line.startswith("stackbot_landing_gpu_hours_per_landed_pr ")
    ]
