"""The real ingest path around the GitHub stand-in, for the sync, vetting and reporting tests.

The stand-in queues its webhook deliveries; :meth:`Pipeline.deliver` sends them, signed, to the
real stackbot app under uvicorn (which records them and queues ``process_delivery``), then runs
a real worker over the task kinds this area handles until none is due. Tasks of other kinds
(``integrate``, ``retest``) stay pending, so tests read what was asked of the pipeline.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session, col, select

from stackbot.adapters.github import GitHubClient
from stackbot.adapters.github.pacing import WritePacer
from stackbot.adapters.http_server import BackgroundServer
from stackbot.config import Settings, VettingSettings, load_settings
from stackbot.db import github_store as store
from stackbot.db.engine import session_scope
from stackbot.db.models import Approval, Task
from stackbot.domain.report import MARKER
from stackbot.services import commands, deliveries, reconcile, reporting, sync
from stackbot.taskqueue import TaskRegistry, queue
from stackbot.web.app import create_app
from stackbot.worker.runner import Worker
from tests.support.standin import WEBHOOK_SECRET, StandinWorld

UNPACED = WritePacer(per_minute=1_000_000, per_hour=1_000_000)
HANDLED = ("process_delivery", "sync_pull", "pr_command", "reconcile", "report")
VETTING = VettingSettings(vetters=["dave"], trusted_authors=["erin"], trusted_orgs=["NVIDIA"])


def pipeline_settings(standin: StandinWorld, tmp_path: Path) -> Settings:
    return load_settings(
        dev=True,
        data_dir=tmp_path / "data",
        github_api_url=standin.url,
        github_app_id=standin.app_id,
        github_private_key_path=standin.key.path,
        repo=standin.repo,
        webhook_secret=WEBHOOK_SECRET,
        vetting=VETTING,
        public_url="http://stackbot.test",
        # The stand-in has no content-creation limit, and a test session writes more than
        # GitHub's 80 a minute / 500 an hour, which the pacer would otherwise wait out.
        github_writes_per_minute=10**6,
        github_writes_per_hour=10**6,
    )


@dataclass
class Pipeline:
    standin: StandinWorld
    settings: Settings
    engine: Engine
    worker: Worker
    handled: tuple[str, ...] = HANDLED  # the task kinds run_tasks runs

    @property
    def repo(self) -> str:
        return self.standin.repo

    @property
    def control(self) -> Any:
        return self.standin.control

    def client(self) -> GitHubClient:
        """A client of its own whose write pacing does not hold tests back (the stand-in has
        no secondary rate limit unless a test injects one)."""
        return GitHubClient.from_settings(self.settings, pacer=UNPACED)

    def deliver(self) -> int:
        """Send the stand-in's queued deliveries and run the resulting tasks; returns how many
        tasks ran."""
        for delivery in self.control.flush_deliveries():
            assert delivery.status_code in (200, 202), (
                delivery.event,
                delivery.status_code,
                delivery.error,
            )
        return self.run_tasks()

    def drop_deliveries(self) -> int:
        """Lose the queued deliveries, as when the receiver was down (GitHub does not redeliver)."""
        with self.control.state.lock:
            lost = len(self.control.state.pending_deliveries)
            self.control.state.pending_deliveries.clear()
        return lost

    def run_tasks(self) -> int:
        ran = 0
        while (
            task := queue.claim(self.engine, self.worker.worker_id, lease_s=60, kinds=self.handled)
        ) is not None:
            self.worker.execute(task)
            ran += 1
        dead = self.tasks(status="dead")
        assert not dead, [(t.kind, t.last_error) for t in dead]
        return ran

    def tasks(self, kind: str | None = None, *, status: str = "pending") -> list[Task]:
        with Session(self.engine) as session:
            statement = select(Task).where(Task.status == status).order_by(col(Task.id))
            if kind is not None:
                statement = statement.where(Task.kind == kind)
            return list(session.exec(statement))

    def approvals(self, number: int) -> list[Approval]:
        with session_scope(self.engine) as session:
            repository = store.get_repository(session, full_name=self.repo)
            if repository is None or repository.id is None:
                return []
            found = store.approvals_of(session, repo_id=repository.id, pr_number=number)
            session.expunge_all()
            return found

    def comments(self, number: int) -> list[Any]:
        return list(self.control.comments(self.repo, number))

    def replies(self, number: int) -> list[Any]:
        """stackbot's replies on the PR: comments written through the App, less the report."""
        return [c for c in self.bot_comments(number) if not c.body.startswith(MARKER)]

    def stickies(self, number: int) -> list[Any]:
        """stackbot's report comments on the PR (there should be at most one)."""
        return [c for c in self.bot_comments(number) if c.body.startswith(MARKER)]

    def bot_comments(self, number: int) -> list[Any]:
        return [c for c in self.comments(number) if c.via_app]

    def head(self, number: int) -> str:
        return str(self.control.pull(self.repo, number).head_sha)


def make_pipeline(standin: StandinWorld, settings: Settings, engine: Engine) -> Iterator[Pipeline]:
    registry = TaskRegistry()
    for module in (deliveries, sync, commands, reconcile, reporting):
        module.register_tasks(registry)
    with BackgroundServer().serving(create_app(settings, engine=engine)) as app:
        standin.control.configure_webhook(
            f"{app.url}/webhooks/github", WEBHOOK_SECRET, mode="queue"
        )
        yield Pipeline(standin, settings, engine, Worker(engine, settings, registry))


# -- building PRs on the stand-in ----------------------------------------------------------------


def open_pr(
    pipeline: Pipeline,
    *,
    author: str,
    branch: str,
    title: str,
    base: str | None = None,
    body: str = "",
    commit_authors: tuple[str, ...] | None = None,
) -> int:
    """Open a PR whose branch holds one commit per name in ``commit_authors`` (default: the
    author's one commit)."""
    control, repo = pipeline.control, pipeline.repo
    names = commit_authors or (author,)
    parent = control.repo(repo).bare_path
    base_ref = base or "main"
    tip = _resolve(parent, f"refs/heads/{branch}") or _resolve(parent, f"refs/heads/{base_ref}")
    for index, name in enumerate(names):
        tip = control.commit(
            repo,
            branch,
            {f"{branch}/{index}.txt": f"{name} {index}\n"},
            message=f"{title} ({index})",
            author=name,
            parent=tip,
        )
    return int(
        control.open_pull(
            repo, author=author, head=branch, title=title, base=base, body=body
        ).number
    )


def push(pipeline: Pipeline, number: int, *, author: str, text: str = "more\n") -> str:
    pull = pipeline.control.pull(pipeline.repo, number)
    return str(
        pipeline.control.commit(
            pipeline.repo,
            pull.head_ref,
            {f"{pull.head_ref}/more.txt": text},
            message="More",
            author=author,
        )
    )


def _resolve(bare: Path, ref: str) -> str | None:
    result = subprocess.run(
        ["git", "-C", str(bare), "rev-parse", "--verify", "--quiet", ref],
        capture_output=True,
        text=True,
    )
    return result.stdout.strip() or None


# -- fixtures (the sync, vetting and reports packages' conftests import these) ---------------


@pytest.fixture
def bot_settings(standin: StandinWorld, tmp_path: Path) -> Settings:
    return pipeline_settings(standin, tmp_path)


@pytest.fixture
def pipeline(standin: StandinWorld, bot_settings: Settings, engine: Engine) -> Iterator[Pipeline]:
    yield from make_pipeline(standin, bot_settings, engine)
