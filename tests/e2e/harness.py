"""An end-to-end world: the GitHub stand-in and stackbot (app, local executor) in this process,
a small repository whose tests really run under torchrun, and helpers to wait until the
pipeline has settled.

On SQLite the worker is the one embedded in the app; on PostgreSQL two ``stackbot worker``
processes claim the tasks, as in a deployment, and :meth:`World.check_nothing_done_twice`
asserts what concurrency must not break."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from textwrap import dedent
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from stackbot.config import Settings
from stackbot.db.engine import make_engine
from stackbot.db.models import Job, Task, WebhookDelivery
from stackbot.db.models._columns import utcnow
from stackbot.demo.runner import DemoStack
from tests.support import postgres

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
        """Wait until every delivery was received, the queue is idle and every job finished;
        then check that nothing was done twice."""
        self.control.wait_for_deliveries(timeout_s=60)
        deadline = time.monotonic() + timeout_s
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            exited = [p.returncode for p in self.stack.worker_processes if p.poll() is not None]
            assert not exited, f"worker process(es) exited {exited}:\n{self.stack.worker_logs()}"
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
                self.check_nothing_done_twice()
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

    def check_nothing_done_twice(self) -> None:
        """Every job started once, every delivery processed once, no comment or check run
        written twice, every report final (the settled pipeline, whatever the workers)."""
        jobs = self.jobs()
        started = {f"job-{j.id}" for j in jobs if j.reused_from_job_id is None}
        assert all(j.status in FINISHED for j in jobs), [(j.id, j.status) for j in jobs]
        out_dirs = sorted(p.name for p in self.settings.jobs_dir.iterdir() if p.is_dir())
        assert not [d for d in out_dirs if re.search(r"\.r\d+$", d)], out_dirs  # no restarts
        assert set(out_dirs) == started, (out_dirs, sorted(started))  # one out_dir per job
        for name in out_dirs:  # each started and finished once, in its own directory
            assert (self.settings.jobs_dir / name / "result.json").is_file(), name
        for job in jobs:
            if job.reused_from_job_id is None:
                assert job.out_dir is not None and job.out_dir.endswith(f"/job-{job.id}"), job
        with Session(self.engine) as session:
            deliveries = session.exec(select(WebhookDelivery)).all()
            tasks = session.exec(select(Task).where(Task.kind == "process_delivery")).all()
        sent = [d for d in self.control.deliveries() if d.url]  # (none before the webhook)
        assert sent and all(d.status_code == 202 for d in sent), [
            (d.event, d.status_code) for d in sent if d.status_code != 202
        ]
        rows = Counter(d.delivery_id for d in deliveries)
        assert all(rows[d.guid] == 1 for d in sent), "a delivery answered 202 was not recorded"
        unprocessed = [(d.event, d.action) for d in deliveries if d.status == "recorded"]
        assert not unprocessed, unprocessed  # every delivery processed (or ignored) ...
        per_row = Counter(t.payload["delivery"] for t in tasks)
        assert all(n == 1 for n in per_row.values()), per_row.most_common(3)  # ... by one task
        assert all(t.status == "done" for t in tasks), [(t.id, t.status) for t in tasks]
        for number in self.pull_numbers():
            bodies = [
                c.body for c in self.control.comments(REPO, number) if c.author.endswith("[bot]")
            ]
            assert len(bodies) == len(set(bodies)), f"#{number}: a comment posted twice"
            assert sum("<!-- stackbot:report" in b for b in bodies) <= 1, f"#{number}"
            head = self.control.pull(REPO, number).head_sha
            runs = Counter(r.name for r in self.control.check_runs(REPO, head))
            assert all(n == 1 for n in runs.values()), (number, runs)
        # stackbot/approval stays pending by design while a commit waits for a vetter's
        # `/ok to test`; every other check run must have been completed.
        heads = {self.control.pull(REPO, n).head_sha: n for n in self.pull_numbers()}
        unfinished = [
            (r.name, r.status, f"#{heads.get(r.head_sha, r.head_sha[:7])}", r.title, r.summary)
            for r in self.control.check_runs(REPO)
            if r.status != "completed" and r.name != "stackbot/approval"
        ]
        assert not unfinished, unfinished

    def pull_numbers(self) -> list[int]:
        return sorted(self.control.repo(REPO).pulls)


@contextmanager
def running_world(workdir: Path, database: str = "sqlite", **overrides: Any) -> Iterator[World]:
    """``database``: "sqlite" (the embedded worker) or "postgresql" (a fresh database, two
    ``stackbot worker`` processes)."""
    with ExitStack() as cleanup:
        workers = 0
        if database == "postgresql":
            overrides.setdefault("database_url", cleanup.enter_context(postgres.fresh_database()))
            workers = 2
        with _running_world(workdir, workers, **overrides) as world:
            yield world


@contextmanager
def _running_world(workdir: Path, workers: int, **overrides: Any) -> Iterator[World]:
    (workdir / "testsets.toml").parent.mkdir(parents=True, exist_ok=True)
    (workdir / "testsets.toml").write_text(TEST_SETS)
    options: dict[str, Any] = {
        "test_sets_file": workdir / "testsets.toml",
        "default_test_sets": ["quick"],
        "job_node_check": False,
        "vetting": {"vetters": [], "trusted_authors": ["alice"], "trusted_orgs": []},
    }
    options.update(overrides)
    stack = DemoStack(workdir / "world", 0, lambda message: None, options, workers=workers)
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
