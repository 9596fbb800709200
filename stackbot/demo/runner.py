"""``stackbot demo``: the whole pipeline offline on this machine.

Starts the GitHub stand-in and stackbot (SQLite, one embedded worker, the local executor),
installs stackbot as a GitHub App on the stand-in, plays :mod:`stackbot.demo.scenario`, waits
until every report is posted (the GPU jobs really run: torchrun on CPU with gloo, or on the
host's GPUs), prints each PR's sticky comment, then lands the tested series with a
maintainer's ``/stackbot land`` (:mod:`stackbot.demo.landing`) and prints the landing's account
and the GPU jobs it cost, and keeps serving until interrupted (``--once``: exits 0 when the
series landed and every report is posted, non-zero with the reason if not).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import make_url
from sqlmodel import Session, col, select

from gpu_jobs.executors.pool import detect_gpus
from stackbot.adapters.http_server import BackgroundServer
from stackbot.config import Settings, load_settings
from stackbot.db import migrate
from stackbot.db.models import Approval, IntegrationRun, IntegrationStep, Job, Task
from stackbot.db.models._columns import utcnow
from stackbot.demo import scenario
from stackbot.demo.landing import (
    LandingOutcome,
    follow_landing,
    gpu_job_lines,
    jobs_between,
    last_job_id,
    runs_by_id,
)
from stackbot.demo.story import JobFacts, RunFacts, StepFacts, Story, busy_words, pr_summary
from stackbot.domain.landing_text import LANDING_MARKER
from stackbot.domain.report import MARKER
from stackbot.domain.report_view import test_set_words
from stackbot.standin import StandinServer
from stackbot.web.app import create_app
from stackbot.worker.handlers import service_registry

APP_ID = 4242
ALLOWLIST = "tools/process_group_usage_allowlist.json"  # the demo's generated file
FINISHED_JOBS = ("passed", "failed", "error", "timeout", "infra", "cancelled")
Say = Callable[[str], None]


@dataclass
class DemoResult:
    ok: bool
    reason: str = ""
    comments: dict[int, str] = field(default_factory=dict)
    dashboard: str = ""
    elapsed_s: float = 0.0
    landing: LandingOutcome | None = None


class DemoStack:
    """The GitHub stand-in and stackbot (app + embedded worker), running in this process.

    Also what the end-to-end tests start: ``overrides`` change the settings, ``port=0`` takes a
    free port. ``workers=N`` (N > 0) runs no worker in this process but N ``stackbot worker``
    processes against the same database, as a deployment does (their output goes to
    ``<workdir>/worker-<n>.log``). ``serve_process=True`` also runs the app as a ``stackbot
    serve`` process (``serve.log``) instead of in this process (the soak benchmark)."""

    def __init__(
        self,
        workdir: Path,
        port: int,
        say: Say,
        overrides: dict[str, Any] | None = None,
        *,
        workers: int = 0,
        serve_process: bool = False,
        standin_port: int = 0,
    ) -> None:
        self.workdir = workdir
        self.port = port
        self.say = say
        self.overrides = overrides or {}
        self.workers = workers
        self.serve_process = serve_process
        self.server_process: subprocess.Popen[bytes] | None = None
        self.github = StandinServer(workdir / "github", port=standin_port)
        self.settings: Settings | None = None
        self._web: BackgroundServer | None = None
        self._options: dict[str, Any] = {}
        self.worker_processes: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Settings:
        try:
            self.github.start()
        except RuntimeError as error:
            raise RuntimeError(f"{error}: pass another port with --port") from None
        self.say(f"GitHub stand-in on {self.github.url}")
        key_path = self._app_key()
        secret = secrets.token_hex(32)
        try:
            self._web = BackgroundServer(port=self.port, name="stackbot-serve")
        except RuntimeError as error:
            raise RuntimeError(f"{error}: pass another port with --port") from None
        self.port = self._web.port
        options: dict[str, Any] = {
            "data_dir": self.workdir / "stackbot",
            # SQLite in the work directory, unless STACKBOT_DATABASE_URL names another database
            # (an empty PostgreSQL one: the demo creates the schema there).
            "database_url": os.environ.get("STACKBOT_DATABASE_URL") or None,
            "webhook_secret": secret,
            "github_api_url": self.github.url,
            "github_app_id": APP_ID,
            "github_private_key_path": key_path,
            "github_token": None,
            "repo": scenario.REPO,
            "public_url": self.url,
            "executor": "local",
            "vetting": {"vetters": [], "trusted_authors": [scenario.TRUSTED], "trusted_orgs": []},
            # node-check tells a broken GPU node from a failing test; on a host without GPUs the
            # ranks are CPU processes with gloo, so it would only double every job's time.
            "job_node_check": bool(detect_gpus()),
        }
        options.update(self.overrides)
        settings = load_settings(**options)
        settings.ensure_dirs()
        migrate.upgrade(settings.effective_database_url)
        self._options = options
        embedded = service_registry(settings) if self.workers == 0 else None
        if self.serve_process:
            self._web.stop()  # only its port is used, by the `stackbot serve` process
            self._web = None
            self.server_process = self._start_server()
        else:
            self._web.start(create_app(settings, worker=embedded))
        for n in range(self.workers):
            self.worker_processes.append(self.start_worker(n))
        self.github.control.configure_webhook(f"{self.url}/webhooks/github", secret)
        self.settings = settings
        where = (
            f"SQLite in {settings.data_dir}"
            if settings.database_url is None
            else f"database {make_url(settings.effective_database_url).render_as_string()}"
        )
        workers = "an embedded worker" if self.workers == 0 else f"{self.workers} worker processes"
        self.say(f"stackbot on {self.url} ({where}, {workers})")
        return settings

    def worker_environment(self) -> dict[str, str]:
        """The environment of a ``stackbot worker`` (or ``serve``) process with this stack's
        settings: STACKBOT_* variables, nested sections and lists as JSON."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("STACKBOT_")}
        env.pop("STACKBOT_CONFIG", None)
        env["PYTHONUNBUFFERED"] = "1"
        for name, value in self._options.items():
            if value is None:
                continue
            if isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, str | int | float | Path):
                text = str(value)
            else:
                text = json.dumps(value, default=str)
            env[f"STACKBOT_{name.upper()}"] = text
        return env

    def start_worker(self, n: int) -> subprocess.Popen[bytes]:
        """Start ``stackbot worker`` number ``n`` (appending to ``worker-<n>.log``)."""
        with (self.workdir / f"worker-{n}.log").open("ab") as log_file:
            return subprocess.Popen(
                [sys.executable, "-m", "stackbot", "worker"],
                env=self.worker_environment(),
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )

    def _start_server(self) -> subprocess.Popen[bytes]:
        import httpx

        argv = [sys.executable, "-m", "stackbot", "serve", "--port", str(self.port)]
        if self.workers == 0:
            argv.append("--worker")
        with (self.workdir / "serve.log").open("ab") as log_file:
            process = subprocess.Popen(
                argv,
                env=self.worker_environment(),
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return process
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        process.kill()
        log = (self.workdir / "serve.log").read_text()[-3000:]
        raise RuntimeError(f"stackbot serve did not start on {self.url}:\n{log}")

    def worker_logs(self) -> str:
        return "\n".join(
            f"── worker-{n}.log ──\n" + (self.workdir / f"worker-{n}.log").read_text()[-4000:]
            for n in range(self.workers)
            if (self.workdir / f"worker-{n}.log").exists()
        )

    def _app_key(self) -> Path:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        public = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.workdir.mkdir(parents=True, exist_ok=True)
        path = self.workdir / "stackbot-app.pem"
        path.write_bytes(pem)
        path.chmod(0o600)
        control = self.github.control
        control.add_org(scenario.REPO.split("/")[0])
        control.register_app(public_key_pem=public.decode(), owner="NVIDIA", app_id=APP_ID)
        control.install_app(APP_ID, "NVIDIA")
        return path

    def stop(self) -> None:
        for process in self.worker_processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.worker_processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.worker_processes = []
        if self.server_process is not None:
            self.server_process.send_signal(signal.SIGTERM)
            try:
                self.server_process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.server_process.kill()
                self.server_process.wait()
            self.server_process = None
        if self._web is not None:
            self._web.stop(timeout_s=60)
        self.github.stop()


def run_demo(
    *, workdir: Path, port: int, once: bool, timeout_s: float, say: Say, workers: int = 0
) -> DemoResult:
    started = time.monotonic()
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    log_path = send_logs_to(workdir / "stackbot-demo.log")
    say(f"work directory {workdir}; worker and HTTP logs in {log_path}")
    # The stand-in on the next port: `stackbot demo comment|push --port P` finds it there.
    stack = DemoStack(workdir, port, say, workers=workers, standin_port=port + 1)
    try:
        settings = stack.start()
        play = scenario.DemoScenario(stack.github.control, say)
        play.setup()
        play.branch_before_main_moves()
        play.merge_superseding_change()
        play.protect_main()
        heads = play.open_series()
        play.vet(heads)
        story = Story()
        result = wait_until_reported(stack, settings, timeout_s=timeout_s, say=say, story=story)
        result.dashboard = f"{stack.url}/series/{scenario.SERIES_KEY.strip('#')}"
        print_result(result)
        refresh_first_job = last_job_id(settings.effective_database_url) + 1
        if result.ok:
            result = refresh_before_landing(stack, settings, play, say, story, started, timeout_s)
        if result.ok:
            left = max(60.0, timeout_s - (time.monotonic() - started))
            result.landing = land_series(stack, settings, play, say, story, timeout_s=left)
            result.landing.refresh_jobs, result.landing.refresh_reused = jobs_between(
                settings.effective_database_url, refresh_first_job, result.landing.first_job_id
            )
            print_landing(result.landing, settings)
            if not result.landing.ok:
                result.ok, result.reason = False, result.landing.reason
        result.elapsed_s = time.monotonic() - started
        say_result(result, say)
        if not once and result.ok:
            print_try_it(port, heads)
            say("serving until interrupted (Ctrl-C)")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                say("stopping")
        return result
    finally:
        stack.stop()


def send_logs_to(path: Path) -> Path:
    """Send every log record to ``path``; only errors still reach the terminal, so the demo's
    terminal tells its story instead of ~800 task lines."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, logging.StreamHandler) and not isinstance(
            handler, logging.FileHandler
        ):
            handler.setLevel(logging.ERROR)
    to_file = logging.FileHandler(path, encoding="utf-8")
    to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(to_file)
    root.setLevel(min(root.level or logging.INFO, logging.INFO))
    return path


class Progress:
    """One progress line: rewritten in place on a terminal, printed again only when what runs
    changes otherwise (a log file or a pipe gets one line per job, not one per second)."""

    def __init__(self, say: Say, stream: Any = None) -> None:
        self.say = say
        self.stream = stream if stream is not None else sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.last_key = ""

    def show(self, key: str, line: str) -> None:
        if self.live:
            self.stream.write("\r\033[K" + line)
            self.stream.flush()
            self.last_key = key
            return
        if key != self.last_key:
            self.say(line)
            self.last_key = key

    def event(self, line: str) -> None:
        """One line of the story: on a terminal the progress line is cleared first (and drawn
        again below it), so no line is left half-written or said twice."""
        if self.live and self.last_key:
            self.stream.write("\r\033[K")
            self.stream.flush()
        self.say(line)
        if self.live:  # redrawn below the event; in a pipe it is said again only on change
            self.last_key = ""

    def end(self) -> None:
        if self.live and self.last_key:
            self.stream.write("\n")
            self.stream.flush()


def progress_line(
    jobs: list[Job], runs: dict[int, IntegrationRun], busy: list[str], now: datetime
) -> tuple[str, str]:
    """(what runs, the same with its seconds): ``job 5/15: amax-group 2x4 for #8035, 40 s``."""
    done = sum(1 for job in jobs if job.status in FINISHED_JOBS)
    running = sorted(
        (job for job in jobs if job.status == "running" and job.reused_from_job_id is None),
        key=lambda job: job.id or 0,
    )
    if not running:
        what = f"jobs {done}/{len(jobs)} finished"
        if not busy:
            return what, what
        line = f"{what}; stackbot is busy: {busy_words(busy)}"
        # A long stretch of tasks and no job (a queue draining) still says so every 30 s.
        return f"{what} busy {int(now.timestamp()) // 30}", line
    job = running[0]
    set_name = test_set_words(job.test_set)
    what = f"job {done + 1}/{len(jobs)}: {set_name} {job.shape} for {_tree_of(job, runs)}"
    if len(running) > 1:
        what += f" (+{len(running) - 1} more running)"
    seconds = (now - _aware(job.started_at)).total_seconds() if job.started_at else 0.0
    # A long job still says so every 30 s where the line cannot be rewritten in place.
    return f"{what} {int(seconds) // 30}", f"{what}, {seconds:.0f} s"


def _tree_of(job: Job, runs: dict[int, IntegrationRun]) -> str:
    if job.kind == "baseline":
        return f"main {job.commit_sha[:7]} (baseline)"
    run = runs.get(job.integration_run_id or -1)
    if run is None:
        return f"tree {job.tree_sha[:7]}"
    if run.kind == "series":
        return f"the series {run.series_key}"
    return f"#{run.target_pr}'s stack"


def refresh_before_landing(
    stack: DemoStack,
    settings: Settings,
    play: scenario.DemoScenario,
    say: Say,
    story: Story,
    started: float,
    timeout_s: float,
) -> DemoResult:
    """The authors refresh their branches (main merged in, the allowlist regenerated), the
    vetter approves #8748's new head, and stackbot reports again on the new heads (the series
    tree is the one it tested: every result is reused)."""
    say("before landing, the authors bring their branches up to date")
    heads = play.refresh_branches()
    play.vet_head(8748, heads[8748])

    def on_new_heads(comments: dict[int, str]) -> bool:
        return all(f"#{n} at `{sha[:7]}`" in comments.get(n, "") for n, sha in heads.items())

    left = max(60.0, timeout_s - (time.monotonic() - started))
    result = wait_until_reported(
        stack, settings, timeout_s=left, say=say, story=story, settled=on_new_heads
    )
    result.dashboard = f"{stack.url}/series/{scenario.SERIES_KEY.strip('#')}"
    return result


def land_series(
    stack: DemoStack,
    settings: Settings,
    play: scenario.DemoScenario,
    say: Say,
    story: Story,
    *,
    timeout_s: float,
) -> LandingOutcome:
    """The demo's ending: maintainer-p reviews the tested series and lands it with
    ``/stackbot land``; the terminal tells the landing and what stackbot does after it."""
    from stackbot.db.engine import make_engine

    url = settings.effective_database_url
    first_job_id = last_job_id(url) + 1
    say("the series is tested green: a maintainer lands it")
    play.review()
    play.land()
    engine = make_engine(url)
    progress = Progress(say)

    def observe() -> tuple[str, str, bool]:
        with Session(engine) as session:
            tasks = session.exec(select(Task.status, Task.kind, Task.run_after)).all()
            job_rows = list(session.exec(select(Job)).all())
            runs = {run.id or 0: run for run in session.exec(select(IntegrationRun)).all()}
            facts = _story_facts(session, runs, job_rows)
            session.expunge_all()
        for event in story.update(**facts, replies=_replies(stack)):
            progress.event(event)
        busy = _busy(tasks)
        key, line = progress_line(job_rows, runs, busy, utcnow())
        idle = not busy and all(job.status in FINISHED_JOBS for job in job_rows)
        return key, line, idle

    try:
        return follow_landing(
            stack,
            url,
            first_job_id=first_job_id,
            tell=progress.event,
            show=progress.show,
            observe=observe,
            timeout_s=timeout_s,
        )
    finally:
        progress.end()
        engine.dispose()


def _busy(tasks: Sequence[tuple[str, str, datetime]]) -> list[str]:
    """The kinds of the tasks running now or due within seconds (the periodic reconcile waits
    far longer)."""
    soon = utcnow() + timedelta(seconds=5)
    return [
        kind
        for status, kind, run_after in tasks
        if status == "running" or (status == "pending" and _aware(run_after) <= soon)
    ]


def wait_until_reported(
    stack: DemoStack,
    settings: Settings,
    *,
    timeout_s: float,
    say: Say,
    story: Story | None = None,
    settled: Callable[[dict[int, str]], bool] | None = None,
) -> DemoResult:
    """Wait until the queue is idle, every job has finished and every PR has its report (and
    the reports are what ``settled`` waits for)."""
    from stackbot.db.engine import make_engine

    engine = make_engine(settings.effective_database_url)
    deadline = time.monotonic() + timeout_s
    progress = Progress(say)
    story = story if story is not None else Story()
    try:
        while True:
            with Session(engine) as session:
                tasks = session.exec(select(Task.status, Task.kind, Task.run_after)).all()
                job_rows = list(session.exec(select(Job)).all())
                runs = {run.id or 0: run for run in session.exec(select(IntegrationRun)).all()}
                dead = session.exec(select(Task).where(Task.status == "dead")).all()
                facts = _story_facts(session, runs, job_rows)
                session.expunge_all()
            for event in story.update(**facts, replies=_replies(stack)):
                progress.event(event)
            jobs = [job.status for job in job_rows]
            busy = _busy(tasks)
            done_jobs = sum(1 for status in jobs if status in FINISHED_JOBS)
            key, line = progress_line(job_rows, runs, busy, utcnow())
            progress.show(key, line)
            exited = [p for p in stack.worker_processes if p.poll() is not None]
            if exited:
                progress.end()
                return DemoResult(
                    False,
                    f"{len(exited)} worker process(es) exited (code "
                    f"{', '.join(str(p.returncode) for p in exited)}):\n{stack.worker_logs()}",
                )
            if dead:
                progress.end()
                reasons = "; ".join(
                    f"{t.kind}: {(t.last_error or '').strip().splitlines()[-1:]}" for t in dead
                )
                return DemoResult(False, f"{len(dead)} task(s) failed for good: {reasons}")
            if not busy and jobs and done_jobs == len(jobs):
                comments = sticky_comments(stack)
                missing = [n for n in scenario.REPORTED_PRS if n not in comments]
                if not missing and (settled is None or settled(comments)):
                    progress.end()
                    problems = [n for n in jobs if n in ("infra", "error", "timeout")]
                    ok = not problems
                    reason = (
                        ""
                        if ok
                        else f"{len(problems)} job(s) ended {', '.join(sorted(set(problems)))}"
                    )
                    return DemoResult(ok, reason, comments)
            if time.monotonic() > deadline:
                progress.end()
                return DemoResult(
                    False, f"not every report was posted within {timeout_s:.0f} s ({line})"
                )
            time.sleep(1.0)
    finally:
        engine.dispose()


def _story_facts(
    session: Session, runs: dict[int, IntegrationRun], jobs: list[Job]
) -> dict[str, Any]:
    """What the story tells, read from the database: finished runs with their steps,
    approvals and finished jobs."""
    steps: dict[int, list[StepFacts]] = {}
    for step in session.exec(select(IntegrationStep).order_by(col(IntegrationStep.position))).all():
        paths = [str(c.get("path", "")) for c in step.conflicts]
        generated = [p for p in paths if p == ALLOWLIST]
        steps.setdefault(step.run_id, []).append(
            StepFacts(
                step.pr_number,
                step.outcome,
                tuple(p for p in paths if p not in generated),
                tuple(step.conflicts_with),
                tuple(generated),
                step.skipped_reason,
            )
        )
    run_facts = [
        RunFacts(
            run_id,
            run.kind,
            run.status,
            run.base_ref,
            run.target_pr,
            run.series_key,
            tuple(steps.get(run_id, ())),
            run.error,
        )
        for run_id, run in sorted(runs.items())
    ]
    approvals = [
        (a.pr_number, a.sha, a.vetter, a.kind)
        for a in session.exec(select(Approval).order_by(col(Approval.id))).all()
    ]
    job_facts = [
        JobFacts(
            job.id or 0,
            job.test_set,
            job.shape,
            job.status,
            _tree_of(job, runs),
            {k: v for k, v in (job.counts or {}).items() if isinstance(v, int)},
            job.reused_from_job_id is not None,
        )
        for job in sorted(jobs, key=lambda job: job.id or 0)
    ]
    return {"runs": run_facts, "approvals": approvals, "jobs": job_facts}


def _replies(stack: DemoStack) -> list[tuple[int, int, str]]:
    """stackbot's answers to commands (its comments other than the sticky reports)."""
    found = []
    for number in scenario.REPORTED_PRS:
        for comment in stack.github.control.comments(scenario.REPO, number):
            # the landing's own comment, edited as it goes, is told by the landing's story
            if comment.via_app and not comment.body.startswith((MARKER, LANDING_MARKER)):
                found.append((number, comment.id, comment.body))
    return found


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def sticky_comments(stack: DemoStack) -> dict[int, str]:
    found = {}
    control = stack.github.control
    for number in scenario.REPORTED_PRS:
        for comment in control.comments(scenario.REPO, number):
            if "<!-- stackbot:report" in comment.body:
                found[number] = comment.body
    return found


def print_try_it(port: int, heads: dict[int, str]) -> None:
    """How to act on the running demo as its people would, from another terminal: the series
    has landed, #8050 is the PR still open."""
    flag = "" if port == 8000 else f" --port {port}"
    sys.stdout.write(
        "\nAct on it as a user would, from another terminal (stackbot answers on the PR):\n"
        f'  stackbot demo comment 8050 "/stackbot status" --as {scenario.VETTER}{flag}\n'
        f'  stackbot demo comment 8050 "/ok to test {heads.get(8050, "")[:7]}" --as '
        f"{scenario.VETTER}{flag}\n"
        f"  stackbot demo push 8050 --as {scenario.OUTSIDER}{flag}"
        "     # a new head: its approval no longer holds\n\n"
    )
    sys.stdout.flush()


def print_result(result: DemoResult) -> None:
    """Where each PR stands once every report is posted: one line each, then each comment."""
    if result.comments:
        sys.stdout.write("\nWhere each PR stands (its sticky comment's first lines):\n")
        for number, body in sorted(result.comments.items()):
            sys.stdout.write(f"  {pr_summary(number, body)}\n")
    for number, body in sorted(result.comments.items()):
        sys.stdout.write(f"\n──── sticky comment on #{number} " + "─" * 40 + "\n")
        # The hidden marker is for stackbot, not for the reader (GitHub does not show it).
        shown = body.replace(MARKER + "\n", "", 1).replace(MARKER, "", 1)
        sys.stdout.write(shown.strip() + "\n")
    sys.stdout.write("\n")
    sys.stdout.flush()


def print_landing(outcome: LandingOutcome, settings: Settings) -> None:
    """The landing's account (its comment), #8050 on the new main, and the GPU jobs it cost."""
    out = sys.stdout
    out.write("──── the landing " + "─" * 56 + "\n")
    comment = outcome.landing_comment.replace(LANDING_MARKER, "", 1).strip()
    out.write((comment or "(no landing comment was posted)") + "\n")
    retargeted = ", ".join(f"#{n} (from {base})" for n, base in outcome.retargeted.items())
    if retargeted:
        out.write(f"Retargeted onto main before their parent merged: {retargeted}.\n")
    closed = outcome.closed_unmerged
    out.write(
        "Closed by GitHub for a deleted base branch: "
        + (", ".join(f"#{n}" for n in closed) if closed else "none")
        + ".\n"
    )
    for number, body in sorted(outcome.open_report.items()):
        out.write(
            f"Still open, reported against the new main {outcome.main_sha[:7]}: "
            f"{pr_summary(number, body)}\n"
        )
    out.write("\n")
    for line in gpu_job_lines(outcome, runs_by_id(settings.effective_database_url)):
        out.write(line + "\n")
    out.write("\n")
    out.flush()


def say_result(result: DemoResult, say: Say) -> None:
    if result.ok:
        say(
            f"every report is posted and the series landed ({result.elapsed_s:.0f} s). "
            f"Dashboard: {result.dashboard}"
        )
    else:
        say(f"demo did not finish: {result.reason}")
