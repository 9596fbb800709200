"""A series tested by stackbot's real test plan and real task queue, with GPU time simulated.

What is real: the database (SQLite or PostgreSQL), the stored integration runs and jobs, the
policy that chooses which runs are tested (``services.integrate.test_runs``), the planner
(``services.test_plan``), ``poll_jobs`` run as queued tasks by a real ``Worker``, the job
creation and reuse of ``services.jobs`` and the queue order of ``services.job_execution``. What is modelled: the integration runs'
trees (a tree is the set of PR versions merged into it, so identical merges give identical
trees, as git's do) and the executor (:class:`TimingExecutor`): a job takes its
configuration's duration on ``shape.nodes`` of a fixed pool of nodes, in simulated seconds,
and its tests fail as injected (from a layer up; once per tree for a flaky test; every job
placed on a broken node is ``infra``).

``benchmarks/bench_test_plan.py`` runs it for the figures; ``tests/plan`` for the behaviour.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, update
from sqlmodel import Session, col, select

from gpu_jobs.executors.base import JobHandle, JobState, PoolBusy
from gpu_jobs.result import Counts, TestResult
from gpu_jobs.spec import JobResult, JobSpec
from gpu_jobs.testsets import TestSet, is_own_test_set, load_own_tests, load_test_sets
from stackbot.config import Settings
from stackbot.db import jobs_store
from stackbot.db.engine import session_scope
from stackbot.db.models import IntegrationRun, IntegrationStep, Job, Repository, Task, TestFinding
from stackbot.domain.pipeline import PrState
from stackbot.domain.tasks import FollowUp, PollJobs, Report
from stackbot.domain.types import PrNumber
from stackbot.services import broken_nodes, poll_jobs, quarantine
from stackbot.services import jobs as job_service
from stackbot.services.integrate import plan_tested_runs, test_runs
from stackbot.services.resources import WorkerResources
from stackbot.taskqueue import TaskRegistry, queue
from stackbot.worker.runner import Worker

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
# Simulated minutes per job of each configuration (a real Megatron job: minutes to tens).
DURATION_S = {
    ("amax-group", "1x4"): 600.0,
    ("amax-group", "2x4"): 900.0,
    ("blockwise-recipe", "1x4"): 300.0,
}
FAILING_CONFIG = ("amax-group", "1x4")  # where injected failures live
SERIES = "#6307"
BASE_SHA = "b" * 40


def _sha(*parts: object) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()


Tree = frozenset[tuple[int, int]]  # (PR, version) merged


@dataclass
class Injected:
    fail_at: Sequence[int] = ()  # test_fail_K fails in every tree holding PR K
    flaky_at: Sequence[int] = ()  # test_flaky_K fails on the first run of a tree holding PR K
    flaky_runs: int = 1  # ... on this many first runs of such a tree
    broken_nodes: Sequence[str] = ()  # every job placed there is infra
    broken_on_main: bool = False  # test_broken_on_main fails in every tree, main's too
    fixed: Sequence[int] = ()  # test_flaky_K of these K passes from now on


@dataclass
class _Running:
    spec: JobSpec
    layer_tree: Tree
    nodes: tuple[str, ...]
    start: float
    end: float
    infra: bool


@dataclass
class TimingExecutor:
    """gpu_jobs' executor interface over simulated time and a pool of nodes."""

    sim: Simulation
    nodes: tuple[str, ...]
    kind: str = "local"
    jobs: dict[str, _Running] = field(default_factory=dict)  # by out_dir
    runs_of_tree: dict[tuple[Tree, str, str], int] = field(default_factory=dict)
    placed: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # job id, its nodes

    def _busy(self) -> set[str]:
        return {n for r in self.jobs.values() if r.end > self.sim.now for n in r.nodes}

    def submit(self, spec: JobSpec, out_dir: Path) -> JobHandle:
        key = str(out_dir)
        if key in self.jobs:  # idempotent for an out_dir, like the real executors
            return self._handle(spec, key)
        # As Slurm's --exclude and --nodelist: never an excluded node; only the nodes named.
        excluded = set(spec.exclude_nodes)
        free = [
            n
            for n in self.nodes
            if n not in self._busy()
            and n not in excluded
            and (not spec.only_nodes or n in spec.only_nodes)
        ]
        if len(free) < spec.shape.nodes:
            raise PoolBusy(f"{len(free)} free nodes, {spec.shape.nodes} needed")
        nodes = tuple(free[: spec.shape.nodes])
        self.placed.append((spec.job_id, nodes))
        if spec.test_set == "node-check":  # a node check: a broken node fails it
            infra = any(n in self.sim.injected.broken_nodes for n in nodes)
            self.jobs[key] = _Running(
                spec, frozenset(), nodes, self.sim.now, self.sim.now + 120, infra
            )
            return self._handle(spec, key)
        duration = DURATION_S.get((spec.test_set, str(spec.shape)), 600.0)
        if is_own_test_set(spec.test_set):  # PRs' own files: minutes per file
            duration = self.sim.own_test_minutes * 60.0 * max(1, len(spec.targets))
        infra = any(n in self.sim.injected.broken_nodes for n in nodes)
        if infra:
            duration = 60.0  # the node check fails before any test runs
        tree = self.sim.tree_of_commit[spec.commit or ""]
        self.jobs[key] = _Running(spec, tree, nodes, self.sim.now, self.sim.now + duration, infra)
        return self._handle(spec, key)

    def _handle(self, spec: JobSpec, out_dir: str) -> JobHandle:
        return JobHandle("local", spec.job_id, out_dir, {})

    def poll(self, handle: JobHandle) -> JobState:
        run = self.jobs[handle.out_dir]
        started = (EPOCH + timedelta(seconds=run.start)).isoformat()
        if self.sim.now < run.end:
            return JobState("running", node=",".join(run.nodes), started_at=started)
        finished = (EPOCH + timedelta(seconds=run.end)).isoformat()
        return JobState("finished", ",".join(run.nodes), started, finished)

    def collect(self, handle: JobHandle) -> JobResult:
        run = self.jobs[handle.out_dir]
        spec = run.spec
        started = (EPOCH + timedelta(seconds=run.start)).isoformat()
        finished = (EPOCH + timedelta(seconds=run.end)).isoformat()
        common: dict[str, Any] = {
            "test_set": spec.test_set,
            "shape": str(spec.shape),
            "commit": spec.commit,
            "nodes": run.nodes,
            "started_at": started,
            "finished_at": finished,
        }
        if run.infra:
            return JobResult(
                spec.job_id,
                "infra",
                f"node check failed on {run.nodes[0]}",
                node_check="failed",
                error_of="node",
                **common,
            )
        if spec.test_set == "node-check":
            return JobResult(spec.job_id, "passed", "", node_check="passed", **common)
        config = (spec.test_set, str(spec.shape))
        key = (run.layer_tree, *config)
        self.runs_of_tree[key] = self.runs_of_tree.get(key, 0) + 1
        outcomes = self.sim.outcomes(
            run.layer_tree, config, run=self.runs_of_tree[key], targets=spec.targets
        )
        tests = tuple(
            TestResult(nodeid, outcome, 1.0, {0: outcome}) for nodeid, outcome in outcomes.items()
        )
        counts = Counts.of_tests(outcomes)
        status = "failed" if counts.failed else "passed"
        return JobResult(spec.job_id, status, "", counts=counts, tests=tests, **common)

    def cancel(self, handle: JobHandle) -> None:
        self.jobs.pop(handle.out_dir, None)

    def next_end(self) -> float | None:
        ends = [r.end for r in self.jobs.values() if r.end > self.sim.now]
        return min(ends) if ends else None


class _Resources(WorkerResources):
    def __init__(self, settings: Settings, executor: TimingExecutor, sets: dict[str, TestSet]):
        super().__init__(settings)
        self._sim_executor = executor
        self._sim_sets = sets

    def executor(self) -> TimingExecutor:  # type: ignore[override]
        return self._sim_executor

    def test_sets(self) -> dict[str, TestSet]:
        return self._sim_sets


# -- what bench_landing.py's simulation shares with this one ---------------------------------


def find_or_add_run(
    session: Session,
    *,
    repo_id: int,
    kind: str,
    name: str,
    series_key: str | None,
    target_pr: int | None,
    base_sha: str,
    heads: dict[str, str],
) -> tuple[IntegrationRun, bool]:
    """The stored run identical to this one (same kind, name, base and heads: the real
    integrate makes no run twice), or a new clean run (True) whose steps the caller adds."""
    for run in session.exec(
        select(IntegrationRun).where(
            IntegrationRun.repo_id == repo_id,
            IntegrationRun.kind == kind,
            IntegrationRun.name == name,
            IntegrationRun.base_sha == base_sha,
        )
    ):
        if run.heads == heads and run.id is not None:
            return run, False
    run = IntegrationRun(
        repo_id=repo_id,
        kind=kind,
        name=name,
        series_key=series_key,
        target_pr=target_pr,
        base_ref="main",
        base_sha=base_sha,
        status="clean",
        heads=heads,
    )
    session.add(run)
    session.flush()
    return run, True


def test_and_plan(
    engine: Engine,
    settings: Settings,
    made: Sequence[int],
    requests: Any,
    states: Any,
    *,
    repo_id: int,
    base_sha: str,
    base_tree: str,
    own: Any = None,
) -> None:
    """What the real integrate does after making ``made``: the test policy picks the runs to
    test (``test_runs``), main's baseline jobs are made, and the planner plans the tested runs."""
    untested = test_runs(engine, settings, list(made), requests, states, own=own)
    tested = [r for r in made if r not in untested]
    with session_scope(engine) as session:
        job_service.create_baseline_jobs(
            session,
            repo_id=repo_id,
            base_ref="main",
            base_sha=base_sha,
            base_tree=base_tree,
            requests=requests,
        )
    plan_tested_runs(engine, settings, tested)


def executor_gpu_hours(executor: TimingExecutor) -> float:
    """GPU-hours of every job the simulated executor ran (nodes x GPUs x seconds)."""
    total = 0.0
    for run in executor.jobs.values():
        shape = run.spec.shape
        total += shape.nodes * shape.gpus_per_node * (run.end - run.start)
    return total / 3600.0


def poll_now(engine: Engine) -> None:
    """Make poll_jobs due now (it reschedules itself a couple of real seconds ahead)."""
    with session_scope(engine) as session:
        found = session.exec(
            select(Task).where(Task.kind == "poll_jobs", Task.status == "pending")
        ).first()
        if found is None:
            again = FollowUp.of(PollJobs())
            queue.enqueue(session, again.kind, again.payload, dedupe_key=again.dedupe_key)
        else:
            session.execute(
                update(Task)
                .where(col(Task.id) == found.id)
                .values(run_after=queue.utcnow() - timedelta(seconds=1))
            )


@dataclass
class PushResult:
    series_run: int
    stack_runs: dict[int, int]


class Simulation:
    """One repository, one linear series of PRs 1..N (plus optional independent PRs that
    conflict with the series), tested under one policy."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        *,
        prs: int,
        injected: Injected | None = None,
        conflicting: Iterable[int] = (),
        nodes: int = 8,
        test_sets: Sequence[str] = ("amax-group", "blockwise-recipe"),
        own_test_minutes: float | None = None,
    ) -> None:
        """``own_test_minutes``: each PR of the chain adds one own test file
        (``tests/unit_tests/test_pr_N.py``) that takes that many simulated minutes per job
        (None: no own test files)."""
        self.engine, self.settings = engine, settings
        self.prs = prs
        self.injected = injected or Injected()
        self.conflicting = set(conflicting)
        self.versions = {n: 1 for n in range(1, prs + 1 + len(self.conflicting))}
        self.now = 0.0
        self.tree_of_commit: dict[str, Tree] = {BASE_SHA: frozenset()}
        self.own_test_minutes = own_test_minutes or 0.0
        self.own = load_own_tests() if own_test_minutes is not None else None
        # Main: its commit and what it holds (a landed PR's version); PRs still open.
        self.base_sha = BASE_SHA
        self.landed: Tree = frozenset()
        self.open_chain = list(range(1, prs + 1))
        self.sets = load_test_sets()
        self.requests = job_service.job_requests(self.sets, settings, test_sets)
        self.executor = TimingExecutor(self, tuple(f"gpu-{i:02d}" for i in range(nodes)))
        registry = TaskRegistry()
        registry.add_task(PollJobs, poll_jobs.handle_poll_jobs)
        registry.add_task(Report, lambda ctx, task: None)  # reports are not what is measured
        resources = _Resources(settings, self.executor, self.sets)
        self.worker = Worker(engine, settings, registry, resources=resources)
        # Quarantine windows and release streaks are read on the simulated clock.
        quarantine.clock = lambda: EPOCH + timedelta(seconds=self.now)
        broken_nodes.clock = quarantine.clock  # exclusion windows and node checks too
        with session_scope(engine) as session:
            repo = Repository(full_name="NVIDIA/Megatron-LM", clone_url="sim://megatron")
            session.add(repo)
            session.flush()
            assert repo.id is not None
            self.repo_id = repo.id

    def use_policy(self, policy: str) -> None:
        """Test the next pushes under another policy (the same database and trees)."""
        self.settings = self.settings.model_copy(update={"test_plan_policy": policy})
        self.worker.settings = self.settings

    # -- the model of trees and tests --------------------------------------------------------

    def outcomes(
        self,
        tree: Tree,
        config: tuple[str, str],
        *,
        run: int,
        targets: Sequence[str] = (),
    ) -> dict[str, str]:
        if is_own_test_set(config[0]):  # PRs' own test files pass
            return {f"{target}::test_ok": "passed" for target in targets}
        tests = {f"tests/unit_tests/test_{config[0]}.py::test_ok": "passed"}
        if config != FAILING_CONFIG:
            return tests
        merged = {pr for pr, _ in tree}
        if self.injected.broken_on_main:
            tests["tests/unit_tests/test_main.py::test_broken_on_main"] = "failed"
        # The injected tests exist on main (passing): PR K breaks them, it does not add them
        # (a test main lacks is new, and a new test's failure is never rerun).
        for k in self.injected.fail_at:
            outcome = "failed" if k in merged else "passed"
            tests[f"tests/unit_tests/test_layer_{k}.py::test_fail_{k}"] = outcome
        for k in self.injected.flaky_at:
            first = run <= self.injected.flaky_runs
            fails = k in merged and first and k not in self.injected.fixed
            outcome = "failed" if fails else "passed"
            tests[f"tests/unit_tests/test_layer_{k}.py::test_flaky_{k}"] = outcome
        return tests

    def _tree(self, merged: Tree) -> tuple[str, str]:
        tree_sha, commit = _sha("tree", sorted(merged)), _sha("commit", sorted(merged))
        self.tree_of_commit[commit] = merged
        return tree_sha, commit

    # -- integrations ----------------------------------------------------------------------

    def push(self, pr: int | None = None) -> PushResult:
        """A push to ``pr`` (None: the series' first integration): the runs stackbot's
        integrate makes (a stack per PR and the series), the jobs the policy gives them."""
        if pr is not None:
            self.versions[pr] += 1
        chain = list(self.open_chain)
        loners = list(range(self.prs + 1, self.prs + 1 + len(self.conflicting)))
        series_order = chain + loners
        with session_scope(self.engine) as session:
            series_id = self._run(session, "series", series_order, None)
            stacks = {}
            for index, k in enumerate(chain, 1):
                stacks[k] = self._run(session, "stack", chain[:index], k)
            for k in loners:
                stacks[k] = self._run(session, "stack", [k], k)
        made = [*stacks.values(), series_id]
        states = {
            n: PrState(PrNumber(n), self._head(n), True, frozenset({self._head(n)}))
            for n in self.versions
        }
        test_and_plan(
            self.engine,
            self.settings,
            made,
            self.requests,
            states,
            repo_id=self.repo_id,
            base_sha=self.base_sha,
            base_tree=_sha("tree", sorted(self.landed)) if self.landed else _sha("tree", []),
            own=self.own,
        )
        return PushResult(series_id, stacks)

    def land(self, pr: int) -> PushResult:
        """PR ``pr`` (the chain's first open PR) lands by a squash merge: main's new commit
        holds that PR's version (and nothing else: main has not otherwise moved); the PRs
        above it are integrated again on the new main."""
        assert self.open_chain and self.open_chain[0] == pr, "land the bottom of the chain"
        self.landed = self.landed | {(pr, self.versions[pr])}
        self.base_sha = _sha("main", sorted(self.landed))
        self.tree_of_commit[self.base_sha] = self.landed
        self.open_chain = self.open_chain[1:]
        return self.push()

    def _head(self, n: int) -> str:
        return _sha("head", n, self.versions[n])

    def _run(self, session: Session, kind: str, order: Sequence[int], target: int | None) -> int:
        loners = set(range(self.prs + 1, self.prs + 1 + len(self.conflicting)))
        merged: set[tuple[int, int]] = set()
        heads = {str(n): self._head(n) for n in order}
        name = f"pr-{target}" if kind == "stack" else "series-6307"
        run, new = find_or_add_run(
            session,
            repo_id=self.repo_id,
            kind=kind,
            name=name,
            series_key=SERIES,
            target_pr=target,
            base_sha=self.base_sha,
            heads=heads,
        )
        assert run.id is not None
        if not new:
            return run.id
        merged |= self.landed
        tree_sha, commit = self._tree(frozenset(merged))
        for position, n in enumerate(order, 1):
            conflicts = kind == "series" and n in loners
            if not conflicts:
                merged.add((n, self.versions[n]))
                tree_sha, commit = self._tree(frozenset(merged))
            session.add(
                IntegrationStep(
                    run_id=run.id,
                    position=position,
                    pr_number=n,
                    head_sha=heads[str(n)],
                    outcome="conflict" if conflicts else "clean",
                    tree=tree_sha,
                    commit=commit,
                    conflicts=[{"path": "megatron/core/x.py", "type": "content"}]
                    if conflicts
                    else [],
                    own_test_files=[
                        {
                            "path": f"tests/unit_tests/test_pr_{n}.py",
                            "status": "added",
                            "on_main": False,
                        }
                    ]
                    if self.own is not None and n not in loners
                    else [],
                )
            )
            if conflicts:
                run.status = "conflict"
        run.final_tree, run.final_commit = tree_sha, commit
        session.add(run)
        return run.id

    # -- time ----------------------------------------------------------------------------

    def drive(self, *, max_rounds: int = 100_000) -> None:
        """Run poll_jobs through the queue, moving simulated time to the next job end, until
        every job is finished and no plan waits."""
        stalled = 0
        for _ in range(max_rounds):
            self._poll_now()
            self.worker.run_until_idle()
            with Session(self.engine) as session:
                unfinished = jobs_store.count_unfinished(session)
                waiting = jobs_store.runs_with_open_findings(session)
            if not unfinished and not waiting:
                return
            end = self.executor.next_end()
            if end is not None:
                self.now = end
                stalled = 0
            elif not unfinished:
                raise AssertionError(f"plans of runs {waiting} wait with no job left")
            else:
                stalled += 1
                if stalled > 50:  # nothing runs and nothing starts: say what waits
                    raise AssertionError(
                        f"{unfinished} jobs unfinished with none running: {self._stuck()}"
                    )
        raise AssertionError("the simulation did not settle")

    def _stuck(self) -> list[tuple[int | None, str, str | None]]:
        with Session(self.engine) as session:
            return [
                (job.id, job.status, job.series_key)
                for job in session.exec(select(Job).order_by(col(Job.id)))
                if job.status not in ("passed", "failed", "error", "infra", "cancelled")
            ][:20]

    def _poll_now(self) -> None:
        poll_now(self.engine)

    # -- what it cost and found -----------------------------------------------------------

    def originals(self) -> list[Job]:
        with Session(self.engine) as session:
            jobs = list(
                session.exec(
                    select(Job).where(col(Job.reused_from_job_id).is_(None)).order_by(col(Job.id))
                )
            )
            session.expunge_all()
        return jobs

    def gpu_hours(self) -> float:
        return executor_gpu_hours(self.executor)

    def findings(self, run_id: int) -> list[TestFinding]:
        with Session(self.engine) as session:
            rows = jobs_store.findings_of_run(session, run_id=run_id)
            session.expunge_all()
        return rows

    def attributed(self, run_id: int) -> dict[str, int | None]:
        """Each injected failure's layer → the PR it was attributed to (None: to no PR, as a
        flaky test must be), read from the series run's findings."""
        found: dict[str, int | None] = {}
        for finding in self.findings(run_id):
            layer = finding.nodeid.rsplit("_", 1)[-1]
            found[layer] = finding.pr_number if finding.failure_class == "new" else None
        return found
