"""The local executor end to end: real torchrun ranks (gloo on CPU) through result.json."""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gpu_jobs.executors import (
    JobHandle,
    LocalExecutor,
    LocalExecutorConfig,
    PoolBusy,
    wait_for,
)
from gpu_jobs.spec import ContractError, JobSpec, LauncherOptions, Shape
from gpu_jobs.testsets import get_test_set
from tests.gpu_jobs.throwaway import marked_env, processes_with, write_suites

JOB_TIMEOUT_S = 400


@pytest.fixture
def executor(tmp_path: Path) -> LocalExecutor:
    return LocalExecutor(LocalExecutorConfig(state_dir=tmp_path / "pool", max_parallel_jobs=1))


def reference_job(test_set: str, shape: str, **launcher: object) -> JobSpec:
    return get_test_set(test_set).job_spec(
        job_id=f"{test_set}-{shape}",
        shape=shape,
        reference=True,
        launcher=LauncherOptions(**launcher),  # type: ignore[arg-type]
    )


def assert_passed_on_every_rank(result_status: str, tests: tuple, world: int) -> None:  # type: ignore[type-arg]
    assert result_status == "passed"
    assert tests, "no tests ran"
    for test in tests:
        assert test.ranks == dict.fromkeys(range(world), "passed"), test.nodeid


@pytest.mark.torchrun
def test_amax_group_1x4_and_a_restarted_worker_collects_it(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    handle = executor.submit(reference_job("amax-group", "1x4"), tmp_path / "job")
    assert executor.poll(handle).phase == "running"
    # A restarted worker has only the handle's string and a fresh executor.
    resumed = LocalExecutor(LocalExecutorConfig(state_dir=tmp_path / "pool"))
    result = wait_for(resumed, JobHandle.from_str(handle.to_str()), timeout_s=JOB_TIMEOUT_S)
    assert_passed_on_every_rank(result.status, result.tests, 4)
    assert result.node_check == "passed"
    assert result.counts.passed >= 5 and result.counts.failed == 0
    assert (tmp_path / "job" / "result.json").is_file()
    assert any("suites/amax_group/test_amax_group.py::" in t.nodeid for t in result.tests)


@pytest.mark.torchrun
def test_amax_group_2x4_as_two_node_groups(executor: LocalExecutor, tmp_path: Path) -> None:
    handle = executor.submit(reference_job("amax-group", "2x4"), tmp_path / "job")
    assert len(handle.data["pids"]) == 2  # one runner per node group
    result = wait_for(executor, handle, timeout_s=JOB_TIMEOUT_S)
    assert_passed_on_every_rank(result.status, result.tests, 8)
    assert result.node_check == "passed" and len(result.nodes) == 2
    assert {"runner-node0", "runner-node1", "torchrun-tests-node1"} <= set(result.logs)


@pytest.mark.torchrun
def test_blockwise_recipe_1x4(executor: LocalExecutor, tmp_path: Path) -> None:
    handle = executor.submit(reference_job("blockwise-recipe", "1x4"), tmp_path / "job")
    result = wait_for(executor, handle, timeout_s=JOB_TIMEOUT_S)
    assert_passed_on_every_rank(result.status, result.tests, 4)
    assert any("blockwise_recipe" in t.nodeid for t in result.tests)


@pytest.mark.torchrun
def test_a_failed_node_check_is_infra_and_the_tests_do_not_run(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    # NCCL on a node without CUDA: the node is not fit for the job, whatever the tests say.
    spec = reference_job("amax-group", "1x4", backend="nccl")
    result = wait_for(executor, executor.submit(spec, tmp_path / "job"), timeout_s=JOB_TIMEOUT_S)
    assert result.status == "infra", result.message
    assert result.node_check == "failed" and "node check" in result.message
    assert result.tests == () and not (tmp_path / "job" / "tests").exists()


def _wait_for_ranks(out_dir: Path, count: int) -> None:
    deadline = time.monotonic() + 120
    while len(list(out_dir.glob("tests/progress/rank-*.started"))) < count:
        assert time.monotonic() < deadline, "ranks never started"
        time.sleep(0.2)


@pytest.mark.torchrun
def test_cancel_stops_the_tree_and_frees_the_pool(executor: LocalExecutor, tmp_path: Path) -> None:
    suites = write_suites(tmp_path / "tree")
    env = marked_env()
    hang = JobSpec(
        job_id="hang",
        test_set="throwaway",
        targets=("test_hang_all.py",),
        shape=Shape(1, 4),
        checkout=str(suites),
        node_check=False,
        env=env,
        timeout_s=600,
    )
    handle = executor.submit(hang, tmp_path / "hang")
    _wait_for_ranks(tmp_path / "hang", 4)
    with pytest.raises(PoolBusy, match="limit is 1"):
        executor.submit(JobSpec(**{**vars(hang), "job_id": "second"}), tmp_path / "second")
    executor.cancel(handle)
    result = wait_for(executor, handle, timeout_s=60)
    assert result.status == "cancelled", result.message
    assert processes_with(env) == []
    passing = JobSpec(**{**vars(hang), "job_id": "after", "targets": ("test_passing.py",)})
    result = wait_for(executor, executor.submit(passing, tmp_path / "after"), timeout_s=120)
    assert result.status == "passed"


def test_bad_specs_are_refused_at_submit_naming_the_field(tmp_path: Path) -> None:
    four = LocalExecutor(LocalExecutorConfig(gpus=(0, 1, 2, 3), state_dir=tmp_path / "pool"))
    with pytest.raises(ContractError) as caught:
        four.submit(reference_job("amax-group", "2x4"), tmp_path / "a")
    assert caught.value.field == "shape" and "8 ranks" in str(caught.value)

    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    ghost = JobSpec(
        job_id="g",
        test_set="t",
        targets=("t.py",),
        shape=Shape(1, 4),
        repo_url=str(repo),
        commit="1" * 40,
    )
    with pytest.raises(ContractError) as caught:
        four.submit(ghost, tmp_path / "b")
    assert caught.value.field == "commit"

    nowhere = JobSpec(
        job_id="n",
        test_set="t",
        targets=("t.py",),
        shape=Shape(1, 4),
        checkout=str(tmp_path / "nowhere"),
    )
    with pytest.raises(ContractError) as caught:
        four.submit(nowhere, tmp_path / "c")
    assert caught.value.field == "checkout"

    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "result.json").write_text("{}")
    with pytest.raises(ContractError) as caught:
        four.submit(reference_job("amax-group", "1x4"), tmp_path / "used")
    assert caught.value.field == "out_dir"


@pytest.mark.torchrun
def test_submitting_again_into_the_same_out_dir_adopts_the_run(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    """A submitter that died after starting the job (before or after it wrote the handle
    down) gets the same run back, never a second copy; a finished one too."""
    suites = write_suites(tmp_path / "tree")
    env = marked_env()
    spec = JobSpec(
        job_id="again",
        test_set="throwaway",
        targets=("test_passing.py",),
        shape=Shape(1, 2),
        checkout=str(suites),
        node_check=False,
        env=env,
        timeout_s=300,
    )
    out_dir = tmp_path / "again"
    first = executor.submit(spec, out_dir)
    # The pool is full (limit 1): only adoption can answer without PoolBusy.
    assert executor.submit(spec, out_dir) == first
    # Died between starting the runners and writing the handle: found by their run id.
    (out_dir / "started.json").unlink()
    restarted = LocalExecutor(LocalExecutorConfig(state_dir=tmp_path / "pool"))
    adopted = restarted.submit(spec, out_dir)
    assert adopted.data["run_id"] == first.data["run_id"]
    assert adopted.data["pids"] == first.data["pids"]
    result = wait_for(restarted, adopted, timeout_s=JOB_TIMEOUT_S)
    assert result.status == "passed", result.message
    assert restarted.submit(spec, out_dir).data["run_id"] == first.data["run_id"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again", "pool", "tree"]


@pytest.mark.torchrun
def test_two_submitters_of_one_job_at_once_start_it_once(tmp_path: Path) -> None:
    """A re-claimed task and the one it was taken from may submit the same job together."""
    roomy = LocalExecutor(LocalExecutorConfig(state_dir=tmp_path / "pool", max_parallel_jobs=4))
    suites = write_suites(tmp_path / "tree")
    spec = JobSpec(
        job_id="twice",
        test_set="throwaway",
        targets=("test_passing.py",),
        shape=Shape(1, 2),
        checkout=str(suites),
        node_check=False,
        env=marked_env(),
        timeout_s=300,
    )
    with ThreadPoolExecutor(2) as pool:
        handles = list(pool.map(lambda _: roomy.submit(spec, tmp_path / "twice"), range(2)))
    assert handles[0] == handles[1]
    result = wait_for(roomy, handles[0], timeout_s=JOB_TIMEOUT_S)
    assert result.status == "passed", result.message
