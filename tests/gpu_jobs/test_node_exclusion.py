"""Excluded and required nodes in a job spec (issue 26 point 4): the local executor's devices
are nodes named ``gpuN`` (``cpuN`` on a host without GPUs); ``exclude_nodes`` leaves them out
of the pool, ``only_nodes`` runs on exactly them (a node check of one device); the sbatch
script says ``--exclude`` and ``--nodelist``."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_jobs.executors import LocalExecutor, LocalExecutorConfig, PoolBusy, wait_for
from gpu_jobs.executors.pool import GpuPool
from gpu_jobs.executors.slurm_script import SlurmExecutorConfig, render_sbatch
from gpu_jobs.spec import ContractError, JobSpec, Shape
from gpu_jobs.testsets import NODE_CHECK_TARGET, get_test_set


def node_check(job_id: str, shape: Shape, **fields: object) -> JobSpec:
    return JobSpec(
        job_id=job_id,
        test_set="node-check",
        targets=(NODE_CHECK_TARGET,),
        shape=shape,
        reference=True,
        **fields,  # type: ignore[arg-type]
    )


def test_the_pool_leaves_excluded_slots_out_and_takes_only_the_named_ones(tmp_path: Path) -> None:
    pool = GpuPool(tmp_path, [0, 1, 2, 3, 4, 5, 6, 7], max_jobs=4, port_base=29600)
    assert pool.allocate("a", 4, 0, skip=frozenset({0, 2})).slots == (1, 3, 4, 5)
    assert pool.allocate("b", 1, 0, only=frozenset({2})).slots == (2,)
    with pytest.raises(PoolBusy, match="1 excluded"):
        pool.allocate("c", 3, 0, skip=frozenset({6}))  # 0 and 7 free; 6 is left out
    pool.release("b")
    assert pool.allocate("d", 1, 0, only=frozenset({2})).slots == (2,)


def test_only_and_excluded_nodes_round_trip_and_must_not_overlap() -> None:
    spec = node_check("chk", Shape(1, 8), only_nodes=("n1",), exclude_nodes=("n2",))
    again = JobSpec.from_json(spec.to_json())
    assert again.only_nodes == ("n1",) and again.exclude_nodes == ("n2",)
    with pytest.raises(ContractError) as caught:
        node_check("chk", Shape(1, 8), only_nodes=("n1",), exclude_nodes=("n1",))
    assert caught.value.field == "only_nodes"
    with pytest.raises(ContractError) as caught:
        node_check("chk", Shape(1, 8), only_nodes=("n1;rm",))
    assert caught.value.field == "only_nodes"


def test_the_sbatch_script_excludes_and_pins_nodes() -> None:
    spec = get_test_set("amax-group").job_spec(
        job_id="j", shape="1x4", checkout="/t", exclude_nodes=("n3", "n7")
    )
    script = render_sbatch(spec, SlurmExecutorConfig(), Path("/shared/j"))
    assert "#SBATCH --exclude=n3,n7" in script and "--nodelist" not in script
    pinned = render_sbatch(
        node_check("c", Shape(1, 4), only_nodes=("n3",)), SlurmExecutorConfig(), Path("/s")
    )
    assert "#SBATCH --nodelist=n3" in pinned and "--exclude" not in pinned


def test_a_local_node_check_naming_no_device_of_this_host_is_refused(tmp_path: Path) -> None:
    executor = LocalExecutor(LocalExecutorConfig(state_dir=tmp_path / "pool", cpu_slots=4))
    with pytest.raises(ContractError) as caught:
        executor.submit(node_check("c", Shape(1, 1), only_nodes=("n1",)), tmp_path / "c")
    assert caught.value.field == "only_nodes" and "cpu0, cpu1, cpu2, cpu3" in str(caught.value)


@pytest.mark.torchrun
def test_the_local_executor_runs_on_the_named_device_and_around_excluded_ones(
    tmp_path: Path,
) -> None:
    executor = LocalExecutor(
        LocalExecutorConfig(state_dir=tmp_path / "pool", cpu_slots=4, max_parallel_jobs=2)
    )
    assert executor.cpu_only
    check = node_check("check-cpu2", Shape(1, 1), only_nodes=("cpu2",))
    handle = executor.submit(check, tmp_path / "check")
    assert handle.data["slots"] == [2] and handle.data["nodes"] == ["cpu2"]
    around = node_check("around", Shape(1, 2), exclude_nodes=("cpu0", "cpu2"))
    other = executor.submit(around, tmp_path / "around")
    assert other.data["slots"] == [1, 3] and other.data["nodes"] == ["cpu1", "cpu3"]
    for h in (handle, other):
        result = wait_for(executor, h, timeout_s=300)
        assert result.status == "passed", result.message
        assert result.node_check == "passed"
