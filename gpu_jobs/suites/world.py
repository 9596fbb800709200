"""The distributed world a suite runs in, built from torchrun's environment.

Every rank runs the same tests in the same order. A test settles its verdict collectively
(:meth:`World.settle`) before asserting, so a failure on one rank fails the test on all ranks
instead of leaving the others waiting in the next collective.
"""

from __future__ import annotations

import inspect
import os
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import torch
import torch.distributed as dist

BACKEND_ENV = "GPU_JOBS_BACKEND"
TIMEOUT_ENV = "GPU_JOBS_PG_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class World:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    backend: str
    device: torch.device

    @property
    def node_index(self) -> int:
        return self.rank // self.local_world_size

    def settle(self, ok: bool, message: str) -> None:
        """Fail on every rank when ``ok`` is false on any rank, naming the failing ranks."""
        flag = torch.tensor([1 if ok else 0], dtype=torch.int32, device=self.device)
        flags = [torch.zeros_like(flag) for _ in range(self.world_size)]
        dist.all_gather(flags, flag)
        failing = [rank for rank, f in enumerate(flags) if int(f.item()) == 0]
        if not failing:
            return
        if ok:
            pytest.fail(
                f"failed on rank(s) {failing} (see their reports); this rank passed", pytrace=False
            )
        pytest.fail(f"failed on rank(s) {failing}; rank {self.rank}: {message}", pytrace=False)

    def gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """Every rank's ``tensor`` stacked in rank order (shape: world size, *tensor.shape)."""
        local = tensor.to(self.device).contiguous()
        parts = [torch.empty_like(local) for _ in range(self.world_size)]
        dist.all_gather(parts, local)
        return torch.stack(parts)

    def any_rank(self, flag: bool) -> bool:
        """Whether ``flag`` holds on at least one rank."""
        value = torch.tensor([1 if flag else 0], dtype=torch.int32, device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return bool(value.item())

    def require_ranks(self, minimum: int, suite: str, *, even: bool = False) -> None:
        """Fail (never skip) when the world is too small for ``suite``."""
        if self.world_size >= minimum and not (even and self.world_size % 2):
            return
        shape = f"an even number of ranks >= {minimum}" if even else f"at least {minimum} ranks"
        pytest.fail(
            f"{suite} needs {shape}, but WORLD_SIZE={self.world_size}: launch it with "
            f"python -m torch.distributed.run --nproc-per-node {minimum} -m pytest <suite path>",
            pytrace=False,
        )


def choose_backend() -> str:
    """``nccl`` when CUDA is available, unless GPU_JOBS_BACKEND says ``gloo``."""
    wanted = os.environ.get(BACKEND_ENV, "").strip().lower()
    if wanted not in ("", "nccl", "gloo"):
        raise RuntimeError(f"{BACKEND_ENV} must be 'nccl' or 'gloo'; got {wanted!r}")
    if wanted == "nccl" and not torch.cuda.is_available():
        raise RuntimeError(f"infra: {BACKEND_ENV}=nccl but CUDA is not available on this node")
    if wanted:
        return wanted
    return "nccl" if torch.cuda.is_available() else "gloo"


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise RuntimeError(f"{name} must be an integer; got {raw!r}") from None


def _timeout() -> timedelta:
    raw = os.environ.get(TIMEOUT_ENV, str(DEFAULT_TIMEOUT_S))
    try:
        seconds = float(raw)
    except ValueError:
        raise RuntimeError(f"{TIMEOUT_ENV} must be a number of seconds; got {raw!r}") from None
    return timedelta(seconds=seconds)


def init_world() -> World:
    """Join torchrun's world, or a world of one when not launched by torchrun."""
    world_size = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    local_rank = _env_int("LOCAL_RANK", rank)
    local_world_size = _env_int("LOCAL_WORLD_SIZE", world_size)
    backend = choose_backend()
    device = torch.device("cpu")
    if backend == "nccl" and local_rank >= torch.cuda.device_count():
        raise RuntimeError(
            f"infra: LOCAL_RANK {local_rank} needs its own GPU for NCCL but only "
            f"{torch.cuda.device_count()} are visible: check CUDA_VISIBLE_DEVICES and "
            f"--nproc-per-node, or set {BACKEND_ENV}=gloo to share GPUs between ranks"
        )
    if torch.cuda.is_available():
        # With gloo several ranks may share one GPU (a one-GPU node running 4 ranks).
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    kwargs: dict[str, Any] = {"backend": backend, "timeout": _timeout()}
    if backend == "nccl" and "device_id" in inspect.signature(dist.init_process_group).parameters:
        kwargs["device_id"] = device
    if "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ:
        dist.init_process_group(init_method="env://", world_size=world_size, rank=rank, **kwargs)
    elif world_size == 1:
        store = os.path.join(tempfile.mkdtemp(prefix="gpu_jobs_world_"), "store")
        dist.init_process_group(init_method=f"file://{store}", world_size=1, rank=0, **kwargs)
    else:
        raise RuntimeError(
            f"infra: WORLD_SIZE={world_size} but MASTER_ADDR/MASTER_PORT are not set: "
            "launch with python -m torch.distributed.run"
        )
    return World(rank, world_size, local_rank, local_world_size, backend, device)


def close_world(world: World) -> None:
    if not dist.is_initialized():
        return
    try:
        # Keeps a fast rank from tearing down while a slow one still talks to it.
        dist.barrier()
    finally:
        dist.destroy_process_group()
