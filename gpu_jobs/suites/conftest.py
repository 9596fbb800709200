"""Session fixtures shared by the reference suites: the distributed world and its groups.

Run under ``python -m torch.distributed.run ... -m pytest <suite>`` (every rank runs pytest on
the same targets) or as plain ``pytest`` (a world of one). Backend: ``nccl`` when CUDA is
available and GPU_JOBS_BACKEND is not ``gloo``, else ``gloo``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_jobs.reference.amax import GroupRegistry
from gpu_jobs.suites.world import World, close_world, init_world

SUITES_DIR = Path(__file__).resolve().parent


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the suites' tests in file and definition order, in the slots they hold.

    Collectives pair up by order, so every rank must run the same tests in the same order; a
    plugin that shuffles tests with a per-process seed (pytest-randomly) would deadlock them.
    """
    slots = [
        i for i, item in enumerate(items) if SUITES_DIR in Path(str(item.path)).resolve().parents
    ]
    ours = sorted(
        (items[i] for i in slots),
        key=lambda item: (str(item.path), item.location[1] or 0, item.nodeid),
    )
    for slot, item in zip(slots, ours, strict=True):
        items[slot] = item


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
