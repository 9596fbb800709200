"""What Slurm's own state makes of a job whose runner never reported (issue 13: a job that ran
out of time or lost its node before any test ran is ``infra``, retried on another node)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpu_jobs.executors.base import JobHandle, JobState
from gpu_jobs.executors.slurm import SlurmExecutor
from gpu_jobs.executors.slurm_script import SlurmExecutorConfig
from gpu_jobs.testsets import get_test_set


@pytest.mark.parametrize(
    ("scheduler_state", "status"),
    [
        ("TIMEOUT", "infra"),
        ("NODE_FAIL", "infra"),
        ("BOOT_FAIL", "infra"),
        ("CANCELLED", "cancelled"),
    ],
)
def test_no_runner_report_is_infra_unless_cancelled(
    tmp_path: Path, scheduler_state: str, status: str
) -> None:
    executor = SlurmExecutor(SlurmExecutorConfig(python=sys.executable, shared_dir=tmp_path))
    spec = get_test_set("amax-group").job_spec(job_id="j1", shape="1x4", checkout=str(tmp_path))
    out = tmp_path / "j1"
    out.mkdir()
    handle = JobHandle("slurm", "j1", str(out), {"slurm_job_id": "42"})
    state = JobState("finished", scheduler_state=scheduler_state, detail="exit 0:0")
    result = executor._runner_result(spec, handle, state)
    assert result.status == status, result.message
    assert scheduler_state in result.message
