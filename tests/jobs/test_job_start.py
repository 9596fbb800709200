"""Starting a GPU job through the service (``advance_jobs``) with the real local executor
(torchrun ranks on CPU): the handle is stored on both databases, and a pass that dies after the
executor started the job makes the next pass adopt that run, never start a second one."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from textwrap import dedent

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from gpu_jobs.executors import Executor, JobHandle, LocalExecutor, LocalExecutorConfig
from gpu_jobs.spec import JobSpec
from gpu_jobs.testsets import load_test_sets
from stackbot.db.models import Job, Repository
from stackbot.db.models.jobs import FINISHED_STATES
from stackbot.services import jobs as job_service
from tests.e2e.harness import main_files

pytestmark = pytest.mark.torchrun

TEST_SETS = dedent("""
    schema_version = "1.0"

    [test_sets.quick]
    shapes = ["1x2"]
    timeout_s = 300
    megatron_targets = ["tests/test_quick.py"]
""")


@dataclass
class Setup:
    engine: Engine
    job_id: int
    repo_id: int
    repo: Path
    jobs_dir: Path
    pool: Path


@pytest.fixture
def setup(engine: Engine, tmp_path: Path) -> Setup:
    repo = tmp_path / "repo"
    for name, text in main_files().items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@e"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "main"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    tree = subprocess.run(
        [*git, "rev-parse", "HEAD^{tree}"], capture_output=True, text=True, check=True
    )
    with Session(engine) as session:
        repository = Repository(full_name="o/r", clone_url=str(repo))
        session.add(repository)
        session.flush()
        assert repository.id is not None
        job = Job(
            repo_id=repository.id,
            kind="baseline",
            base_ref="main",
            test_set="quick",
            shape="1x2",
            tree_sha=tree.stdout.strip(),
            commit_sha=head.stdout.strip(),
            config_hash="c" * 64,
        )
        session.add(job)
        session.commit()
        assert job.id is not None
        ids = job.id, repository.id
    # A deep jobs directory, as on a real host: the handle is well over 100 characters.
    jobs_dir = tmp_path / "data" / "stackbot-jobs-on-this-host" / "local-executor-output"
    return Setup(engine, ids[0], ids[1], repo, jobs_dir, tmp_path / "pool")


def backend_of(setup: Setup, executor: Executor) -> job_service.JobBackend:
    test_sets = setup.repo.parent / "testsets.toml"
    test_sets.write_text(TEST_SETS)
    return job_service.JobBackend(
        executor=executor,
        test_sets=load_test_sets(test_sets),
        jobs_dir=setup.jobs_dir,
        node_check=False,
    )


def local_executor(setup: Setup) -> LocalExecutor:
    config = LocalExecutorConfig(state_dir=setup.pool, cache_dir=setup.pool.parent / "cache")
    return LocalExecutor(config)


def job_row(setup: Setup) -> Job:
    with Session(setup.engine) as session:
        job = session.get(Job, setup.job_id)
        assert job is not None
        return job


def advance_until_finished(setup: Setup, backend: job_service.JobBackend) -> Job:
    deadline = time.monotonic() + 300
    while True:
        job_service.advance_jobs(
            setup.engine, backend, repo_url_of={setup.repo_id: str(setup.repo)}
        )
        job = job_row(setup)
        if job.status in FINISHED_STATES:
            return job
        assert time.monotonic() < deadline, f"job still {job.status}"
        time.sleep(0.5)


def test_a_local_job_with_a_long_handle_is_recorded_and_finishes(setup: Setup) -> None:
    job = advance_until_finished(setup, backend_of(setup, local_executor(setup)))
    assert job.status == "passed", job.error
    assert job.external_id is not None and len(job.external_id) > 100
    handle = JobHandle.from_str(job.external_id)
    assert handle.out_path == (setup.jobs_dir / f"job-{setup.job_id}").resolve()
    assert job.counts["passed"] == 2


class DiesAfterSubmit:
    """The local executor, but the first submit's caller dies once the job started (as a
    worker SIGKILLed before it stored the handle would)."""

    kind = "local"

    def __init__(self, inner: LocalExecutor) -> None:
        self.inner = inner
        self.submits = 0

    def submit(self, spec: JobSpec, out_dir: Path) -> JobHandle:
        self.submits += 1
        handle = self.inner.submit(spec, out_dir)
        if self.submits == 1:
            raise RuntimeError("worker killed after the job started")
        return handle

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_a_pass_dying_after_the_start_is_adopted_not_started_again(setup: Setup) -> None:
    executor = DiesAfterSubmit(local_executor(setup))
    backend = backend_of(setup, executor)  # type: ignore[arg-type]
    urls = {setup.repo_id: str(setup.repo)}
    with pytest.raises(RuntimeError, match="worker killed"):
        job_service.advance_jobs(setup.engine, backend, repo_url_of=urls)
    out_dir = setup.jobs_dir / f"job-{setup.job_id}"
    first_run = (out_dir / "launch.json").read_text() if (out_dir / "launch.json").exists() else ""
    job = advance_until_finished(setup, backend)  # the task retried
    assert job.status == "passed", job.error
    assert executor.submits >= 2
    assert sorted(p.name for p in setup.jobs_dir.iterdir()) == [f"job-{setup.job_id}"]
    assert (out_dir / "launch.json").read_text() == first_run  # launched once
    assert JobHandle.from_str(job.external_id or "").out_path == out_dir.resolve()
