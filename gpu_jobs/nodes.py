"""What each node of a job reports, and the steps on which all nodes wait for each other.

Nodes meet through the job's output directory, which they share (Slurm's shared directory, or
one local directory for the local executor's node groups). Each node writes
``nodes/node-R.json`` when it is done; node 0 (or a collector) merges them into
``result.json``. Before each torchrun phase the nodes wait until every node said it is ready,
so one node's failed setup or node check stops all nodes instead of leaving the others hanging
in torchrun's rendezvous.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_jobs.phase import PhaseOutcome

POLL_S = 0.2


@dataclass(frozen=True)
class NodeReport:
    node_rank: int
    node_name: str
    ranks: tuple[int, ...]
    commit: str | None = None
    tree_root: str = ""
    missing_targets: tuple[str, ...] = ()
    # Set when this node stopped the job before its tests: the status and why.
    abort_status: str | None = None
    abort_message: str = ""
    abort_error_of: str = ""  # "tree" or "node" when the runner knew whose fault the abort was
    abort_cause: str = ""
    node_check: PhaseOutcome | None = None
    node_check_message: str = ""
    tests: PhaseOutcome | None = None
    setup_s: float = 0.0
    interrupted: bool = False
    logs: dict[str, str] = field(default_factory=dict)
    # What the node runs tests with (gpu_jobs.environment): part of the result's key.
    environment: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = vars(self).copy()
        for phase in ("node_check", "tests"):
            outcome = getattr(self, phase)
            data[phase] = outcome.to_dict() if outcome is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeReport:
        def phase(name: str) -> PhaseOutcome | None:
            return PhaseOutcome.from_dict(data[name]) if data.get(name) else None

        return cls(
            node_rank=int(data["node_rank"]),
            node_name=str(data["node_name"]),
            ranks=tuple(data["ranks"]),
            commit=data.get("commit"),
            tree_root=str(data.get("tree_root", "")),
            missing_targets=tuple(data.get("missing_targets", ())),
            abort_status=data.get("abort_status"),
            abort_message=str(data.get("abort_message", "")),
            abort_error_of=str(data.get("abort_error_of", "")),
            abort_cause=str(data.get("abort_cause", "")),
            node_check=phase("node_check"),
            node_check_message=str(data.get("node_check_message", "")),
            tests=phase("tests"),
            setup_s=float(data.get("setup_s", 0.0)),
            interrupted=bool(data.get("interrupted", False)),
            logs=dict(data.get("logs", {})),
            environment={str(k): str(v) for k, v in dict(data.get("environment", {})).items()},
        )


def report_path(out_dir: Path, node_rank: int) -> Path:
    return out_dir / "nodes" / f"node-{node_rank}.json"


def write_report(out_dir: Path, report: NodeReport) -> None:
    write_atomic(report_path(out_dir, report.node_rank), json.dumps(report.to_dict(), indent=2))


def read_reports(out_dir: Path, nnodes: int) -> dict[int, NodeReport | None]:
    reports: dict[int, NodeReport | None] = {}
    for node in range(nnodes):
        try:
            data = json.loads(report_path(out_dir, node).read_text(encoding="utf-8"))
            reports[node] = NodeReport.from_dict(data)
        except (OSError, ValueError, KeyError, TypeError):
            reports[node] = None
    return reports


def wait_for_reports(
    out_dir: Path, nnodes: int, until: float, should_stop: Callable[[], bool]
) -> dict[int, NodeReport | None]:
    while True:
        reports = read_reports(out_dir, nnodes)
        if all(reports.values()) or time.monotonic() >= until or should_stop():
            return reports
        time.sleep(POLL_S)


@dataclass(frozen=True)
class StepVote:
    ok: bool
    message: str = ""


def announce(out_dir: Path, step: str, node_rank: int, run_id: str, vote: StepVote) -> None:
    body = {"run_id": run_id, "ok": vote.ok, "message": vote.message}
    write_atomic(out_dir / "nodes" / f"node-{node_rank}.{step}", json.dumps(body))


def gather(
    out_dir: Path,
    step: str,
    nnodes: int,
    run_id: str,
    until: float,
    should_stop: Callable[[], bool],
) -> dict[int, StepVote]:
    """Every node's vote on ``step``; nodes that did not vote before ``until`` are absent."""
    votes: dict[int, StepVote] = {}
    while True:
        for node in range(nnodes):
            if node in votes:
                continue
            try:
                body = json.loads((out_dir / "nodes" / f"node-{node}.{step}").read_text())
            except (OSError, ValueError):
                continue
            if body.get("run_id") == run_id:  # not a leftover of an earlier run
                votes[node] = StepVote(bool(body["ok"]), str(body.get("message", "")))
        if len(votes) == nnodes or time.monotonic() >= until or should_stop():
            return votes
        time.sleep(POLL_S)


def clear_node_files(
    out_dir: Path, node_rank: int, ranks: Iterable[int], phases: Iterable[str]
) -> None:
    """Remove what an earlier run of this node left, so it cannot be mistaken for this run's."""
    doomed = list((out_dir / "nodes").glob(f"node-{node_rank}.*"))
    for phase in phases:
        for rank in ranks:
            doomed.append(out_dir / phase / "junit" / f"rank-{rank}.xml")
            doomed.extend((out_dir / phase / "progress").glob(f"rank-{rank}.*"))
    if node_rank == 0:
        doomed.append(out_dir / "result.json")
    for path in doomed:
        path.unlink(missing_ok=True)


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
