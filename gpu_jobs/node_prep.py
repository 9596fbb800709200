"""Preparing a node before its ranks start: setup commands and the device the ranks use."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from gpu_jobs.launch import ProcessTree
from gpu_jobs.spec import LauncherOptions, Shape

PROBE_TIMEOUT_S = 300.0
_PROBE = "import torch; print(torch.cuda.device_count())"


class PrepFailed(Exception):
    """The node cannot run the job. ``status`` is ``infra`` unless the job itself ran out of
    time or was cancelled."""

    def __init__(self, status: Literal["infra", "timeout", "cancelled"], message: str) -> None:
        super().__init__(message)
        self.status = status


def run_setup_commands(
    commands: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log: Path,
    deadline: float,
    should_stop: Callable[[], bool],
    say: Callable[[str], None],
) -> None:
    for index, command in enumerate(commands, start=1):
        say(f"setup: running setup command {index}/{len(commands)}: {command}")
        with log.open("a") as out:
            out.write(f"$ {command}\n")
        tree = ProcessTree(["bash", "-c", command], cwd=cwd, env=env, log=log)
        while tree.poll() is None:
            if time.monotonic() >= deadline or should_stop():
                tree.kill()
                status: Literal["timeout", "cancelled"] = (
                    "cancelled" if should_stop() else "timeout"
                )
                raise PrepFailed(status, f"setup command {command!r} did not finish ({status})")
            time.sleep(0.1)
        if tree.poll() != 0:
            raise PrepFailed(
                "infra", f"setup command {command!r} exited {tree.poll()}; its output is in {log}"
            )


def choose_device(
    launcher: LauncherOptions, shape: Shape, python: str, env: Mapping[str, str]
) -> Literal["cuda", "cpu"]:
    """'cpu' or 'cuda' for this node's ranks; refuses a node without the GPUs the job needs."""
    if launcher.device == "cpu":
        return "cpu"
    count = _cuda_device_count(python, env)
    needed = 1 if launcher.backend == "gloo" else shape.gpus_per_node  # gloo ranks may share
    if count >= needed:
        return "cuda"
    if launcher.device == "auto" and count == 0:
        return "cpu"
    raise PrepFailed(
        "infra",
        f"this node sees {count} CUDA device(s) but the shape {shape} needs {needed} per node "
        f"(CUDA_VISIBLE_DEVICES={env.get('CUDA_VISIBLE_DEVICES', '<unset>')})",
    )


def _cuda_device_count(python: str, env: Mapping[str, str]) -> int:
    # In a child process: CUDA initialised here would be inherited badly by later forks.
    try:
        done = subprocess.run(
            [python, "-c", _PROBE],
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PrepFailed("infra", f"probing for CUDA devices failed: {exc}") from None
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        raise PrepFailed("infra", "torch cannot be imported on this node: " + " | ".join(tail))
    return int(done.stdout.strip().splitlines()[-1])
