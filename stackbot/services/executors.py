"""stackbot's settings mapped onto gpu_jobs' executor configurations.

The executor itself is kept by the worker's :class:`~stackbot.services.resources.WorkerResources`:
the local executor keeps its runner subprocesses (and reaps them), so it must outlive a task.
"""

from __future__ import annotations

from gpu_jobs.executors import LocalExecutorConfig, SlurmExecutorConfig
from stackbot.config import Settings


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
            cache_dir=settings.runner_cache_dir,
        )
    local = settings.local
    return LocalExecutorConfig(
        gpus=tuple(local.gpus),
        max_parallel_jobs=local.max_parallel_jobs,
        master_port_base=local.master_port_base,
        state_dir=settings.data_dir / "local-executor",
        cache_dir=settings.runner_cache_dir,
    )
