"""Checks every executor makes before it submits: the spec's tree can be had."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpu_jobs.spec import ContractError, JobSpec


def check_sources(spec: JobSpec) -> None:
    """Refuse a checkout that is not there or a commit a local repository lacks.

    A remote repository is not asked (that costs a round trip); the runner reports a commit
    missing there as an ``error`` result naming the field.
    """
    if spec.checkout is not None and not Path(spec.checkout).is_dir():
        raise ContractError("checkout", f"{spec.checkout} is not a directory")
    if spec.checkout is None and spec.repo_url and spec.commit and Path(spec.repo_url).exists():
        done = subprocess.run(
            [
                "git",
                "-C",
                spec.repo_url,
                "cat-file",
                "-e",
                "--end-of-options",
                f"{spec.commit}^{{commit}}",
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise ContractError("commit", f"{spec.commit} does not exist in {spec.repo_url}")
