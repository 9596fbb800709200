"""Jobs as subprocesses of this host.

GPUs come from a pool (configured, else what nvidia-smi lists) through CUDA_VISIBLE_DEVICES; a
host without GPUs runs the same ranks on CPU with gloo. Each device is a node to stackbot's
broken-node rule, named ``gpuN`` (``cpuN`` for a CPU rank slot): a spec's ``exclude_nodes``
leaves those devices out, its ``only_nodes`` runs on exactly them (a node check of one device),
and the handle's ``nodes`` names the devices a job ran on. A ``2x4`` job runs as two runner
processes (two torchrun node groups) meeting at a static master on loopback. The runners are
detached from the submitting process, so a restarted worker polls them by pid and start time.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpu_jobs.checkout import default_cache_dir
from gpu_jobs.executors.base import (
    SUBMIT_LOCK,
    ExecutorKind,
    JobHandle,
    JobState,
    prepare_out_dir,
    read_spec,
    submit_lock,
)
from gpu_jobs.executors.checks import check_sources
from gpu_jobs.executors.pool import GpuPool, detect_gpus, process_alive, process_start_time
from gpu_jobs.launch import launch_env, tree_members
from gpu_jobs.nodes import read_reports, write_atomic
from gpu_jobs.spec import ContractError, JobResult, JobSpec
from gpu_jobs.verdict import result_from_out_dir

CANCEL_GRACE_S = 20.0
_CANCELLED = "cancelled-by-executor"
_LAUNCH = "launch.json"  # written before any runner starts: the run id they carry
_STARTED = "started.json"  # written once every runner started: the handle's data
# What a launch that started no runner may have left behind (node*.stdout opened, empty).
_BEFORE_LAUNCH = {"spec.json", _LAUNCH, SUBMIT_LOCK}


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
        """Start the job in ``out_dir``, or adopt the one already started there.

        Idempotent for one ``out_dir``: ``launch.json`` (the run id the runners carry) is
        written before any runner starts and ``started.json`` (the handle's data) once they
        all have, so a caller that died after starting the job and before recording the handle
        gets the same run back by submitting again, never a second copy (see :meth:`adopt`).
        """
        self._check_fits(spec)
        check_sources(spec)
        out_dir = out_dir.resolve()
        with submit_lock(out_dir):
            return self._submit_once(spec, out_dir)

    def _submit_once(self, spec: JobSpec, out_dir: Path) -> JobHandle:
        adopted = self.adopt(spec, out_dir)
        if adopted is not None:
            return adopted
        if self.cpu_only:
            spec = replace(spec, launcher=replace(spec.launcher, device="cpu"))
        nodes, per_node = spec.shape.nodes, spec.shape.gpus_per_node
        allocation = self.pool.allocate(
            spec.job_id,
            spec.shape.world_size,
            2 if nodes > 1 else 0,
            skip=self._slots_named(spec.exclude_nodes),
            only=self._slots_named(spec.only_nodes) if spec.only_nodes else None,
        )
        run_id = uuid.uuid4().hex[:12]
        try:
            out_dir = _prepare_launch_dir(out_dir)
            write_atomic(out_dir / "spec.json", spec.to_json())
            launch = {
                "run_id": run_id,
                "slots": list(allocation.slots),
                "ports": list(allocation.ports),
                "submitted_at": _now(),
            }
            write_atomic(out_dir / _LAUNCH, json.dumps(launch, sort_keys=True))
        except BaseException:
            self.pool.release(spec.job_id)
            raise
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
        data["submitted_at"] = launch["submitted_at"]
        data["nodes"] = self.slot_names(allocation.slots)
        write_atomic(out_dir / _STARTED, json.dumps(data, sort_keys=True))
        return JobHandle("local", spec.job_id, str(out_dir), data)

    def adopt(self, spec: JobSpec, out_dir: Path) -> JobHandle | None:
        """The handle of the run already started in ``out_dir`` (running or finished), or None
        when nothing was started there.

        ``started.json`` answers at once. ``launch.json`` alone means the submitter died while
        starting the runners: those alive (found by the run id on their command line) are
        adopted and held in the pool again; a run that left output but no live runner is
        adopted as it is (poll says finished, collect reads what it left). Only a launch that
        left nothing is started again.
        """
        out_dir = out_dir.resolve()
        started = _read_json(out_dir / _STARTED)
        if started is not None:
            return JobHandle("local", spec.job_id, str(out_dir), started)
        launch = _read_json(out_dir / _LAUNCH)
        if launch is None:
            return None
        run_id = str(launch.get("run_id", ""))
        pids = _runners_of(run_id) if run_id else []
        if not pids and not _left_output(out_dir, spec.shape.nodes):
            return None
        if pids:
            self.pool.hold(
                spec.job_id,
                tuple(int(s) for s in launch.get("slots", [])),
                tuple(int(p) for p in launch.get("ports", [])),
                pids,
            )
        data = {
            "pids": [list(p) for p in pids],
            "slots": list(launch.get("slots", [])),
            "run_id": run_id,
            "submitted_at": launch.get("submitted_at"),
            "adopted": True,
            "nodes": self.slot_names(int(s) for s in launch.get("slots", [])),
        }
        write_atomic(out_dir / _STARTED, json.dumps(data, sort_keys=True))
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

    def slot_names(self, slots: Iterable[int]) -> list[str]:
        """The node names of pool slots: ``gpuN`` (``cpuN`` on a host without GPUs)."""
        prefix = "cpu" if self.cpu_only else "gpu"
        return [f"{prefix}{slot}" for slot in slots]

    def _slots_named(self, names: Iterable[str]) -> frozenset[int]:
        """The pool slots among ``names`` (names of other nodes: not this host's devices)."""
        by_name = dict(zip(self.slot_names(self.pool.slots), self.pool.slots, strict=True))
        return frozenset(by_name[n] for n in names if n in by_name)

    def _check_fits(self, spec: JobSpec) -> None:
        pool = len(self.pool.slots)
        if spec.shape.world_size > pool:
            what = f"{pool} CPU rank slots" if self.cpu_only else f"{pool} GPUs {self.pool.slots}"
            raise ContractError(
                "shape",
                f"{spec.shape} needs {spec.shape.world_size} ranks; this host's pool has {what}",
            )
        if spec.only_nodes:
            named = self._slots_named(spec.only_nodes)
            if len(named) < spec.shape.world_size:
                names = ", ".join(self.slot_names(self.pool.slots))
                raise ContractError(
                    "only_nodes",
                    f"{', '.join(spec.only_nodes)} name {len(named)} of this host's devices "
                    f"({names}); {spec.shape} needs {spec.shape.world_size}",
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


def _prepare_launch_dir(out_dir: Path) -> Path:
    """A fresh directory, or one where an earlier launch of this job started nothing."""
    if out_dir.is_dir():
        names = {p.name for p in out_dir.iterdir()}
        leftovers = {n for n in names if n not in _BEFORE_LAUNCH and not _empty_stdout(out_dir, n)}
        if names and not leftovers:
            return out_dir
    return prepare_out_dir(out_dir)


def _empty_stdout(out_dir: Path, name: str) -> bool:
    if not (name.startswith("node") and name.endswith(".stdout")):
        return False
    try:
        return (out_dir / name).stat().st_size == 0
    except OSError:
        return False


def _left_output(out_dir: Path, nodes: int) -> bool:
    """Whether a runner of this out_dir ever ran: a result, a node report or any output."""
    if (out_dir / "result.json").exists() or any(read_reports(out_dir, nodes).values()):
        return True
    return any(not _empty_stdout(out_dir, p.name) for p in out_dir.glob("node*.stdout"))


def _runners_of(run_id: str) -> list[tuple[int, int]]:
    """Live ``gpu_jobs run`` processes carrying ``--run-id run_id`` (pid, start time)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"gpu_jobs" not in argv or b"--run-id" not in argv:
            continue
        at = argv.index(b"--run-id")
        if at + 1 < len(argv) and argv[at + 1] == run_id.encode():
            pid = int(proc.name)
            start = process_start_time(pid)
            if start is not None and process_alive(pid, start):
                found.append((pid, start))
    return sorted(found)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


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
