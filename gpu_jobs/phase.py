"""One torchrun phase (node check or tests) on this node: launch, watch, stop.

The ranks' pytest plugin leaves progress files (see :mod:`gpu_jobs.pytest_rank_plugin`); this
module turns them into progress lines and decides when to stop early: the job's deadline, a
cancel, or a hung rank (one still running ``hang_grace_s`` after another rank finished).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_jobs.junit import describe_ranks
from gpu_jobs.launch import ProcessTree, rank_failures, root_cause_rank

PROGRESS_EVERY_S = 5.0
POLL_S = 0.2


@dataclass(frozen=True)
class PhaseOutcome:
    """What one node saw of one phase."""

    name: str
    ranks: tuple[int, ...]  # this node's global ranks
    exit_code: int | None  # torchrun's; None when gpu_jobs stopped it
    started: tuple[int, ...] = ()
    finished: dict[int, int] = field(default_factory=dict)  # rank -> pytest exit status
    rank_exit_codes: dict[int, int] = field(default_factory=dict)  # from torchrun's summary
    root_cause: int | None = None  # the rank torchrun's summary names as the first failure
    timed_out: bool = False
    interrupted: bool = False
    hung_ranks: tuple[int, ...] = ()
    duration_s: float = 0.0
    log: str = ""  # relative to the job's output directory

    def to_dict(self) -> dict[str, Any]:
        data = vars(self).copy()
        data["finished"] = {str(k): v for k, v in self.finished.items()}
        data["rank_exit_codes"] = {str(k): v for k, v in self.rank_exit_codes.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PhaseOutcome:
        return cls(
            name=data["name"],
            ranks=tuple(data["ranks"]),
            exit_code=data["exit_code"],
            started=tuple(data["started"]),
            finished={int(k): v for k, v in data["finished"].items()},
            rank_exit_codes={int(k): v for k, v in data["rank_exit_codes"].items()},
            root_cause=data.get("root_cause"),  # absent in a report of an older runner
            timed_out=data["timed_out"],
            interrupted=data["interrupted"],
            hung_ranks=tuple(data["hung_ranks"]),
            duration_s=data["duration_s"],
            log=data["log"],
        )

    @property
    def launch_failed(self) -> bool:
        """torchrun failed before any rank's pytest started: rendezvous, import, no GPU."""
        return not self.started and self.exit_code not in (0, None)


class PhaseWatch:
    """Reads the progress files the ranks of one phase leave."""

    def __init__(self, phase_dir: Path, ranks: Sequence[int]) -> None:
        self.progress_dir = phase_dir / "progress"
        self.ranks = tuple(ranks)

    def started(self) -> dict[int, int]:
        """rank -> pid of its pytest."""
        found = {}
        for rank in self.ranks:
            data = _read_json(self.progress_dir / f"rank-{rank}.started")
            if data is not None:
                found[rank] = int(data.get("pid", 0))
        return found

    def finished(self) -> dict[int, tuple[int, float]]:
        """rank -> (pytest exit status, when)."""
        found = {}
        for rank in self.ranks:
            data = _read_json(self.progress_dir / f"rank-{rank}.done")
            if data is not None:
                found[rank] = (int(data["exitstatus"]), float(data["time"]))
        return found

    def results(self) -> int:
        total = 0
        for rank in self.ranks:
            with contextlib.suppress(OSError):
                total += (self.progress_dir / f"rank-{rank}.jsonl").read_bytes().count(b"\n")
        return total


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # absent, or being written
    return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class PhaseLaunch:
    name: str
    phase_dir: Path
    out_dir: Path
    argv: Sequence[str]
    cwd: Path
    env: dict[str, str]
    ranks: tuple[int, ...]
    node_rank: int
    deadline: float  # time.monotonic() value
    hang_grace_s: float


def run_phase(
    launch: PhaseLaunch, should_stop: Callable[[], bool], say: Callable[[str], None]
) -> PhaseOutcome:
    log = launch.phase_dir / f"torchrun-node{launch.node_rank}.log"
    watch = PhaseWatch(launch.phase_dir, launch.ranks)
    start = time.monotonic()
    tree = ProcessTree(launch.argv, cwd=launch.cwd, env=launch.env, log=log)
    say(
        f"{launch.name}: torchrun started (pid {tree.pid}) for ranks {describe_ranks(launch.ranks)}"
    )
    timed_out = interrupted = False
    hung: tuple[int, ...] = ()
    last_counts, last_said = "", 0.0
    while tree.poll() is None:
        now = time.monotonic()
        counts = _progress_counts(launch, watch)
        if counts != last_counts or now - last_said >= PROGRESS_EVERY_S:
            say(f"{launch.name}: {counts}, {now - start:.0f}s elapsed")
            last_counts, last_said = counts, now
        if now >= launch.deadline:
            timed_out = True
        elif should_stop():
            interrupted = True
        else:
            hung = _hung_ranks(watch, launch.hang_grace_s)
        if timed_out or interrupted or hung:
            break
        time.sleep(POLL_S)
    stopped_by_us = tree.poll() is None
    if stopped_by_us:
        unfinished = tuple(r for r in launch.ranks if r not in watch.finished())
        reason = "timed out" if timed_out else "cancelled" if interrupted else "hung"
        say(f"{launch.name}: {reason}; killing torchrun and every process it started")
        tree.kill()
        if timed_out:
            hung = unfinished
    finished = {rank: status for rank, (status, _) in watch.finished().items()}
    summary = _tail(log)
    outcome = PhaseOutcome(
        name=launch.name,
        ranks=launch.ranks,
        exit_code=None if stopped_by_us else tree.poll(),
        started=tuple(sorted(watch.started())),
        finished=finished,
        rank_exit_codes=rank_failures(summary),
        root_cause=root_cause_rank(summary),
        timed_out=timed_out,
        interrupted=interrupted,
        hung_ranks=hung,
        duration_s=time.monotonic() - start,
        log=str(log.relative_to(launch.out_dir)),
    )
    say(
        f"{launch.name}: torchrun ended (exit {outcome.exit_code}) after "
        f"{outcome.duration_s:.1f}s; {len(finished)}/{len(launch.ranks)} ranks finished"
    )
    return outcome


def _progress_counts(launch: PhaseLaunch, watch: PhaseWatch) -> str:
    n = len(launch.ranks)
    return (
        f"{len(watch.started())}/{n} ranks started, {watch.results()} test results, "
        f"{len(watch.finished())}/{n} ranks finished"
    )


def _hung_ranks(watch: PhaseWatch, grace_s: float) -> tuple[int, ...]:
    finished = watch.finished()
    if not finished:
        return ()
    first_done = min(when for _, when in finished.values())
    if time.time() - first_done < grace_s:
        return ()
    unfinished = tuple(r for r in watch.ranks if r not in finished)
    if unfinished:
        return unfinished
    # Every rank finished its tests yet torchrun still runs: a rank is stuck on its way out.
    return tuple(rank for rank, pid in watch.started().items() if _pid_alive(pid))


def _pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _tail(path: Path, limit: int = 200_000) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - limit))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
