"""The text of a Slurm job: an sbatch script, and the script srun starts on every node.

Pure functions of the spec and the executor's settings, so both are golden-tested.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from gpu_jobs.launch import HYGIENE_ENV
from gpu_jobs.spec import JobSpec

# Slurm's limit sits above the runner's own timeout, so the runner normally reports `timeout`
# itself with every rank's report; Slurm's limit is the backstop.
TIME_LIMIT_MARGIN_MIN = 5


@dataclass(frozen=True)
class SlurmExecutorConfig:
    """Mirrors stackbot's ``SlurmExecutorSettings``; ``shared_dir`` must be visible from the
    submitting host and from every compute node."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit_minutes: int = 60  # the most any job may ask for
    container_image: str | None = None  # a test set's own image wins
    container_mounts: tuple[str, ...] = ()
    extra_sbatch_args: tuple[str, ...] = ()
    setup_commands: tuple[str, ...] = ()  # on every node, before the runner (module load, ...)
    poll_interval_s: float = 2.0
    shared_dir: Path | None = None
    python: str = "python3"
    cpus_per_task: int | None = None
    cache_dir: Path | None = None  # the runner's repository cache on the nodes
    env: dict[str, str] = field(default_factory=dict)


def time_limit_minutes(spec: JobSpec, config: SlurmExecutorConfig) -> int:
    wanted = math.ceil(spec.timeout_s / 60) + TIME_LIMIT_MARGIN_MIN
    return max(1, min(wanted, config.time_limit_minutes))


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60}:{minutes % 60:02d}:00"


def job_name(spec: JobSpec) -> str:
    """The job's Slurm name (``--job-name``): unique per gpu_jobs job id, so a
    resubmit can find the allocation an earlier sbatch of the job got."""
    return "gpu_jobs-" + spec.job_id


def render_sbatch(spec: JobSpec, config: SlurmExecutorConfig, out_dir: Path) -> str:
    shape = spec.shape
    q = shlex.quote
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={q(job_name(spec))}",
        f"#SBATCH --nodes={shape.nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={shape.gpus_per_node}",
    ]
    if config.cpus_per_task is not None:
        lines.append(f"#SBATCH --cpus-per-task={config.cpus_per_task}")
    lines += [
        f"#SBATCH --time={_hhmm(time_limit_minutes(spec, config))}",
        f"#SBATCH --output={q(str(out_dir / 'slurm-%j.out'))}",
    ]
    for option, value in (("partition", config.partition), ("account", config.account)):
        if value:
            lines.append(f"#SBATCH --{option}={q(value)}")
    if config.qos:
        lines.append(f"#SBATCH --qos={q(config.qos)}")
    if spec.exclude_nodes:  # an infra failure's node: the retry runs elsewhere
        lines.append(f"#SBATCH --exclude={q(','.join(spec.exclude_nodes))}")
    if spec.only_nodes:  # a node check of one node
        lines.append(f"#SBATCH --nodelist={q(','.join(spec.only_nodes))}")
    lines += [f"#SBATCH {arg}" for arg in config.extra_sbatch_args]
    lines += [
        f"# gpu_jobs job {spec.job_id}: test set {spec.test_set} on {shape}",
        "set -euo pipefail",
        *(f"export {name}={q(value)}" for name, value in _job_env(config).items()),
        "",
        " \\\n    ".join(_srun(spec, config, out_dir)),
        "",
    ]
    return "\n".join(lines)


def _job_env(config: SlurmExecutorConfig) -> dict[str, str]:
    return {**config.env, **HYGIENE_ENV}


def _srun(spec: JobSpec, config: SlurmExecutorConfig, out_dir: Path) -> list[str]:
    q = shlex.quote
    parts = [f"srun --nodes={spec.shape.nodes} --ntasks-per-node=1 --kill-on-bad-exit=0"]
    image = spec.container_image or config.container_image
    if image:
        parts.append(f"--container-image={q(image)}")
        mounts = [*config.container_mounts]
        shared = str(config.shared_dir or out_dir)
        if not any(m.split(":")[0] == shared for m in mounts):
            mounts.append(f"{shared}:{shared}")  # the job directory must be seen inside
        parts.append(f"--container-mounts={q(','.join(mounts))}")
    parts.append(f"bash {q(str(out_dir / 'node.sh'))}")
    return parts


def render_node_script(spec: JobSpec, config: SlurmExecutorConfig, out_dir: Path) -> str:
    q = shlex.quote
    runner = [config.python, "-m", "gpu_jobs", "run", str(out_dir / "spec.json")]
    runner += ["--out", str(out_dir)]
    if config.cache_dir is not None:
        runner += ["--cache-dir", str(config.cache_dir)]
    lines = [
        "#!/bin/bash",
        f"# Started by srun on every node of gpu_jobs job {spec.job_id} (inside the container",
        "# when there is one). The runner takes its node rank and master from Slurm's variables.",
        "set -euo pipefail",
        *config.setup_commands,
        "exec " + " ".join(q(part) for part in runner),
        "",
    ]
    return "\n".join(lines)
