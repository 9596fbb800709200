"""Where jobs run: subprocesses of this host, or a Slurm cluster; one interface for both."""

from __future__ import annotations

from gpu_jobs.executors.base import (
    Executor,
    ExecutorError,
    JobHandle,
    JobState,
    PoolBusy,
    StartUnknown,
    wait_for,
)
from gpu_jobs.executors.local import LocalExecutor, LocalExecutorConfig
from gpu_jobs.executors.slurm import SlurmExecutor
from gpu_jobs.executors.slurm_script import SlurmExecutorConfig


def make_executor(config: LocalExecutorConfig | SlurmExecutorConfig) -> Executor:
    """The executor a config describes (stackbot maps its settings onto one of the configs)."""
    if isinstance(config, SlurmExecutorConfig):
        return SlurmExecutor(config)
    return LocalExecutor(config)


def executor_for(handle: JobHandle, local: LocalExecutor, slurm: SlurmExecutor) -> Executor:
    """The executor that owns a handle read back after a restart."""
    return slurm if handle.kind == "slurm" else local


__all__ = [
    "Executor",
    "ExecutorError",
    "JobHandle",
    "JobState",
    "LocalExecutor",
    "LocalExecutorConfig",
    "PoolBusy",
    "SlurmExecutor",
    "SlurmExecutorConfig",
    "StartUnknown",
    "executor_for",
    "make_executor",
    "wait_for",
]
