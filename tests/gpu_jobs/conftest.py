"""Fixtures of the gpu_jobs tests: a real Slurm cluster, started when the tests need it."""

from tests.support.slurm import slurm_cluster

__all__ = ["slurm_cluster"]
