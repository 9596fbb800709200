"""Jobs on a Slurm cluster: sbatch to submit, squeue / scontrol / sacct to poll, scancel.

Every Slurm command goes through :meth:`SlurmExecutor._slurm`. A finished job's status comes
from the runner's ``result.json``; Slurm's own state decides when the runner could not finish
(time limit, cancel, node failure) — see :func:`status_for`.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from gpu_jobs.executors.base import (
    ExecutorError,
    ExecutorKind,
    JobHandle,
    JobState,
    Phase,
    StartUnknown,
    prepare_out_dir,
    read_spec,
    submit_lock,
)
from gpu_jobs.executors.checks import check_sources
from gpu_jobs.executors.slurm_script import (
    SlurmExecutorConfig,
    job_name,
    render_node_script,
    render_sbatch,
)
from gpu_jobs.nodes import read_reports, write_atomic
from gpu_jobs.spec import ContractError, JobResult, JobSpec, JobStatus
from gpu_jobs.verdict import result_from_out_dir

COMMAND_TIMEOUT_S = 60.0
_SACCT_FIELDS = "JobID,JobName,WorkDir"
_SUBMITTED = "slurm.json"  # the Slurm id sbatch answered: a resubmit adopts it
_QUEUED = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "RESV_DEL_HOLD", "SUSPENDED"}
_RUNNING = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING"}
# Slurm's end states whose word beats whatever the runner managed to write.
_SCHEDULER_DECIDES: dict[str, tuple[JobStatus, str]] = {
    "TIMEOUT": ("timeout", "Slurm's time limit ended the job"),
    "DEADLINE": ("timeout", "the job reached its Slurm deadline"),
    "CANCELLED": ("cancelled", "the job was cancelled (scancel)"),
    "NODE_FAIL": ("infra", "a node failed under the job"),
    "BOOT_FAIL": ("infra", "a node failed to boot for the job"),
    "PREEMPTED": ("infra", "the job was preempted; run it again"),
    "OUT_OF_MEMORY": ("error", "a node ran out of memory"),
}
_UNFINISHED = ("cancelled", "timeout", "error", "infra")
_BAD_REQUEST = re.compile(
    r"Requested node configuration is not available|Invalid generic resource|"
    r"More processors requested than permitted|Node count specification invalid"
)


class SlurmExecutor:
    kind: ExecutorKind = "slurm"

    def __init__(self, config: SlurmExecutorConfig | None = None) -> None:
        self.config = config or SlurmExecutorConfig()

    # -- the interface -------------------------------------------------------------------------

    def submit(self, spec: JobSpec, out_dir: Path) -> JobHandle:
        """sbatch the job, or adopt the allocation an earlier submit of it got.

        Idempotent for one ``out_dir`` (a second sbatch is a second allocation): ``job.sbatch``
        is written before sbatch runs and ``slurm.json`` (the Slurm id) once it answered. A
        retry finding ``slurm.json`` adopts that job; finding only ``job.sbatch`` (the caller
        died while sbatch ran) it asks Slurm for a job of this job's unique name whose working
        directory is ``out_dir`` (:meth:`find_submitted`) before submitting again.
        """
        check_sources(spec)
        out_dir = out_dir.resolve()
        shared = self.config.shared_dir
        if shared is not None and not out_dir.is_relative_to(shared.resolve()):
            raise ContractError("out_dir", f"{out_dir} is outside the shared directory {shared}")
        with submit_lock(out_dir):
            return self._submit_once(spec, out_dir)

    def _submit_once(self, spec: JobSpec, out_dir: Path) -> JobHandle:
        adopted = self.adopt(spec, out_dir)
        if adopted is not None:
            return adopted
        if not (out_dir / "job.sbatch").exists():  # else: an earlier sbatch got nothing
            out_dir = prepare_out_dir(out_dir)
        write_atomic(out_dir / "spec.json", spec.to_json())
        (out_dir / "node.sh").write_text(render_node_script(spec, self.config, out_dir))
        write_atomic(out_dir / "job.sbatch", render_sbatch(spec, self.config, out_dir))
        done = self._slurm(["sbatch", "--parsable", str(out_dir / "job.sbatch")], cwd=out_dir)
        if done.returncode != 0:
            message = done.stderr.strip() or done.stdout.strip()
            if _BAD_REQUEST.search(message):
                raise ContractError("shape", f"Slurm refused {spec.shape}: {message}")
            raise ExecutorError(f"sbatch failed (exit {done.returncode}): {message}")
        slurm_id = done.stdout.strip().split(";")[0]
        if not slurm_id.isdigit():
            raise ExecutorError(f"sbatch answered {done.stdout.strip()!r}, not a job id")
        return self._record(spec, out_dir, slurm_id)

    def adopt(self, spec: JobSpec, out_dir: Path) -> JobHandle | None:
        """The handle of the Slurm job an earlier submit into ``out_dir`` got, or None."""
        out_dir = out_dir.resolve()
        try:
            recorded = json.loads((out_dir / _SUBMITTED).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            recorded = None
        if isinstance(recorded, dict) and str(recorded.get("slurm_job_id", "")).isdigit():
            return JobHandle("slurm", spec.job_id, str(out_dir), recorded)
        if not (out_dir / "job.sbatch").exists():
            return None
        try:
            slurm_id = self.find_submitted(job_name(spec), out_dir)
        except ExecutorError as error:  # sbatch may have given it an allocation: never resubmit
            what = f"whether {spec.job_id} was submitted cannot be told: {error}"
            raise StartUnknown(what) from None
        return None if slurm_id is None else self._record(spec, out_dir, slurm_id)

    def find_submitted(self, name: str, out_dir: Path) -> str | None:
        """The id of the job named ``name`` submitted from ``out_dir`` that Slurm still knows
        (``scontrol show job``: queued, running and recently ended jobs), else the one
        accounting remembers (``sacct``, when accounting is enabled)."""
        shown = self._slurm(["scontrol", "-o", "show", "job"])
        _refuse_silence(shown, "scontrol")
        found = jobs_named(shown.stdout, name, out_dir) if shown.returncode == 0 else []
        if found:
            return found[-1]
        accounted = self._slurm(
            ["sacct", "-X", "-n", "-P", "-S", "2000-01-01", "--name", name, "-o", _SACCT_FIELDS]
        )
        if accounted.returncode != 0:
            return None
        for line in reversed(accounted.stdout.splitlines()):
            parts = line.split("|")
            ours = len(parts) >= 3 and parts[0].isdigit() and parts[1] == name
            if ours and _same_dir(parts[2], out_dir):
                return parts[0]
        return None

    def _record(self, spec: JobSpec, out_dir: Path, slurm_id: str) -> JobHandle:
        data = {"slurm_job_id": slurm_id, "submitted_at": _now()}
        write_atomic(out_dir / _SUBMITTED, json.dumps(data, sort_keys=True))
        return JobHandle("slurm", spec.job_id, str(out_dir), data)

    def poll(self, handle: JobHandle) -> JobState:
        slurm_id = _slurm_id(handle)
        done = self._slurm(["squeue", "-h", "-j", slurm_id, "-o", "%T|%N|%S"])
        _refuse_silence(done, "squeue")
        line = (
            done.stdout.strip().splitlines()[0]
            if done.returncode == 0 and done.stdout.strip()
            else ""
        )
        if line:
            state, nodes, start = [*line.split("|"), "", ""][:3]
            if state in _QUEUED:
                return JobState("queued", scheduler_state=state)
            if state in _RUNNING:
                return JobState(
                    "running", node=nodes or None, started_at=_iso(start), scheduler_state=state
                )
        return self.final_state(handle)

    def cancel(self, handle: JobHandle) -> None:
        done = self._slurm(["scancel", _slurm_id(handle)])
        if done.returncode != 0 and "Invalid job id" not in done.stderr:
            raise ExecutorError(f"scancel failed: {done.stderr.strip()}")

    def collect(self, handle: JobHandle) -> JobResult:
        spec = read_spec(handle.out_path)
        state = self.final_state(handle)
        result = self._runner_result(spec, handle, state)
        logs = {**result.logs, "slurm": f"slurm-{_slurm_id(handle)}.out"}
        decided = _SCHEDULER_DECIDES.get(state.scheduler_state)
        if decided is not None and result.status in _UNFINISHED:
            status, why = decided
            result = replace(result, status=status, message=f"{why}; {result.message}".rstrip("; "))
        if result.status == "infra":
            result = result.uncounted()  # a node failure: what its ranks reported is not counted
        return replace(result, logs=logs)

    # -- helpers -------------------------------------------------------------------------------

    def final_state(self, handle: JobHandle) -> JobState:
        """The job's state once it left the queue: scontrol (kept a while), then sacct."""
        slurm_id = _slurm_id(handle)
        shown = self._slurm(["scontrol", "-o", "show", "job", slurm_id])
        _refuse_silence(shown, "scontrol")
        if shown.returncode == 0 and "JobState=" in shown.stdout:
            fields = dict(re.findall(r"(\w+)=(\S*)", shown.stdout))
            state = fields.get("JobState", "")
            if state in _QUEUED:
                return JobState("queued", scheduler_state=state)
            phase: Phase = "running" if state in _RUNNING else "finished"
            return JobState(
                phase,
                node=fields.get("NodeList"),
                started_at=_iso(fields.get("StartTime", "")),
                finished_at=_iso(fields.get("EndTime", "")),
                scheduler_state=state,
                detail=f"exit {fields.get('ExitCode', '?')}",
            )
        for args in (["sacct", "-X"], ["sacct", "-c"]):
            accounted = self._slurm(
                [*args, "-n", "-P", "-j", slurm_id, "-o", "JobID,State,ExitCode,NodeList,Start,End"]
            )
            for line in accounted.stdout.splitlines():
                parts = line.split("|")
                if accounted.returncode == 0 and len(parts) >= 6 and parts[0] == slurm_id:
                    state = parts[1].split()[0]  # "CANCELLED by 0" -> CANCELLED
                    return JobState(
                        "finished",
                        node=parts[3],
                        started_at=_iso(parts[4]),
                        finished_at=_iso(parts[5]),
                        scheduler_state=state,
                        detail=f"exit {parts[2]}",
                    )
        return JobState(
            "finished", scheduler_state="UNKNOWN", detail=f"Slurm no longer knows job {slurm_id}"
        )

    def _runner_result(self, spec: JobSpec, handle: JobHandle, state: JobState) -> JobResult:
        out_dir = handle.out_path
        if (out_dir / "result.json").exists() or any(
            read_reports(out_dir, spec.shape.nodes).values()
        ):
            return result_from_out_dir(spec, out_dir)
        status, why = _SCHEDULER_DECIDES.get(state.scheduler_state, ("infra", "no runner reported"))
        if status == "timeout":
            # No runner reported, so no test ran: the time went to the node (issue 13).
            status, why = "infra", f"{why} before any test ran"
        return JobResult(
            job_id=spec.job_id,
            status=status,
            message=f"{why}: the job ended {state.scheduler_state} ({state.detail}) before any "
            f"runner reported; see {out_dir}/slurm-{_slurm_id(handle)}.out",
            test_set=spec.test_set,
            shape=str(spec.shape),
        )

    def _slurm(self, argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """The one seam through which the executor talks to Slurm."""
        try:
            return subprocess.run(
                argv, cwd=cwd, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S
            )
        except FileNotFoundError:
            raise ExecutorError(
                f"{argv[0]} is not installed here: this host cannot reach Slurm"
            ) from None
        except subprocess.TimeoutExpired:
            raise ExecutorError(
                f"{argv[0]} did not answer within {COMMAND_TIMEOUT_S:.0f}s"
            ) from None


def jobs_named(scontrol_output: str, name: str, out_dir: Path) -> list[str]:
    """Ids, oldest first, of the jobs in ``scontrol -o show job`` output (one job a line)
    named ``name`` whose working directory is ``out_dir``."""
    found = []
    for line in scontrol_output.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        named = fields.get("JobName") == name and fields.get("JobId", "").isdigit()
        if named and _same_dir(fields.get("WorkDir", ""), out_dir):
            found.append(fields["JobId"])
    return sorted(found, key=int)


def _same_dir(text: str, out_dir: Path) -> bool:
    return bool(text) and Path(text).resolve() == out_dir.resolve()


def _refuse_silence(done: subprocess.CompletedProcess[str], command: str) -> None:
    """A controller that does not answer must not make a running job look finished."""
    if done.returncode != 0 and "Invalid job id" not in done.stderr:
        raise ExecutorError(
            f"{command} failed (exit {done.returncode}): {done.stderr.strip()}; is slurmctld up?"
        )


def _slurm_id(handle: JobHandle) -> str:
    slurm_id = str(handle.data.get("slurm_job_id", ""))
    if not slurm_id.isdigit():
        raise ContractError("handle.data.slurm_job_id", f"{slurm_id!r} is not a Slurm job id")
    return slurm_id


def _iso(text: str) -> str | None:
    """Slurm's local 'YYYY-MM-DDTHH:MM:SS' as ISO 8601 UTC; None for Unknown/N/A/None."""
    try:
        return datetime.fromisoformat(text).astimezone(UTC).isoformat(timespec="seconds")
    except ValueError:
        return None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
