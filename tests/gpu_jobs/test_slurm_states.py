"""What Slurm's own state makes of a job whose runner never reported (issue 13: a job that ran
out of time or lost its node before any test ran is ``infra``, retried on another node)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpu_jobs.executors.base import JobHandle, JobState
from gpu_jobs.executors.slurm import SlurmExecutor
from gpu_jobs.executors.slurm_script import SlurmExecutorConfig
from gpu_jobs.spec import Counts, JobResult, TestResult
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


class _NodeFailed(SlurmExecutor):
    """Slurm's answer for the job is NODE_FAIL (the rest of the executor is real)."""

    def final_state(self, handle: JobHandle) -> JobState:
        return JobState("finished", scheduler_state="NODE_FAIL", detail="exit 0:0")


def test_a_node_failure_after_tests_ran_is_infra_and_counts_none_of_them(tmp_path: Path) -> None:
    executor = _NodeFailed(SlurmExecutorConfig(python=sys.executable, shared_dir=tmp_path))
    spec = get_test_set("amax-group").job_spec(job_id="j2", shape="2x4", checkout=str(tmp_path))
    out = tmp_path / "j2"
    out.mkdir()
    (out / "spec.json").write_text(spec.to_json())
    # What node 0 merged after node 1 vanished mid-test: an error with node 0's results.
    ran = TestResult("t.py::test_a", "passed", 0.1, dict.fromkeys(range(4), "passed"))
    partial = JobResult(
        "j2", "error", "node(s) 1 wrote no report", counts=Counts(passed=1), tests=(ran,)
    )
    (out / "result.json").write_text(partial.to_json())
    result = executor.collect(JobHandle("slurm", "j2", str(out), {"slurm_job_id": "43"}))
    assert result.status == "infra" and "a node failed under the job" in result.message
    assert result.tests == () and result.counts == Counts()
