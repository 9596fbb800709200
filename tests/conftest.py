"""Fixtures every test package may use: an isolated environment, settings, and databases.

``database_url`` is parametrized over SQLite and a real PostgreSQL: a test that asks for it
runs on both. ``engine`` is that database migrated to head through Alembic (the only way the
schema is created).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from stackbot.config import Settings, load_settings
from stackbot.db import migrate
from stackbot.db.engine import make_engine
from tests.support import postgres

# One Chromium for the whole session: two Playwright sync instances cannot share a thread.
from tests.support.browser import browser  # noqa: F401  (fixture)


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's STACKBOT_* variables or stackbot.toml."""
    for name in list(os.environ):
        if name.startswith("STACKBOT_") and not name.startswith("STACKBOT_TEST_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("STACKBOT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'stackbot.db'}"
    else:
        with postgres.fresh_database() as url:
            yield url


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    migrate.upgrade(database_url)
    engine = make_engine(database_url)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def postgres_engine() -> Iterator[Engine]:
    """A migrated fresh PostgreSQL database, for what only PostgreSQL does (mark the test
    ``postgres``)."""
    with postgres.fresh_database() as url:
        migrate.upgrade(url)
        engine = make_engine(url)
        try:
            yield engine
        finally:
            engine.dispose()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(dev=True, data_dir=tmp_path / "data")


# -- running in parallel (pytest-xdist) ---------------------------------------------------------
#
# Two workers unless `-n` says otherwise (`-n 0`: one process, e.g. under a debugger). Set here,
# not in pyproject.toml's addopts: those reach every pytest run under this checkout, and the
# pytest that torchrun starts in each rank of a test (gpu_jobs' suites) must not spread itself
# over workers of its own.
WORKERS = 2


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    option = config.option
    if not hasattr(option, "numprocesses"):
        return  # pytest-xdist absent
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # A worker parses the command line again, without what is set below: it learns the
        # distribution from the controller (pytest_configure_node), or it would not name each
        # test's group and the groups would be spread over the workers like any test.
        workerinput = getattr(config, "workerinput", {})
        if workerinput.get("stackbot_dist") == "loadgroup":
            option.loadgroup = True
        return
    if option.numprocesses is None and not option.collectonly and not option.usepdb:
        option.numprocesses = WORKERS
    if option.numprocesses and option.dist == "no":
        option.dist = "loadgroup"
        option.loadscopereorder = False


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist's controller, before it starts a worker: the distribution chosen here."""
    node.workerinput["stackbot_dist"] = node.config.option.dist


# Each module runs whole on one worker (its module-scoped worlds are built once). What starts
# multi-node torchrun jobs on the local executor (their master port is a free port probed, not
# held, until torchrun binds it), what uses the one Slurm of the host, and the session's demo all
# run on one worker, one after the other, as in a serial run. The largest units go first so the
# other worker takes the rest meanwhile.
SERIAL_GROUP = "ranks-slurm-demo"
SERIAL_DIRS = ("tests/demo/", "tests/gpu_jobs/")


def _group_of(item: pytest.Item) -> str:
    path = item.nodeid.partition("::")[0]
    heavy = item.get_closest_marker("torchrun") or item.get_closest_marker("slurm")
    if path.startswith(SERIAL_DIRS) or (heavy and not path.startswith("tests/e2e/")):
        return SERIAL_GROUP
    return path


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = {id(item): _group_of(item) for item in items}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[id(item)]))

    def first(item: pytest.Item) -> int:
        group = groups[id(item)]
        return 0 if group == SERIAL_GROUP else 1 if group.startswith("tests/e2e/") else 2

    items.sort(key=first)  # stable: within a module, the written order
