"""Starting torchrun and killing it with everything it started.

torchrun puts each worker in a session of its own, so killing torchrun's process group is not
enough: a tree is found by parent links and, for processes orphaned on the way, by a token in
the environment every descendant inherits.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import gpu_jobs

TREE_TOKEN_ENV = "GPU_JOBS_TREE"

# NVLink multicast must stay off on the lent GPU machines; unbuffered output keeps the logs
# in order when ranks are killed.
HYGIENE_ENV: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "PYTHONUNBUFFERED": "1",
}
_FAILURE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)")
_ROOT_CAUSE = "Root Cause (first observed failure)"


def launch_env(base: Mapping[str, str], extra: Mapping[str, str], *, cpu: bool) -> dict[str, str]:
    """The environment of every process gpu_jobs starts; the hygiene settings always win."""
    env = dict(base)
    if cpu:
        env["OMP_NUM_THREADS"] = "1"
        env["GPU_JOBS_BACKEND"] = "gloo"
        # Hide GPUs so a CPU run stays on CPU even on a GPU host (Slurm may also hand out
        # fake devices, as on CI).
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(extra)
    env.update(HYGIENE_ENV)
    return env


def runner_import_dir(where: Path) -> Path:
    """A directory holding only a link to this runner's own package, for the ranks' PYTHONPATH.

    The ranks run pytest in the tree under test with ``-p gpu_jobs.pytest_rank_plugin``; when
    the runner was started from a source tree that is not installed (``python -m gpu_jobs`` in
    a clone), nothing else would let them import it. Only the package is exposed, so nothing
    else of the runner's checkout (its ``tests/``, say) can shadow the tree's own modules.
    """
    package = Path(gpu_jobs.__file__).resolve().parent
    link = where / package.name
    try:
        where.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() and link.resolve() != package:
            link.unlink()
        if not link.is_symlink():
            link.symlink_to(package, target_is_directory=True)
    except OSError:  # no links on this filesystem: the package's parent, with its neighbours
        return package.parent
    return where


def with_python_path(env: Mapping[str, str], directory: Path) -> dict[str, str]:
    """``env`` with ``directory`` first on PYTHONPATH, keeping the entries already there."""
    existing = env.get("PYTHONPATH", "")
    entries = [str(directory), *(e for e in existing.split(os.pathsep) if e)]
    return {**env, "PYTHONPATH": os.pathsep.join(dict.fromkeys(entries))}


@dataclass(frozen=True)
class Rendezvous:
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str | None = None
    master_port: int | None = None

    def torchrun_args(self) -> list[str]:
        if self.nnodes == 1 and self.master_port is None:
            return ["--standalone"]  # torchrun picks a free port itself
        return [
            f"--nnodes={self.nnodes}",
            f"--node-rank={self.node_rank}",
            f"--master-addr={self.master_addr or '127.0.0.1'}",
            f"--master-port={self.master_port or 29500}",
        ]


def torchrun_argv(
    python: str,
    *,
    nproc_per_node: int,
    rendezvous: Rendezvous,
    log_dir: Path,
    torchrun_args: Sequence[str],
    pytest_args: Sequence[str],
    targets: Sequence[str],
) -> list[str]:
    return [
        python,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={nproc_per_node}",
        *rendezvous.torchrun_args(),
        "--max-restarts=0",
        # Every line of the console log is prefixed with its local rank; per-rank files too.
        "--tee=3",
        f"--log-dir={log_dir}",
        *torchrun_args,
        "-m",
        "pytest",
        "-p",
        "gpu_jobs.pytest_rank_plugin",
        "-p",
        "no:cacheprovider",
        "-q",
        *pytest_args,
        *targets,
    ]


def rank_failures(log_text: str) -> dict[int, int]:
    """Exit codes torchrun reported per global rank in its failure summary."""
    return {int(rank): int(code) for rank, code in _FAILURE.findall(_summary(log_text))}


def root_cause_rank(log_text: str) -> int | None:
    """The global rank torchrun's failure summary names as its first observed failure (the
    other ranks it lists are mostly the ones it stopped after that); None without a summary."""
    section = _summary(log_text)
    at = section.find(_ROOT_CAUSE)
    found = _FAILURE.search(section, at) if at >= 0 else None
    return int(found[1]) if found else None


def _summary(log_text: str) -> str:
    marker = log_text.rfind("ChildFailedError")
    return log_text[marker:] if marker >= 0 else log_text[-20000:]


class ProcessTree:
    """A command in its own session whose whole tree can be killed."""

    def __init__(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], log: Path
    ) -> None:
        self.token = uuid.uuid4().hex
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            self.popen = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env={**env, TREE_TOKEN_ENV: self.token},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def kill(self, grace_s: float = 5.0) -> None:
        """SIGTERM the tree, then SIGKILL whatever is left after ``grace_s``."""
        kill_tree(self.popen.pid, self.token, grace_s)
        try:
            self.popen.wait(timeout=grace_s + 5)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def kill_tree(root_pid: int, token: str | None, grace_s: float) -> None:
    _signal_all(tree_members(root_pid, token), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not tree_members(root_pid, token):
            return
        time.sleep(0.1)
    # Only current members: a pid seen earlier may since have been reused by another process.
    _signal_all(tree_members(root_pid, token), signal.SIGKILL)


def tree_members(root_pid: int, token: str | None) -> set[int]:
    """Live descendants of ``root_pid`` (itself included) and every process carrying ``token``."""
    children: dict[int, list[int]] = {}
    for pid in _all_pids():
        ppid = _parent(pid)
        if ppid is not None:
            children.setdefault(ppid, []).append(pid)
    members = {root_pid} if _alive(root_pid) else set()
    stack = [root_pid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in members:
                members.add(child)
                stack.append(child)
    if token:
        members |= processes_with_token(token)
    return {pid for pid in members if _alive(pid)}


def processes_with_token(token: str) -> set[int]:
    needle = f"{TREE_TOKEN_ENV}={token}".encode()
    found = set()
    for pid in _all_pids():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.add(pid)
    return found


def _all_pids() -> Iterable[int]:
    return (int(name) for name in os.listdir("/proc") if name.isdigit())


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may contain spaces and parentheses: fields follow the last ')'.
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _signal_all(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
