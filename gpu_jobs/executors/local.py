"""Jobs as subprocesses of this host.

GPUs come from a pool (configured, else what nvidia-smi lists) through CUDA_VISIBLE_DEVICES; a
host without GPUs runs the same ranks on CPU with gloo. A ``2x4`` job runs as two runner
processes (two torchrun node groups) meeting at a static master on loopback. The runners are
detached from the submitting process, so a restarted worker polls them by pid and start time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from gpu_jobs.checkout import default_cache_dir
from gpu_jobs.executors.base import (
    ExecutorKind,
    JobHandle,
    JobState,
    prepare_out_dir,
    read_spec,
)
from gpu_jobs.executors.checks import check_sources
from gpu_jobs.executors.pool import GpuPool, detect_gpus, process_alive, process_start_time
from gpu_jobs.launch import launch_env, tree_members
from gpu_jobs.nodes import read_reports, write_atomic
from gpu_jobs.spec import ContractError, JobResult, JobSpec
from gpu_jobs.verdict import result_from_out_dir

CANCEL_GRACE_S = 20.0
_CANCELLED = "cancelled-by-executor"


@dataclass(frozen=True)
class LocalExecutorConfig:
    """Mirrors stackbot's ``LocalExecutorSettings`` (gpus, max_parallel_jobs, master_port_base)."""

    gpus: tuple[int, ...] = ()  # empty: what nvidia-smi lists; none found: CPU ranks with gloo
    max_parallel_jobs: int = 1
    master_port_base: int = 29600
    cpu_slots: int = 8  # ranks a host without GPUs runs at once
    python: str = sys.executable
    state_dir: Path | None = None  # the pool's state; default: under the gpu_jobs cache
    cache_dir: Path | None = None  # the runner's repository cache


class LocalExecutor:
    kind: ExecutorKind = "local"

    def __init__(self, config: LocalExecutorConfig | None = None) -> None:
        self.config = config or LocalExecutorConfig()
        gpus = list(self.config.gpus) or detect_gpus()
        self.cpu_only = not gpus
        slots = gpus or list(range(self.config.cpu_slots))
        state_dir = self.config.state_dir or default_cache_dir() / "local-executor"
        self.pool = GpuPool(
            state_dir, slots, self.config.max_parallel_jobs, self.config.master_port_base
        )
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    # -- the interface -------------------------------------------------------------------------

    def submit(self, spec: JobSpec, out_dir: Path) -> JobHandle:
        self._check_fits(spec)
        check_sources(spec)
        out_dir = prepare_out_dir(out_dir)
        if self.cpu_only:
            spec = replace(spec, launcher=replace(spec.launcher, device="cpu"))
        write_atomic(out_dir / "spec.json", spec.to_json())
        nodes, per_node = spec.shape.nodes, spec.shape.gpus_per_node
        allocation = self.pool.allocate(spec.job_id, spec.shape.world_size, 2 if nodes > 1 else 0)
        run_id = uuid.uuid4().hex[:12]
        pids = []
        try:
            for node in range(nodes):
                slots = allocation.slots[node * per_node : (node + 1) * per_node]
                process = self._start_runner(spec, out_dir, node, slots, allocation.ports, run_id)
                pids.append((process.pid, process_start_time(process.pid) or 0))
        except OSError as exc:
            self.pool.release(spec.job_id)
            raise ContractError("python", f"cannot start the runner: {exc}") from None
        self.pool.record_pids(spec.job_id, pids)
        data = {"pids": [list(p) for p in pids], "slots": list(allocation.slots), "run_id": run_id}
        data["submitted_at"] = _now()
        return JobHandle("local", spec.job_id, str(out_dir), data)

    def poll(self, handle: JobHandle) -> JobState:
        alive = [pid for pid, start in self._pids(handle) if self._alive(pid, start)]
        started = handle.data.get("submitted_at")
        if alive:
            return JobState(
                "running", node="localhost", started_at=started, scheduler_state="RUNNING"
            )
        finished = _mtime_iso(handle.out_path / "result.json")
        return JobState(
            "finished",
            node="localhost",
            started_at=started,
            finished_at=finished,
            scheduler_state="EXITED",
        )

    def cancel(self, handle: JobHandle) -> None:
        """SIGTERM the runners (they kill their torchrun trees and report ``cancelled``)."""
        (handle.out_path / _CANCELLED).touch()
        runners = [(pid, start) for pid, start in self._pids(handle) if self._alive(pid, start)]
        for pid, _ in runners:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + CANCEL_GRACE_S
        while time.monotonic() < deadline and any(self._alive(p, s) for p, s in runners):
            time.sleep(0.1)
        for pid, start in runners:
            if self._alive(pid, start):
                for member in tree_members(pid, None):
                    _signal(member, signal.SIGKILL)

    def collect(self, handle: JobHandle) -> JobResult:
        spec = read_spec(handle.out_path)
        out_dir = handle.out_path
        if not (out_dir / "result.json").exists():
            if (out_dir / _CANCELLED).exists():
                return JobResult(
                    spec.job_id,
                    "cancelled",
                    "cancelled before the runner reported",
                    test_set=spec.test_set,
                    shape=str(spec.shape),
                )
            if not any(read_reports(out_dir, spec.shape.nodes).values()):
                return JobResult(
                    spec.job_id,
                    "infra",
                    "the runner exited without a report: " + _tail(out_dir / "node0.stdout"),
                    test_set=spec.test_set,
                    shape=str(spec.shape),
                )
        return result_from_out_dir(spec, out_dir)

    # -- helpers -------------------------------------------------------------------------------

    def _check_fits(self, spec: JobSpec) -> None:
        pool = len(self.pool.slots)
        if spec.shape.world_size > pool:
            what = f"{pool} CPU rank slots" if self.cpu_only else f"{pool} GPUs {self.pool.slots}"
            raise ContractError(
                "shape",
                f"{spec.shape} needs {spec.shape.world_size} ranks; this host's pool has {what}",
            )

    def _start_runner(
        self,
        spec: JobSpec,
        out_dir: Path,
        node: int,
        slots: tuple[int, ...],
        ports: tuple[int, ...],
        run_id: str,
    ) -> subprocess.Popen[bytes]:
        argv = [self.config.python, "-m", "gpu_jobs", "run", str(out_dir / "spec.json")]
        argv += ["--out", str(out_dir), "--run-id", run_id]
        if self.config.cache_dir is not None:
            argv += ["--cache-dir", str(self.config.cache_dir)]
        if spec.shape.nodes > 1:
            argv += [f"--nnodes={spec.shape.nodes}", f"--node-rank={node}"]
            argv += ["--master-addr=127.0.0.1", f"--master-port={ports[0]}"]
        extra = {} if self.cpu_only else {"CUDA_VISIBLE_DEVICES": ",".join(map(str, slots))}
        env = launch_env(_scrubbed_environ(), extra, cpu=self.cpu_only)
        with (out_dir / f"node{node}.stdout").open("ab") as out:
            process = subprocess.Popen(
                argv,
                cwd=out_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._children[process.pid] = process
        return process

    def _pids(self, handle: JobHandle) -> list[tuple[int, int]]:
        return [(int(pid), int(start)) for pid, start in handle.data.get("pids", [])]

    def _alive(self, pid: int, start: int) -> bool:
        child = self._children.get(pid)
        if child is not None and child.poll() is not None:
            self._children.pop(pid)  # reaped: no zombie left behind
        return process_alive(pid, start)


def _scrubbed_environ() -> dict[str, str]:
    # A Slurm job's variables would make the runner think it is a Slurm node.
    return {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return f"{path} is missing"


def _mtime_iso(path: Path) -> str | None:
    try:
        stamp = path.stat().st_mtime
    except OSError:
        return None
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
