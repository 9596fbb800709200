"""A maintenance round on real git mirrors, real job output directories and both databases:
what is past its retention goes, what a report or an unfinished job needs stays, the mirror is
repacked (its unreachable objects dropped), and the figures are stored."""

from __future__ import annotations

import os
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlmodel import Session, select

from stackbot.adapters.git import GitMirror
from stackbot.config import Settings
from stackbot.db import integration_store
from stackbot.db.models import IntegrationRun, Job, MaintenanceRun, PullRequest, Repository
from stackbot.domain.integration import RunKind
from stackbot.domain.types import PrNumber
from stackbot.services.integration import RunRequest, run_integration
from stackbot.services.maintenance import run_by_hand, run_maintenance
from tests.integration.repo_builder import RepoBuilder

DAY = 86400.0
NOW = time.time() + 40 * DAY  # the round runs "40 days later"


def _at(days_before_now: float) -> datetime:
    return datetime.fromtimestamp(NOW - days_before_now * DAY, UTC)


class World:
    """A repository with PRs #1…#4, its stackbot mirror, runs and jobs in the database."""

    def __init__(self, engine: Engine, settings: Settings, tmp_path: Path) -> None:
        self.engine, self.settings = engine, settings
        self.work = RepoBuilder(tmp_path / "work")
        self.work.commit("base", {"a.py": "a = 1\n"})
        self.heads: dict[int, str] = {}
        for n in (1, 2, 3, 4):
            self.work.git("checkout", "-q", "-b", f"pr{n}", "main")
            self.heads[n] = self.work.commit(f"pr {n}", {f"f{n}.py": f"x = {n}\n" * 400})
            self.work.git("update-ref", f"refs/pull/{n}/head", self.heads[n])
        self.work.git("checkout", "-q", "main")
        settings.mirrors_dir.mkdir(parents=True, exist_ok=True)
        self.mirror = GitMirror.open_or_clone(str(self.work.path), settings.mirrors_dir)
        self.mirror.fetch()
        with Session(engine) as session:
            repo = Repository(full_name="o/r", clone_url=str(self.work.path))
            session.add(repo)
            session.flush()
            assert repo.id is not None
            self.repo_id = repo.id
            for n, state in ((1, "closed"), (2, "open"), (3, "closed"), (4, "closed")):
                session.add(
                    PullRequest(repo_id=repo.id, number=n, state=state, head_sha=self.heads[n])
                )
            session.commit()

    def run(self, name: str, prs: list[int], *, days_ago: float, target: int) -> int:
        request = RunRequest(
            "main", [(PrNumber(n), self.heads[n]) for n in prs], RunKind.STACK, name
        )
        result = run_integration(self.mirror, request)
        with Session(self.engine) as session:
            row = integration_store.save_run(session, self.repo_id, result, target_pr=target)
            row.created_at = _at(days_ago)
            session.add(row)
            session.commit()
            assert row.id is not None
            return row.id

    def job(self, run_id: int, *, status: str, finished_days_ago: float | None) -> int:
        with Session(self.engine) as session:
            run = session.get(IntegrationRun, run_id)
            assert run is not None and run.final_commit and run.final_tree
            job = Job(
                repo_id=self.repo_id,
                integration_run_id=run_id,
                test_set="t",
                shape="1x1",
                tree_sha=run.final_tree,
                commit_sha=run.final_commit,
                config_hash="h",
                status=status,
                finished_at=_at(finished_days_ago) if finished_days_ago is not None else None,
            )
            session.add(job)
            session.commit()
            assert job.id is not None
            out = self.settings.jobs_dir / f"job-{job.id}"
            out.mkdir(parents=True)
            (out / "runner-node0.log").write_text("log line\n" * 2000)
            job.out_dir = str(out)
            session.add(job)
            session.commit()
            return job.id

    def refs(self) -> set[str]:
        return set(self.mirror.list_refs("refs/stackbot/"))

    def has_object(self, sha: str) -> bool:
        done = subprocess.run(
            ["git", "cat-file", "-e", sha], cwd=self.mirror.git_dir, capture_output=True
        )
        return done.returncode == 0

    def loose_objects(self) -> int:
        out = subprocess.run(
            ["git", "count-objects"], cwd=self.mirror.git_dir, capture_output=True, text=True
        ).stdout
        return int(out.split()[0])


def test_a_round_expires_what_is_old_and_keeps_what_is_needed(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    world = World(engine, settings, tmp_path)
    old_closed = world.run("pr-1", [1], days_ago=40, target=1)  # closed PR, old: goes
    world.run("pr-2", [2], days_ago=40, target=2)  # open PR, old: its report shows it
    world.run("pr-3", [3], days_ago=2, target=3)  # closed PR, recent: within retention
    # pr-4: an old run whose name a newer run took over; its queued job still needs its commit.
    first = world.run("pr-4", [4], days_ago=45, target=4)
    world.run("pr-4", [1, 4], days_ago=40, target=4)
    with Session(engine) as session:
        first_commit = session.get(IntegrationRun, first).final_commit  # type: ignore[union-attr]
    assert first_commit is not None
    old_job = world.job(old_closed, status="passed", finished_days_ago=40)
    recent_job = world.job(old_closed, status="failed", finished_days_ago=3)
    queued = world.job(first, status="queued", finished_days_ago=None)
    orphan = settings.jobs_dir / "not-a-job"
    orphan.mkdir()
    assert world.loose_objects() > 0  # the runs' merge commits, written loose

    report = run_maintenance(engine, settings, now=NOW)

    assert report.errors == []
    refs = world.refs()
    assert not any(r.startswith("refs/stackbot/stack/pr-1/") for r in refs)
    assert {"refs/stackbot/stack/pr-2/head", "refs/stackbot/stack/pr-3/head"} <= refs
    # pr-4's name has an unfinished job: kept, and its job's commit held by a keep ref.
    assert "refs/stackbot/stack/pr-4/head" in refs
    assert f"refs/stackbot/keep/job-{queued}" in refs
    assert world.has_object(first_commit)
    assert world.mirror.rev_parse("refs/heads/main")  # branches untouched
    assert world.loose_objects() == 0  # repacked
    assert report.summary["run_refs_removed"] == 2 and report.summary["mirrors_repacked"] == 1
    jobs = {p.name for p in settings.jobs_dir.iterdir()}
    assert jobs == {f"job-{recent_job}", f"job-{queued}", "not-a-job"}
    assert f"job-{old_job}" not in jobs
    assert report.freed["job_output"] > 0
    assert report.usage["job_output"]["count"] == 3
    assert report.usage["mirrors"]["count"] == 1 and (report.usage["mirrors"]["bytes"] or 0) > 0
    assert report.usage["run_refs"]["count"] == 6  # pr-2, pr-3, pr-4: head and base each
    assert (report.usage["database"]["bytes"] or 0) > 0

    # Once the queued job finishes, its keep ref goes at the next round.
    with Session(engine) as session:
        job = session.get(Job, queued)
        assert job is not None
        job.status, job.finished_at = "passed", _at(1)
        session.add(job)
        session.commit()
    run_maintenance(engine, settings, now=NOW)
    assert f"refs/stackbot/keep/job-{queued}" not in world.refs()


def test_a_dry_run_removes_nothing_and_says_what_would_go(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    world = World(engine, settings, tmp_path)
    run = world.run("pr-1", [1], days_ago=40, target=1)
    job = world.job(run, status="passed", finished_days_ago=40)
    before, loose = world.refs(), world.loose_objects()
    lines: list[str] = []

    report = run_maintenance(engine, settings, now=NOW, dry_run=True, say=lines.append)

    assert world.refs() == before and world.loose_objects() == loose
    assert (settings.jobs_dir / f"job-{job}").is_dir()
    assert report.summary["run_refs_removed"] == 2 and report.summary["job_dirs_removed"] == 1
    assert any("would delete 2 run refs" in line for line in lines)
    assert any(f"would remove job-{job}" in line for line in lines)


def test_a_round_by_hand_is_recorded(engine: Engine, settings: Settings, tmp_path: Path) -> None:
    World(engine, settings, tmp_path)
    run_by_hand(engine, settings, dry_run=True, say=lambda _: None)
    with Session(engine) as session:
        assert session.exec(select(MaintenanceRun)).all() == []
    run_by_hand(engine, settings, dry_run=False, say=lambda _: None)
    with Session(engine) as session:
        rows = session.exec(select(MaintenanceRun)).all()
    assert [(r.trigger, r.period) for r in rows] == [("cli", None)]
    assert rows[0].finished_at is not None and rows[0].usage["mirrors"]["count"] == 1


@pytest.mark.parametrize("days", [0.0, 29.0])
def test_nothing_recent_goes(
    engine: Engine, settings: Settings, tmp_path: Path, days: float
) -> None:
    world = World(engine, settings, tmp_path)
    run = world.run("pr-1", [1], days_ago=days, target=1)
    job = world.job(run, status="passed", finished_days_ago=days)
    before = world.refs()
    run_maintenance(engine, settings, now=NOW)
    assert world.refs() == before
    assert (settings.jobs_dir / f"job-{job}").is_dir()
    assert timedelta(days=settings.maintenance.run_ref_retention_days) == timedelta(days=30)


def test_an_expired_runs_commits_are_dropped_once_past_the_prune_grace(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    world = World(engine, settings, tmp_path)
    run = world.run("pr-3", [3], days_ago=40, target=3)
    with Session(engine) as session:
        commit = session.get(IntegrationRun, run).final_commit  # type: ignore[union-attr]
    assert commit is not None
    run_maintenance(engine, settings, now=NOW)
    assert not world.refs()
    assert world.has_object(commit)  # unreachable, but written less than an hour ago
    two_hours_ago = time.time() - 7200
    for path in (world.mirror.git_dir / "objects").glob("??/*"):
        os.utime(path, (two_hours_ago, two_hours_ago))
    report = run_maintenance(engine, settings, now=NOW)
    world.mirror.close()
    assert not world.has_object(commit)
    assert report.freed["mirrors"] > 0
