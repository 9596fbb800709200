"""Starting a GPU job through the service (``advance_jobs``) with the real local executor
(torchrun ranks on CPU): the handle is stored on both databases, and a pass that dies after the
executor started the job makes the next pass adopt that run, never start a second one."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from textwrap import dedent

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from gpu_jobs.executors import (
    Executor,
    JobHandle,
    LocalExecutor,
    LocalExecutorConfig,
    SlurmExecutor,
    SlurmExecutorConfig,
)
from gpu_jobs.spec import JobSpec
from gpu_jobs.testsets import load_test_sets
from stackbot.db.models import Job, Repository
from stackbot.db.models.jobs import FINISHED_STATES
from stackbot.services import job_execution
from tests.e2e.harness import main_files

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


def backend_of(setup: Setup, executor: Executor) -> job_execution.JobBackend:
    test_sets = setup.repo.parent / "testsets.toml"
    test_sets.write_text(TEST_SETS)
    return job_execution.JobBackend(
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


def advance_until_finished(setup: Setup, backend: job_execution.JobBackend) -> Job:
    deadline = time.monotonic() + 300
    while True:
        job_execution.advance_jobs(
            setup.engine, backend, repo_url_of={setup.repo_id: str(setup.repo)}
        )
        job = job_row(setup)
        if job.status in FINISHED_STATES:
            return job
        assert time.monotonic() < deadline, f"job still {job.status}"
        time.sleep(0.5)


@pytest.mark.torchrun
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


@pytest.mark.torchrun
def test_a_pass_dying_after_the_start_is_adopted_not_started_again(setup: Setup) -> None:
    executor = DiesAfterSubmit(local_executor(setup))
    backend = backend_of(setup, executor)  # type: ignore[arg-type]
    urls = {setup.repo_id: str(setup.repo)}
    with pytest.raises(RuntimeError, match="worker killed"):
        job_execution.advance_jobs(setup.engine, backend, repo_url_of=urls)
    out_dir = setup.jobs_dir / f"job-{setup.job_id}"
    first_run = (out_dir / "launch.json").read_text() if (out_dir / "launch.json").exists() else ""
    job = advance_until_finished(setup, backend)  # the task retried
    assert job.status == "passed", job.error
    assert executor.submits >= 2
    assert sorted(p.name for p in setup.jobs_dir.iterdir()) == [f"job-{setup.job_id}"]
    assert (out_dir / "launch.json").read_text() == first_run  # launched once
    assert JobHandle.from_str(job.external_id or "").out_path == out_dir.resolve()


class SlurmAnswers(SlurmExecutor):
    """The Slurm executor with its one seam to Slurm answering as a controller would: down,
    then up and knowing the job an earlier pass's sbatch started (real ``scontrol -o`` and
    ``squeue`` output). Records every command."""

    def __init__(self, config: SlurmExecutorConfig, out_dir: Path) -> None:
        super().__init__(config)
        self.out_dir = out_dir
        self.up = False
        self.commands: list[list[str]] = []

    def _slurm(self, argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        self.commands.append(argv)
        if not self.up:
            down = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
            return subprocess.CompletedProcess(argv, 1, "", down)
        if argv[0] == "scontrol":
            line = (
                "JobId=41 JobName=gpu_jobs-stackbot-job-{id} UserId=root(0) GroupId=root(0) "
                "MCS_label=N/A Priority=4294901757 Nice=0 Account=(null) QOS=(null) "
                "JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 "
                "Reboot=0 ExitCode=0:0 RunTime=00:00:07 TimeLimit=00:15:00 TimeMin=N/A "
                "SubmitTime=2026-12-03T07:00:00 EligibleTime=2026-12-03T07:00:00 "
                "StartTime=2026-12-03T07:00:01 EndTime=2026-12-03T07:15:01 Deadline=N/A "
                "Partition=debug AllocNode:Sid=host:1 NodeList=node1 BatchHost=node1 NumNodes=1 "
                "NumCPUs=1 NumTasks=1 CPUs/Task=1 TRES=cpu=1,node=1,billing=1,gres/gpu=2 "
                "Command={dir}/job.sbatch WorkDir={dir} StdErr={dir}/slurm-41.out "
                "StdIn=/dev/null StdOut={dir}/slurm-41.out Power=\n"
            )
            other = line.replace("JobId=41", "JobId=40").replace(str(self.out_dir), "/elsewhere")
            job_id = self.out_dir.name.removeprefix("job-")
            text = (other + line).format(id=job_id, dir=self.out_dir.resolve())
            return subprocess.CompletedProcess(argv, 0, text, "")
        if argv[0] == "squeue":
            return subprocess.CompletedProcess(argv, 0, "RUNNING|node1|2026-12-03T07:00:01\n", "")
        raise AssertionError(f"unexpected Slurm command {argv}")


def test_a_slurm_job_left_starting_is_adopted_once_slurm_answers_never_resubmitted(
    setup: Setup,
) -> None:
    """A pass died while sbatch ran: the job is ``starting`` and its job.sbatch is written.
    While the controller is down the job stays ``starting`` (neither failed nor submitted
    again); once it answers, the job it already runs is adopted, and sbatch never runs."""
    out_dir = setup.jobs_dir / f"job-{setup.job_id}"
    out_dir.mkdir(parents=True)
    (out_dir / "spec.json").write_text("{}")
    (out_dir / "job.sbatch").write_text("#!/bin/bash\n")
    with Session(setup.engine) as session:
        job = session.get(Job, setup.job_id)
        assert job is not None
        job.status, job.executor, job.out_dir = "starting", "slurm", str(out_dir)
        session.add(job)
        session.commit()
    config = SlurmExecutorConfig(python=sys.executable, shared_dir=setup.jobs_dir.parent)
    executor = SlurmAnswers(config, out_dir)
    backend = backend_of(setup, executor)
    urls = {setup.repo_id: str(setup.repo)}

    job_execution.advance_jobs(setup.engine, backend, repo_url_of=urls)
    job = job_row(setup)
    assert (job.status, job.error, job.external_id) == ("starting", None, None)

    executor.up = True
    job_execution.advance_jobs(setup.engine, backend, repo_url_of=urls)
    job = job_row(setup)
    assert job.status == "submitted" and job.external_id is not None
    assert JobHandle.from_str(job.external_id).data["slurm_job_id"] == "41"
    job_execution.advance_jobs(setup.engine, backend, repo_url_of=urls)
    assert job_row(setup).status == "running"
    assert not [argv for argv in executor.commands if argv[0] == "sbatch"]
