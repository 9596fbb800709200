"""Launching the reference suites the way the runner does, and reading each rank's JUnit XML."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import gpu_jobs

SUITES = Path(gpu_jobs.__file__).resolve().parent / "suites"
LAUNCH_TIMEOUT_S = 300


@dataclass(frozen=True)
class Outcome:
    outcome: str  # passed | failed | error | skipped
    message: str


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def suite_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(
        {
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
            "GPU_JOBS_BACKEND": "gloo",
            "GPU_JOBS_PG_TIMEOUT_S": "120",
        }
    )
    env.update(extra or {})
    return env


def pytest_args(suites: list[str], junit_dir: Path) -> list[str]:
    targets = [str(SUITES / name) for name in suites]
    # $RANK is expanded by pytest itself, so each rank writes its own file.
    return [
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        *targets,
        f"--junitxml={junit_dir}/rank-$RANK.xml",
    ]


def torchrun_nodes(
    suites: list[str],
    junit_dir: Path,
    *,
    nodes: int,
    per_node: int,
    env: dict[str, str] | None = None,
) -> list[subprocess.CompletedProcess[str]]:
    """One torchrun per node with a static master on loopback, all started together."""
    port = free_port()
    launches = []
    for node_rank in range(nodes):
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nnodes={nodes}",
            f"--node-rank={node_rank}",
            f"--nproc-per-node={per_node}",
            "--master-addr=127.0.0.1",
            f"--master-port={port}",
            *pytest_args(suites, junit_dir),
        ]
        launches.append(_start(command, junit_dir.parent, suite_env(env)))
    return [_finish(command, process) for command, process in launches]


def plain_pytest(suites: list[str], junit_dir: Path) -> subprocess.CompletedProcess[str]:
    env = suite_env()
    env["RANK"] = "0"  # only names the JUnit file; no torchrun, so a world of one
    command = [sys.executable, *pytest_args(suites, junit_dir)]
    return _finish(*_start(command, junit_dir.parent, env))


def _start(
    command: list[str], cwd: Path, env: dict[str, str]
) -> tuple[list[str], subprocess.Popen[str]]:
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    return command, process


def _finish(command: list[str], process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        output, _ = process.communicate(timeout=LAUNCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        raise AssertionError(
            f"{' '.join(command)} hung for {LAUNCH_TIMEOUT_S}s:\n{output[-4000:]}"
        ) from None
    return subprocess.CompletedProcess(command, process.returncode, output, "")


def read_junit(path: Path) -> dict[str, Outcome]:
    """Test id → outcome of one rank's JUnit file."""
    outcomes = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            element = case.find(tag)
            if element is not None:
                outcome = "failed" if tag == "failure" else tag
                message = element.get("message") or (element.text or "")
        outcomes[test_id] = Outcome(outcome, message)
    return outcomes


def rank_outcomes(junit_dir: Path, world_size: int, log: str) -> list[dict[str, Outcome]]:
    """Every rank's outcomes; fails naming the ranks that wrote no report."""
    missing = [rank for rank in range(world_size) if not (junit_dir / f"rank-{rank}.xml").is_file()]
    assert not missing, f"ranks {missing} wrote no JUnit file; log:\n{log[-4000:]}"
    return [read_junit(junit_dir / f"rank-{rank}.xml") for rank in range(world_size)]
