"""The sbatch script and the per-node script, golden-tested; Slurm placement from its variables.

Regenerate the golden files deliberately with ``STACKBOT_UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpu_jobs.executors.slurm_script import (
    SlurmExecutorConfig,
    render_node_script,
    render_sbatch,
    time_limit_minutes,
)
from gpu_jobs.rendezvous import SLURM_PORT_BASE, PlacementError, first_host, placement
from gpu_jobs.spec import LauncherOptions, Shape
from gpu_jobs.testsets import get_test_set

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("STACKBOT_UPDATE_GOLDEN") == "1"  # read before the env is isolated
JOBS = Path("/shared/stackbot/jobs")


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"{path} is missing; run with STACKBOT_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(), f"{name} differs from its golden file"


def test_minimal_single_node_job() -> None:
    spec = get_test_set("blockwise-recipe").job_spec(
        job_id="run-3.blockwise-recipe.1x4", shape="1x4", checkout="/shared/trees/abc"
    )
    config = SlurmExecutorConfig()
    out_dir = JOBS / spec.job_id
    check_golden("minimal_1x4.sbatch", render_sbatch(spec, config, out_dir))
    check_golden("minimal_1x4.node.sh", render_node_script(spec, config, out_dir))


def test_cluster_job_with_container_accounting_and_setup() -> None:
    test_set = get_test_set("amax-group")
    spec = test_set.job_spec(
        job_id="run-7.amax-group.2x4",
        shape="2x4",
        repo_url="https://github.com/NVIDIA/Megatron-LM.git",
        commit="77391e7" + "a" * 33,
        launcher=LauncherOptions(backend="nccl", device="cuda"),
    )
    config = SlurmExecutorConfig(
        partition="batch",
        account="coreai_dlalgo",
        qos="normal",
        time_limit_minutes=240,
        container_image="nvcr.io/nvidia/pytorch:25.01-py3",
        container_mounts=("/lustre/fsw:/lustre/fsw",),
        extra_sbatch_args=("--exclusive", "--mem=0"),
        setup_commands=("source /opt/venv/bin/activate", "pip install --no-deps -e /opt/stackbot"),
        shared_dir=Path("/shared/stackbot"),
        python="python3",
        cpus_per_task=16,
        cache_dir=Path("/shared/stackbot/cache"),
        env={"NCCL_DEBUG": "WARN"},
    )
    out_dir = JOBS / spec.job_id
    check_golden("cluster_2x4.sbatch", render_sbatch(spec, config, out_dir))
    check_golden("cluster_2x4.node.sh", render_node_script(spec, config, out_dir))


def test_time_limit_sits_above_the_runner_timeout_and_under_the_cap() -> None:
    spec = get_test_set("amax-group").job_spec(job_id="j", shape="1x4", checkout="/x")
    assert time_limit_minutes(spec, SlurmExecutorConfig(time_limit_minutes=60)) == 35
    assert time_limit_minutes(spec, SlurmExecutorConfig(time_limit_minutes=20)) == 20


@pytest.mark.parametrize(
    ("nodelist", "first"),
    [
        ("n[1-2]", "n1"),
        ("gpu-a[007,009-012],gpu-b3", "gpu-a007"),
        ("node17", "node17"),
        ("a,b", "a"),
    ],
)
def test_first_host_of_a_slurm_node_list(nodelist: str, first: str) -> None:
    assert first_host(nodelist) == first


def test_placement_from_slurm_variables() -> None:
    env = {
        "SLURM_JOB_ID": "1234",
        "SLURM_NNODES": "2",
        "SLURM_NODEID": "1",
        "SLURM_JOB_NODELIST": "localhost",
        "SLURMD_NODENAME": "n2",
    }
    where = placement(Shape(2, 4), env=env)
    assert (where.node_rank, where.nnodes, where.node_name) == (1, 2, "n2")
    assert where.rendezvous.master_addr == "127.0.0.1"
    assert where.rendezvous.master_port == SLURM_PORT_BASE + 2 * 1234
    explicit = placement(
        Shape(2, 4), node_rank=0, master_addr="10.1.1.1", master_port=29500, env=env
    )
    assert (explicit.node_rank, explicit.rendezvous.master_addr) == (0, "10.1.1.1")


def test_placement_that_cannot_work_is_explained() -> None:
    with pytest.raises(PlacementError, match="needs 2 node"):
        placement(Shape(2, 4), env={"SLURM_JOB_ID": "1", "SLURM_NNODES": "1", "SLURM_NODEID": "0"})
    with pytest.raises(PlacementError, match="--master-addr"):
        placement(Shape(2, 4), node_rank=0, env={})
    alone = placement(Shape(1, 4), env={})
    assert alone.rendezvous.torchrun_args() == ["--standalone"]
