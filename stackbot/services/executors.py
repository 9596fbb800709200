"""stackbot's settings mapped onto gpu_jobs' executors and test sets.

One executor object per process and configuration: the local executor keeps its runner
subprocesses (and reaps them), so it must outlive a single task.
"""

from __future__ import annotations

import threading
from pathlib import Path

from gpu_jobs.executors import (
    Executor,
    LocalExecutorConfig,
    SlurmExecutorConfig,
    make_executor,
)
from gpu_jobs.testsets import TestSet, load_test_sets
from stackbot.config import Settings

_LOCK = threading.Lock()
_EXECUTORS: dict[tuple[object, ...], Executor] = {}
_TEST_SETS: dict[tuple[str, float], dict[str, TestSet]] = {}


def executor_config(settings: Settings) -> LocalExecutorConfig | SlurmExecutorConfig:
    if settings.executor == "slurm":
        slurm = settings.slurm
        return SlurmExecutorConfig(
            partition=slurm.partition,
            account=slurm.account,
            qos=slurm.qos,
            time_limit_minutes=slurm.time_limit_minutes,
            container_image=slurm.container_image,
            container_mounts=tuple(slurm.container_mounts),
            extra_sbatch_args=tuple(slurm.extra_sbatch_args),
            setup_commands=tuple(slurm.setup_commands),
            poll_interval_s=slurm.poll_interval_s,
            shared_dir=slurm.shared_dir or settings.data_dir,
            python=slurm.python,
            cache_dir=(slurm.shared_dir or settings.data_dir) / "runner-cache",
        )
    local = settings.local
    return LocalExecutorConfig(
        gpus=tuple(local.gpus),
        max_parallel_jobs=local.max_parallel_jobs,
        master_port_base=local.master_port_base,
        state_dir=settings.data_dir / "local-executor",
        cache_dir=settings.data_dir / "runner-cache",
    )


def executor_for_settings(settings: Settings) -> Executor:
    config = executor_config(settings)
    key = (type(config).__name__, repr(config))
    with _LOCK:
        executor = _EXECUTORS.get(key)
        if executor is None:
            executor = make_executor(config)
            _EXECUTORS[key] = executor
        return executor


def test_sets_for(settings: Settings) -> dict[str, TestSet]:
    """The configured test sets (re-read when the file changes)."""
    path = settings.test_sets_file
    stamp = Path(path).stat().st_mtime if path is not None else 0.0
    key = (str(path), stamp)
    with _LOCK:
        sets = _TEST_SETS.get(key)
        if sets is None:
            sets = load_test_sets(path)
            _TEST_SETS[key] = sets
        return sets
