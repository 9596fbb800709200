"""The Slurm executor against a real Slurm: two node daemons on this host, fake GPUs."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_jobs.executors import JobHandle, SlurmExecutor, SlurmExecutorConfig, wait_for
from gpu_jobs.rendezvous import master_address
from gpu_jobs.spec import ContractError, JobSpec, LauncherOptions, Shape
from gpu_jobs.testsets import get_test_set
from tests.gpu_jobs.throwaway import marked_env, processes_with, write_suites

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]
CPU = LauncherOptions(device="cpu")  # the GPUs are /dev/null here


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slurm-shared")


def executor_for(shared: Path, **changes: object) -> SlurmExecutor:
    config = SlurmExecutorConfig(
        python=sys.executable, cpus_per_task=1, shared_dir=shared, poll_interval_s=0.3
    )
    return SlurmExecutor(SlurmExecutorConfig(**{**vars(config), **changes}))


def throwaway_job(shared: Path, job_id: str, target: str, **fields: object) -> JobSpec:
    suites = write_suites(shared / f"tree-{job_id}")
    body: dict[str, object] = {
        "job_id": job_id,
        "test_set": "throwaway",
        "targets": (target,),
        "shape": Shape(1, 4),
        "checkout": str(suites),
        "node_check": False,
        "launcher": CPU,
        **fields,
    }
    return JobSpec(**body)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def time_limited_job(shared: Path) -> Iterator[tuple[SlurmExecutor, JobHandle, dict[str, str]]]:
    """Submitted early: Slurm enforces a one-minute limit only every 30 s or so, so this job
    hangs in the background while the other tests run."""
    env = marked_env()
    executor = executor_for(shared, time_limit_minutes=1)
    spec = throwaway_job(shared, "time-limit", "test_hang_all.py", timeout_s=900, env=env)
    yield executor, executor.submit(spec, shared / "time-limit"), env


def test_amax_group_2x4_end_to_end(shared: Path, time_limited_job: object) -> None:
    executor = executor_for(shared)
    spec = get_test_set("amax-group").job_spec(
        job_id="amax-2x4", shape="2x4", reference=True, launcher=CPU
    )
    handle = executor.submit(spec, shared / "amax-2x4")
    assert (shared / "amax-2x4" / "job.sbatch").read_text().count("--gpus-per-node=4") == 1
    seen: list[str] = []
    resumed = SlurmExecutor(executor.config)  # as a restarted worker would
    result = wait_for(
        resumed,
        JobHandle.from_str(handle.to_str()),
        timeout_s=400,
        on_state=lambda s: seen.append(s.phase),
    )
    assert result.status == "passed", result.message
    assert "running" in seen and seen[-1] == "finished"
    assert result.nodes == ("n1", "n2") and result.node_check == "passed"
    for test in result.tests:
        assert test.ranks == dict.fromkeys(range(8), "passed"), test.nodeid
    assert (shared / "amax-2x4" / result.logs["slurm"]).is_file()
    assert executor.poll(handle).scheduler_state == "COMPLETED"


def test_a_failing_test_is_failed(shared: Path) -> None:
    executor = executor_for(shared)
    handle = executor.submit(
        throwaway_job(shared, "failing", "test_failing.py"), shared / "failing"
    )
    result = wait_for(executor, handle, timeout_s=200)
    assert result.status == "failed", result.message
    assert result.failed_ranks == (1,)


def test_a_crashed_rank_is_an_error_naming_it(shared: Path) -> None:
    executor = executor_for(shared)
    handle = executor.submit(throwaway_job(shared, "crash", "test_crash.py"), shared / "crash")
    result = wait_for(executor, handle, timeout_s=200)
    assert result.status == "error", result.message
    assert result.crashed_ranks == (2,) and "rank 2 crashed" in result.message


def test_cancel_gives_cancelled_and_kills_the_ranks(shared: Path) -> None:
    executor = executor_for(shared)
    env = marked_env()
    spec = throwaway_job(shared, "cancel", "test_hang_all.py", env=env, timeout_s=600)
    handle = executor.submit(spec, shared / "cancel")
    deadline = time.monotonic() + 120
    while len(list((shared / "cancel").glob("tests/progress/rank-*.started"))) < 4:
        assert time.monotonic() < deadline, "the ranks never started"
        time.sleep(0.2)
    executor.cancel(handle)
    result = wait_for(executor, handle, timeout_s=120)
    assert result.status == "cancelled", result.message
    assert executor.poll(handle).scheduler_state == "CANCELLED"
    _assert_gone(env)


def test_slurm_time_limit_gives_timeout(
    time_limited_job: tuple[SlurmExecutor, JobHandle, dict[str, str]],
) -> None:
    executor, handle, env = time_limited_job
    result = wait_for(executor, handle, timeout_s=300)
    assert result.status == "timeout", result.message
    assert executor.poll(handle).scheduler_state == "TIMEOUT"
    _assert_gone(env)


def test_requests_slurm_cannot_place_are_refused_naming_the_field(shared: Path) -> None:
    executor = executor_for(shared)
    too_wide = throwaway_job(shared, "too-wide", "test_passing.py", shape=Shape(1, 9))
    with pytest.raises(ContractError) as caught:
        executor.submit(too_wide, shared / "too-wide")
    assert caught.value.field == "shape"
    elsewhere = throwaway_job(shared, "elsewhere", "test_passing.py")
    with pytest.raises(ContractError) as caught:
        executor.submit(elsewhere, Path("/tmp") / "not-shared-stackbot-job")
    assert caught.value.field == "out_dir"


def test_master_address_comes_from_node_addr_when_names_do_not_resolve() -> None:
    with pytest.raises(OSError):
        socket.gethostbyname("n1")
    assert master_address("n[1-2]") == "127.0.0.1"


def _assert_gone(env: dict[str, str]) -> None:
    deadline = time.monotonic() + 10
    while processes_with(env) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(env) == []


def test_submitting_again_adopts_the_allocation_instead_of_a_second_sbatch(shared: Path) -> None:
    """A submitter that died after sbatch (before or after it wrote the id down) gets the same
    Slurm job back: a second sbatch would be a second allocation."""
    executor = executor_for(shared)
    spec = throwaway_job(shared, "again", "test_passing.py")
    out_dir = shared / "again"
    first = executor.submit(spec, out_dir)
    assert executor.submit(spec, out_dir) == first
    # Died while sbatch answered: found by the job's name and working directory.
    (out_dir / "slurm.json").unlink()
    adopted = executor.submit(spec, out_dir)
    assert adopted.data["slurm_job_id"] == first.data["slurm_job_id"]
    result = wait_for(executor, adopted, timeout_s=200)
    assert result.status == "passed", result.message
    (out_dir / "slurm.json").unlink()  # finished, still known to the controller
    assert executor.submit(spec, out_dir).data["slurm_job_id"] == first.data["slurm_job_id"]
    assert [p.name for p in out_dir.glob("slurm-*.out")] == [
        f"slurm-{first.data['slurm_job_id']}.out"
    ]
    assert executor.find_submitted("gpu_jobs-again", out_dir) == first.data["slurm_job_id"]
