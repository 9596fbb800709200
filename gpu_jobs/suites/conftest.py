"""Session fixtures shared by the reference suites: the distributed world and its groups.

Run under ``python -m torch.distributed.run ... -m pytest <suite>`` (every rank runs pytest on
the same targets) or as plain ``pytest`` (a world of one). Backend: ``nccl`` when CUDA is
available and GPU_JOBS_BACKEND is not ``gloo``, else ``gloo``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpu_jobs.reference.amax import GroupRegistry
from gpu_jobs.suites.world import World, close_world, init_world


@pytest.fixture(scope="session")
def world() -> Iterator[World]:
    joined = init_world()
    try:
        yield joined
    finally:
        close_world(joined)


@pytest.fixture(scope="session")
def group_registry(world: World) -> GroupRegistry:
    """One registry for the session, so a rank set's group is created once on every rank."""
    return GroupRegistry()
