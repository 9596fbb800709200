"""How the suites join their world: backend choice and launch errors, before any process group."""

from __future__ import annotations

import pytest
import torch

from gpu_jobs.suites.world import choose_backend, init_world


def test_backend_defaults_to_gloo_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPU_JOBS_BACKEND", raising=False)
    assert choose_backend() == ("nccl" if torch.cuda.is_available() else "gloo")
    monkeypatch.setenv("GPU_JOBS_BACKEND", "GLOO")
    assert choose_backend() == "gloo"


def test_unknown_backend_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_JOBS_BACKEND", "mpi")
    with pytest.raises(RuntimeError, match="GPU_JOBS_BACKEND must be 'nccl' or 'gloo'; got 'mpi'"):
        choose_backend()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_nccl_without_cuda_is_an_infra_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_JOBS_BACKEND", "nccl")
    with pytest.raises(
        RuntimeError, match="infra: GPU_JOBS_BACKEND=nccl but CUDA is not available"
    ):
        choose_backend()


def test_multi_rank_world_without_a_master_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_JOBS_BACKEND", "gloo")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    with pytest.raises(RuntimeError, match="WORLD_SIZE=4 but MASTER_ADDR/MASTER_PORT are not set"):
        init_world()


def test_bad_timeout_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_JOBS_BACKEND", "gloo")
    monkeypatch.setenv("GPU_JOBS_PG_TIMEOUT_S", "soon")
    with pytest.raises(
        RuntimeError, match="GPU_JOBS_PG_TIMEOUT_S must be a number of seconds; got 'soon'"
    ):
        init_world()
