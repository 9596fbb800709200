"""An end-to-end world: the GitHub stand-in and stackbot (app, embedded worker, local executor)
in this process, a small repository whose tests really run under torchrun, and helpers to wait
until the pipeline has settled."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from textwrap import dedent
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from stackbot.config import Settings
from stackbot.db.engine import make_engine
from stackbot.db.models import Job, Task
from stackbot.db.models._columns import utcnow
from stackbot.demo.runner import DemoStack

REPO = "NVIDIA/Megatron-LM"
FINISHED = ("passed", "failed", "error", "timeout", "infra", "cancelled")

CONFTEST = dedent("""
    import os
    from datetime import timedelta

    import pytest
    import torch.distributed as dist


    @pytest.fixture(scope="session", autouse=True)
    def world():
        dist.init_process_group("gloo", timeout=timedelta(seconds=60))
        yield
        dist.destroy_process_group()
""")

QUICK_TEST = dedent("""
    import torch
    import torch.distributed as dist

    from pkg.core import value


    def test_all_ranks_agree():
        t = torch.tensor([float(dist.get_rank() + 1)])
        dist.all_reduce(t)
        n = dist.get_world_size()
        assert t.item() == n * (n + 1) / 2


    def test_value_is_positive():
        assert value() > 0
""")

TEST_SETS = dedent("""
    schema_version = "1.0"

    [test_sets.quick]
    shapes = ["1x2"]
    timeout_s = 300
    megatron_targets = ["tests/test_quick.py", "tests/test_feature.py"]
""")


def main_files() -> dict[str, str]:
    return {
        "pkg/__init__.py": "",
        "pkg/core.py": "def value():\n    return 1\n",
        "tests/__init__.py": "",
        "tests/conftest.py": CONFTEST,
        "tests/test_quick.py": QUICK_TEST,
    }


@dataclass
class World:
    stack: DemoStack
    settings: Settings
    engine: Engine

    @property
    def control(self) -> Any:
        return self.stack.github.control

    def settle(self, timeout_s: float = 300.0) -> None:
        """Wait until every delivery was received, the queue is idle and every job finished."""
        self.control.wait_for_deliveries(timeout_s=60)
        deadline = time.monotonic() + timeout_s
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            with Session(self.engine) as session:
                soon = utcnow() + timedelta(seconds=5)  # not the periodic reconcile
                busy = session.exec(
                    select(Task.id).where(
                        (col(Task.status) == "running")
                        | ((col(Task.status) == "pending") & (col(Task.run_after) <= soon))
                    )
                ).all()
                dead = session.exec(select(Task).where(Task.status == "dead")).all()
                unfinished = session.exec(
                    select(Job.id).where(col(Job.status).not_in(list(FINISHED)))
                ).all()
            assert not dead, [(t.kind, t.last_error) for t in dead]
            if busy or unfinished:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since > 1.0:  # nothing new arrived meanwhile
                return
            time.sleep(0.25)
        raise AssertionError(f"the pipeline did not settle within {timeout_s:.0f} s")

    def sticky(self, number: int) -> tuple[int, str]:
        found = [c for c in self.control.comments(REPO, number) if "<!-- stackbot:report" in c.body]
        assert len(found) == 1, f"#{number} has {len(found)} sticky comments"
        return found[0].id, found[0].body

    def jobs(self) -> list[Job]:
        with Session(self.engine) as session:
            return list(session.exec(select(Job).order_by(col(Job.id))))


@contextmanager
def running_world(workdir: Path, **overrides: Any) -> Iterator[World]:
    (workdir / "testsets.toml").parent.mkdir(parents=True, exist_ok=True)
    (workdir / "testsets.toml").write_text(TEST_SETS)
    options: dict[str, Any] = {
        "test_sets_file": workdir / "testsets.toml",
        "default_test_sets": ["quick"],
        "job_node_check": False,
        "vetting": {"vetters": [], "trusted_authors": ["alice"], "trusted_orgs": []},
    }
    options.update(overrides)
    stack = DemoStack(workdir / "world", 0, lambda message: None, options)
    settings = stack.start()
    engine = make_engine(settings.effective_database_url)
    control = stack.github.control
    for login in ("alice", "bob", "carol"):
        control.add_user(login, email=f"{login}@example.com")
    control.create_repo(REPO, files=main_files(), author="bob")
    for login, role in (("alice", "write"), ("bob", "write"), ("carol", "read")):
        control.set_permission(REPO, login, role)
    try:
        yield World(stack, settings, engine)
    finally:
        engine.dispose()
        stack.stop()
