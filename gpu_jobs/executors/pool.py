"""The local executor's GPU pool: which devices and ports the running jobs hold.

Kept in a JSON file under a file lock so several stackbot workers on one host share the pool,
and keyed on the runner processes (pid and start time): an entry whose processes are all gone
is free again, so a crashed worker never leaks GPUs.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_jobs.executors.base import PoolBusy
from gpu_jobs.filelock import file_lock


@dataclass(frozen=True)
class Allocation:
    job_id: str
    slots: tuple[int, ...]  # GPU indices, or CPU rank slots on a host without GPUs
    ports: tuple[int, ...]
    pids: tuple[tuple[int, int], ...] = ()  # (pid, start time) of the runner processes

    def alive(self) -> bool:
        return any(process_alive(pid, start) for pid, start in self.pids)


def detect_gpus() -> list[int]:
    """GPU indices nvidia-smi reports; none when it is absent or fails."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    return [int(line) for line in done.stdout.split() if line.strip().isdigit()]


class GpuPool:
    def __init__(self, state_dir: Path, slots: list[int], max_jobs: int, port_base: int) -> None:
        self.state_file = state_dir / "allocations.json"
        self.slots = slots
        self.max_jobs = max_jobs
        self.port_base = port_base

    @contextmanager
    def _locked(self) -> Iterator[dict[str, Allocation]]:
        with file_lock(self.state_file.parent / "allocations.lock"):
            held = {job: a for job, a in self._read().items() if a.alive()}
            yield held
            self._write(held)

    def allocate(
        self,
        job_id: str,
        n_slots: int,
        n_ports: int,
        *,
        skip: frozenset[int] = frozenset(),
        only: frozenset[int] | None = None,
    ) -> Allocation:
        """``n_slots`` free slots, leaving out ``skip`` (excluded devices) and, when ``only`` is
        given, taking them among those alone; PoolBusy while they are not free."""
        with self._locked() as held:
            busy = {slot for a in held.values() for slot in a.slots}
            free = [
                slot
                for slot in self.slots
                if slot not in busy and slot not in skip and (only is None or slot in only)
            ]
            if len(held) >= self.max_jobs:
                raise PoolBusy(f"{len(held)} local job(s) running, the limit is {self.max_jobs}")
            if len(free) < n_slots:
                out = f", {len(skip)} excluded" if skip else ""
                raise PoolBusy(
                    f"{n_slots} devices needed, {len(free)} of {len(self.slots)} free{out}"
                )
            used_ports = {port for a in held.values() for port in a.ports}
            # Held by this process until the runners' pids are recorded: if it dies before
            # that, the entry frees itself.
            me = os.getpid()
            allocation = Allocation(
                job_id,
                tuple(free[:n_slots]),
                self._ports(n_ports, used_ports),
                ((me, process_start_time(me) or 0),),
            )
            held[job_id] = allocation
            return allocation

    def record_pids(self, job_id: str, pids: list[tuple[int, int]]) -> None:
        with self._locked() as held:
            if job_id in held:
                a = held[job_id]
                held[job_id] = Allocation(a.job_id, a.slots, a.ports, tuple(pids))

    def hold(
        self,
        job_id: str,
        slots: tuple[int, ...],
        ports: tuple[int, ...],
        pids: list[tuple[int, int]],
    ) -> None:
        """Hold what adopted runners of ``job_id`` use (their submitter died before recording
        them), whatever the limits: they run already."""
        with self._locked() as held:
            held[job_id] = Allocation(job_id, slots, ports, tuple(pids))

    def release(self, job_id: str) -> None:
        with self._locked() as held:
            held.pop(job_id, None)

    def _ports(self, count: int, used: set[int]) -> tuple[int, ...]:
        """``count`` consecutive free ports from the base up (one per torchrun phase)."""
        if count == 0:
            return ()
        port = self.port_base
        while port + count < 65535:
            block = range(port, port + count)
            if not used.intersection(block) and all(_port_free(p) for p in block):
                return tuple(block)
            port += count
        raise PoolBusy(f"no {count} consecutive free TCP ports above {self.port_base}")

    def _read(self) -> dict[str, Allocation]:
        try:
            raw: dict[str, Any] = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}
        return {
            job: Allocation(
                job,
                tuple(entry["slots"]),
                tuple(entry["ports"]),
                tuple((int(p), int(s)) for p, s in entry["pids"]),
            )
            for job, entry in raw.items()
        }

    def _write(self, held: dict[str, Allocation]) -> None:
        body = {
            job: {"slots": list(a.slots), "ports": list(a.ports), "pids": [list(p) for p in a.pids]}
            for job, a in held.items()
        }
        partial = self.state_file.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(body, indent=1))
        os.replace(partial, self.state_file)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("", port))
        except OSError:
            return False
    return True


def process_start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def process_alive(pid: int, start_time: int) -> bool:
    """Alive and the same process (not a later one that reused the pid), not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[0] != "Z" and int(fields[19]) == start_time
