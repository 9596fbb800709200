"""Excluded and pinned nodes on a real Slurm (two node daemons, n1 and n2; issue 26 point 4): a
job whose spec excludes n1 runs on n2, and a node check pinned to n1 runs there."""

from __future__ import annotations

import sys

import pytest

from gpu_jobs.executors import SlurmExecutor, SlurmExecutorConfig, wait_for
from gpu_jobs.spec import JobSpec, LauncherOptions, Shape
from gpu_jobs.testsets import NODE_CHECK_TARGET

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]
CPU = LauncherOptions(device="cpu")  # the GPUs are /dev/null here


def node_check(job_id: str, **fields: object) -> JobSpec:
    return JobSpec(
        job_id=job_id,
        test_set="node-check",
        targets=(NODE_CHECK_TARGET,),
        shape=Shape(1, 2),
        reference=True,
        launcher=CPU,
        **fields,  # type: ignore[arg-type]
    )


def test_an_excluded_node_gets_no_job_and_a_pinned_check_runs_on_its_node(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    shared = tmp_path_factory.mktemp("slurm-nodes")
    executor = SlurmExecutor(
        SlurmExecutorConfig(
            python=sys.executable, cpus_per_task=1, shared_dir=shared, poll_interval_s=0.3
        )
    )
    specs = {
        "around-n1": node_check("around-n1", exclude_nodes=("n1",)),
        "on-n1": node_check("on-n1", only_nodes=("n1",)),
        "around-n2": node_check("around-n2", exclude_nodes=("n2",)),
    }
    handles = {name: executor.submit(spec, shared / name) for name, spec in specs.items()}
    assert "#SBATCH --exclude=n1" in (shared / "around-n1" / "job.sbatch").read_text()
    assert "#SBATCH --nodelist=n1" in (shared / "on-n1" / "job.sbatch").read_text()
    nodes = {}
    for name, handle in handles.items():
        result = wait_for(executor, handle, timeout_s=300)
        assert result.status == "passed", result.message
        nodes[name] = result.nodes
    assert nodes == {"around-n1": ("n2",), "on-n1": ("n1",), "around-n2": ("n1",)}
