"""Landing series under merge traffic, per policy (issue 25).

What is real: the landing (``stackbot.services.landing``: the ``land`` task, the gate, the
merge loop, the account on every PR), the database (SQLite or PostgreSQL), the task queue and a
real ``Worker``, the test plan (``services.integrate.test_runs``, ``plan_tested_runs``:
confirmations of flaky failures, bisection), job creation and reuse of identical trees, and
``poll_jobs``. What is modelled: GitHub (:class:`SimGitHub`, in memory: merges with the head
SHA check, retargets, GitHub closing a PR whose base branch is deleted, comments; each write
costs 0.75 s of simulated time, GitHub's 80 content writes a minute), the integration's trees
(``integrate`` replaced by :meth:`World.integrate`: a tree is the set of PR versions merged into
it, so identical merges give identical trees, as git's do; the runs it makes are the real
integrate's: a stack run per PR and the series run, or the gate run a landing asks for) and the
GPU executor (``benchmarks/plan_sim.py``'s ``TimingExecutor``: amax-group 1x4 10 min, 2x4 15
min, blockwise-recipe 1x4 5 min, on ``--nodes`` nodes of 4 GPUs).

Traffic (the same for every policy of a run, drawn from ``--seed``, 30 days by default: at 8
merges a day a shorter run holds a handful of series, and its figures are a draw of their
sizes): series of 1-30 PRs (``--sizes uniform``, the default, as issue 25 states the traffic:
1-30 alike; ``skewed``: 60 % of one PR, 20 % of 2-3, 15 % of 4-10, 5 % of 11-30) arriving as a
Poisson stream at
Megatron-LM's rate of 8 merged PRs a day (``--rate``), a day in five a peak day of 3x that
(24); ``--fail-rate`` of the series carry a PR that breaks a test, ``--flaky-rate`` a PR whose
test fails on a tree's first run only; main moves under the queue ``--main-pushes`` times a day
(commits that are not landings). ``/stackbot land`` is asked when a series arrives; a stopped
landing is read ``--fix-hours`` later, its broken PR fixed by a new push, and what is left of
the series landed again.

Policies: ``per-pr`` (today's practice with GitHub's merge queue: each PR its own landing,
tested on main + the PRs ahead in the queue + itself, ``--window`` at once, a failure re-testing
everything behind it; a series' child is queued only once its parent landed, since until then it
is based on its parent's branch); ``series`` (one
landing per series, window 1: each tested on main when its turn comes); ``speculative`` (one
landing per series, the gate with ``--window`` landings tested at once on top of the ones
ahead).

    python benchmarks/bench_landing.py [--hours H] [--seed S] [--sizes uniform|skewed]
        [--policy per-pr|series|speculative|all] [--database sqlite|postgresql] --json

Progress goes to stderr (a line per policy and per simulated day); the results to stdout.

Prints one JSON object per line and per policy: ``policy``, ``series``, ``landed_prs``,
``landed_series``, ``prs_per_hour``, ``gpu_hours``, ``gpu_hours_per_landed_pr``,
``land_to_landed_p50_s`` and ``_p95_s`` (from ``/stackbot land`` to the series' last PR merged,
series that landed whole), ``runs_thrown_away`` (runs whose jobs ran but whose tree never
became main's and was not the tree that stopped a landing: speculation lost to a failure ahead,
or a tree made stale by main moving or a push), ``partly_landed_unaccounted`` (stopped
landings with merged PRs where a PR lacks its account or an open PR is left on a deleted or
unlanded base), ``untested_merges``
(PRs merged by a landing whose landed tree is not the tested tree, or whose head is not the
tested head), ``prs_closed_by_base_deletion``, ``merge_group_jobs_on_tested_trees`` (GPU jobs
started on a tree and configuration that already had a passed job: with the GitHub merge queue
not modelled, these are the jobs of a landing's tree re-integrated on the main it lands on),
``stopped_landings``, ``wall_s`` (simulated), ``by_series_size`` (per size of series, ``1``,
``2-5``, ``6-30`` PRs: ``series``, ``prs``, ``landed_prs``, ``gpu_hours`` of the jobs of the
trees its landings asked for, ``gpu_hours_per_landed_pr``; ``main``: main's baseline jobs) and,
when ``per-pr`` ran too, ``ratio_to_per_pr`` (in all and per size): a series of one PR costs
one run of its tree under every policy, so the saving comes from the longer series only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import Engine, update
from sqlmodel import Session, col, select

from benchmarks.plan_sim import (
    FAILING_CONFIG,
    Injected,
    TimingExecutor,
    _Resources,
    executor_gpu_hours,
    find_or_add_run,
    poll_now,
    test_and_plan,
)
from gpu_jobs.testsets import load_test_sets
from stackbot.adapters.github_errors import GitHubRejected
from stackbot.config import LandingSettings, Settings, load_settings
from stackbot.db import landing_store, migrate
from stackbot.db.engine import make_engine, session_scope
from stackbot.db.models import (
    IntegrationRun,
    IntegrationStep,
    Job,
    Repository,
    Task,
    TestFinding,
)
from stackbot.domain.landing import LandingEntry, LandingState
from stackbot.domain.landing_text import LANDING_MARKER
from stackbot.domain.pipeline import PrState
from stackbot.domain.records import CommentRecord, MergeRules, PrRecord, ReviewRecord
from stackbot.domain.tasks import Integrate, Land, PollJobs, Report
from stackbot.domain.types import PrNumber, RepoName
from stackbot.services import jobs as job_service
from stackbot.services import landing as landing_service
from stackbot.services import poll_jobs
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry, queue
from stackbot.worker.runner import Worker

REPO = RepoName("NVIDIA/Megatron-LM")
POLICIES = ("per-pr", "series", "speculative")
WRITE_S = 60.0 / 80  # GitHub's 80 content writes a minute
Tree = frozenset[tuple[int, int]]  # (PR, version) merged; main's own commits are PR < 0


def _sha(*parts: object) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()


def tree_sha(tree: Tree) -> str:
    return _sha("tree", sorted(tree))


# -- the traffic ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SeriesArrival:
    at: float
    key: str
    prs: tuple[int, ...]
    broken: int | None  # the PR whose first version breaks a test
    flaky: int | None  # the PR whose test fails on a tree's first run


@dataclass(frozen=True)
class Traffic:
    series: tuple[SeriesArrival, ...]
    main_pushes: tuple[float, ...]


def _size(rng: random.Random, sizes: str) -> int:
    if sizes == "uniform":
        return rng.randint(1, 30)
    draw = rng.random()
    if draw < 0.60:
        return 1
    if draw < 0.80:
        return rng.randint(2, 3)
    if draw < 0.95:
        return rng.randint(4, 10)
    return rng.randint(11, 30)


MEAN_SIZE = 0.60 * 1 + 0.20 * 2.5 + 0.15 * 7 + 0.05 * 20.5


def make_traffic(args: argparse.Namespace) -> Traffic:
    rng = random.Random(args.seed)
    end = args.hours * 3600.0
    series: list[SeriesArrival] = []
    number = 1000
    day = -1
    rate = 0.0
    now = 0.0
    while True:
        if int(now // 86400) != day:
            day = int(now // 86400)
            peak = rng.random() < 0.2
            merges = args.rate * (3.0 if peak else 1.0)  # merged PRs that day
            mean = MEAN_SIZE if args.sizes == "skewed" else 15.5
            rate = merges / mean / 86400.0  # series a second
        now += rng.expovariate(rate)
        if now >= end:
            break
        prs = tuple(range(number, number + _size(rng, args.sizes)))
        number += len(prs) + 1
        broken = rng.choice(prs) if rng.random() < args.fail_rate else None
        flaky = rng.choice(prs) if rng.random() < args.flaky_rate else None
        if flaky is not None and flaky == broken:
            flaky = None  # one way of failing per PR
        series.append(SeriesArrival(now, f"root-#{prs[0]}", prs, broken, flaky))
    pushes: list[float] = []
    now = 0.0
    while args.main_pushes > 0:
        now += rng.expovariate(args.main_pushes / 86400.0)
        if now >= end:
            break
        pushes.append(now)
    return Traffic(tuple(series), tuple(pushes))


# -- GitHub, in memory -----------------------------------------------------------------------


@dataclass
class SimPull:
    number: int
    head_ref: str
    base_ref: str
    version: int = 1
    state: str = "open"
    merged: bool = False
    comments: dict[int, str] = field(default_factory=dict)

    @property
    def head_sha(self) -> str:
        return _sha("head", self.number, self.version)


class SimGitHub:
    """The GitHub calls a landing makes, on an in-memory repository whose main is a tree of PR
    versions. Merges check the head SHA (409 on a moved head) and land into the PR's base
    branch; a merged PR's head branch is deleted, and GitHub closes every open PR based on
    it."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.pulls: dict[int, SimPull] = {}
        self.next_comment = 1
        self.closed_by_base_deletion = 0
        self.merged_heads: list[tuple[int, str]] = []
        self.into_other_branch = 0

    def _write(self) -> None:
        self.world.now += WRITE_S

    def _record(self, pull: SimPull) -> PrRecord:
        return PrRecord(
            PrNumber(pull.number),
            title=f"PR {pull.number}",
            author="carol",
            state=pull.state,
            merged=pull.merged,
            head_ref=pull.head_ref,
            head_sha=pull.head_sha,
            base_ref=pull.base_ref,
        )

    def get_pull(self, repo: RepoName, number: PrNumber) -> PrRecord:
        return self._record(self.pulls[int(number)])

    def list_open_pulls(self, repo: RepoName) -> Sequence[PrRecord]:
        return [self._record(p) for p in self.pulls.values() if p.state == "open"]

    def update_pull_base(self, repo: RepoName, number: PrNumber, base: str) -> None:
        self._write()
        self.pulls[int(number)].base_ref = base

    def list_issue_comments(self, repo: RepoName, number: PrNumber) -> Sequence[CommentRecord]:
        return [
            CommentRecord("stackbot[bot]", body, cid)
            for cid, body in self.pulls[int(number)].comments.items()
        ]

    def create_comment(self, repo: RepoName, number: PrNumber, body: str) -> int:
        self._write()
        cid = self.next_comment
        self.next_comment += 1
        self.pulls[int(number)].comments[cid] = body
        return cid

    def edit_comment(self, repo: RepoName, comment_id: int, body: str) -> None:
        self._write()
        for pull in self.pulls.values():
            if comment_id in pull.comments:
                pull.comments[comment_id] = body

    def collaborator_permission(self, repo: RepoName, user: str) -> str:
        return "write"

    def merge_pull(self, repo: RepoName, number: PrNumber, *, sha: str, method: str) -> str:
        self._write()
        pull = self.pulls[int(number)]
        if pull.state != "open":
            raise GitHubRejected("merge", 405, "Pull Request is not mergeable")
        if pull.head_sha != sha:
            raise GitHubRejected("merge", 409, "Head branch was modified. Review and try again.")
        pull.state, pull.merged = "closed", True
        self.merged_heads.append((pull.number, sha))
        if pull.base_ref == "main":
            tip = self.world.move_main(self.world.main_tree | {(pull.number, pull.version)})
        else:
            self.into_other_branch += 1
            tip = _sha("merged-into", pull.base_ref, pull.number)
        for other in self.pulls.values():  # delete_branch_on_merge
            if other.state == "open" and other.base_ref == pull.head_ref:
                other.state = "closed"
                self.closed_by_base_deletion += 1
        return tip

    def branch_sha(self, repo: RepoName, branch: str) -> str:
        return self.world.main_sha

    def commit_tree(self, repo: RepoName, sha: str) -> str:
        return tree_sha(self.world.tree_of_commit[sha])

    def merge_rules(self, repo: RepoName, branch: str) -> MergeRules:
        return MergeRules()

    def list_reviews(self, repo: RepoName, number: PrNumber) -> Sequence[ReviewRecord]:
        return []

    def check_outcomes(self, repo: RepoName, sha: str) -> dict[str, str]:
        return {}


# -- the world: main, the PRs, the executor ------------------------------------------------


class World:
    """What ``plan_sim.TimingExecutor`` reads (``now``, ``injected``, ``tree_of_commit``,
    ``outcomes``, ``own_test_minutes``) and main's history."""

    def __init__(self, engine: Engine, settings: Settings, nodes: int) -> None:
        self.engine, self.settings = engine, settings
        self.now = 0.0
        self.injected = Injected()
        self.own_test_minutes = 0.0
        self.main_tree: Tree = frozenset()
        self.main_sha = _sha("main", ())
        self.tree_of_commit: dict[str, Tree] = {self.main_sha: self.main_tree}
        self.main_trees: set[str] = {tree_sha(self.main_tree)}
        self.external = 0
        self.broken: set[tuple[int, int]] = set()  # (PR, version) that breaks test_fail_PR
        self.flaky: set[int] = set()
        self.github = SimGitHub(self)
        self.series_of: dict[int, str] = {}
        self.landing_comments = 0
        self.sets = load_test_sets()
        self.requests = job_service.job_requests(self.sets, settings)
        self.executor = TimingExecutor(self, tuple(f"gpu-{i:02d}" for i in range(nodes)))  # type: ignore[arg-type]
        registry = TaskRegistry()
        registry.add_task(PollJobs, poll_jobs.handle_poll_jobs)
        registry.add_task(Report, lambda ctx, task: None)  # reports are not what is measured
        registry.add_task(Integrate, self.integrate)
        landing_service.register_tasks(registry)
        resources = _Resources(settings, self.executor, self.sets)  # type: ignore[arg-type]
        resources._make_github = lambda: self.github  # type: ignore[assignment,return-value]
        self.worker = Worker(engine, settings, registry, resources=resources)
        with session_scope(engine) as session:
            repo = Repository(full_name=REPO, clone_url="sim://megatron")
            session.add(repo)
            session.flush()
            assert repo.id is not None
            self.repo_id = repo.id

    def move_main(self, tree: Tree) -> str:
        self.main_tree = tree
        self.main_sha = _sha("main", sorted(tree))
        self.tree_of_commit[self.main_sha] = tree
        self.main_trees.add(tree_sha(tree))
        return self.main_sha

    def push_to_main(self) -> None:
        """A commit on main that is not a landing (a revert, golden values)."""
        self.external += 1
        self.move_main(self.main_tree | {(-self.external, 1)})

    def outcomes(
        self, tree: Tree, config: tuple[str, str], *, run: int, targets: Sequence[str] = ()
    ) -> dict[str, str]:
        first = run == 1  # a flaky test fails a tree's first run only
        tests = {f"tests/unit_tests/test_{config[0]}.py::test_ok": "passed"}
        if config != FAILING_CONFIG:
            return tests
        merged = {pr for pr, _ in tree}
        for pr, version in self.broken:  # the tests exist on main, passing: the PR breaks them
            fails = (pr, version) in tree
            tests[f"tests/unit_tests/test_layer_{pr}.py::test_fail_{pr}"] = (
                "failed" if fails else "passed"
            )
        for pr in self.flaky:
            fails = pr in merged and first
            tests[f"tests/unit_tests/test_layer_{pr}.py::test_flaky_{pr}"] = (
                "failed" if fails else "passed"
            )
        return tests

    # -- the integrate task, on simulated trees ----------------------------------------------

    def integrate(self, ctx: ServiceContext, task: Integrate) -> None:
        """The runs the real ``integrate`` makes (a stack run per open PR of the series and
        the series run, or the one gate run of ``task.gate``), with the real test plan."""
        open_prs = [n for n, p in self.github.pulls.items() if p.state == "open"]
        if task.gate:
            if any(self.github.pulls[int(n)].state != "open" for n in task.gate):
                return
            runs = [("gate", f"gate-{_sha(self._heads(task.gate))[:16]}", list(task.gate), None)]
        else:
            chain = sorted(n for n in open_prs if self.series_of.get(n) == task.series_key)
            if not chain:
                return
            runs = [("stack", f"pr-{k}", chain[: i + 1], k) for i, k in enumerate(chain)]
            runs.append(("series", f"series-{task.series_key}", chain, None))
        with session_scope(self.engine) as session:
            made = [
                self._run(session, kind, name, prs, target, task.series_key)
                for kind, name, prs, target in runs
            ]
        states = {
            n: PrState(PrNumber(n), p.head_sha, p.state == "open", frozenset({p.head_sha}))
            for n, p in self.github.pulls.items()
        }
        test_and_plan(
            self.engine,
            self.settings,
            made,
            self.requests,
            states,
            repo_id=self.repo_id,
            base_sha=self.main_sha,
            base_tree=tree_sha(self.main_tree),
        )
        ctx.enqueue_task(PollJobs())

    def _heads(self, prs: Sequence[int]) -> dict[str, str]:
        return {str(n): self.github.pulls[int(n)].head_sha for n in prs}

    def _run(
        self,
        session: Session,
        kind: str,
        name: str,
        prs: Sequence[int],
        target: int | None,
        series_key: str | None,
    ) -> int:
        heads = self._heads(prs)
        run, new = find_or_add_run(
            session,
            repo_id=self.repo_id,
            kind=kind,
            name=name,
            series_key=series_key,
            target_pr=target,
            base_sha=self.main_sha,
            heads=heads,
        )
        assert run.id is not None
        if not new:
            return run.id
        merged = set(self.main_tree)
        for position, n in enumerate(prs, 1):
            merged.add((int(n), self.github.pulls[int(n)].version))
            commit = _sha("commit", sorted(merged))
            self.tree_of_commit[commit] = frozenset(merged)
            session.add(
                IntegrationStep(
                    run_id=run.id,
                    position=position,
                    pr_number=int(n),
                    head_sha=heads[str(n)],
                    outcome="clean",
                    tree=tree_sha(frozenset(merged)),
                    commit=commit,
                    conflicts=[],
                    own_test_files=[],
                )
            )
        run.final_tree = tree_sha(frozenset(merged))
        run.final_commit = _sha("commit", sorted(merged))
        session.add(run)
        return run.id

    # -- landings ---------------------------------------------------------------------------

    def open_series(self, arrival: SeriesArrival) -> None:
        parent = "main"
        for n in arrival.prs:
            self.github.pulls[n] = SimPull(n, f"pr-{n}", parent)
            self.series_of[n] = arrival.key
            parent = f"pr-{n}"

    def fix(self, pr: int) -> None:
        """A new push to the PR that broke a test: its next version does not."""
        self.github.pulls[pr].version += 1

    def land(self, key: str, prs: Sequence[int], *, up_to: int | None) -> int:
        heads = {n: self.github.pulls[n].head_sha for n in prs}
        with session_scope(self.engine) as session:
            row = landing_store.add_landing(
                session,
                repo_id=self.repo_id,
                series_key=key,
                up_to=up_to,
                requested_on=prs[-1],
                requested_by="maintainer",
                comment_id=self.next_landing_comment(),
                merge_method="squash",
                entries=[LandingEntry(n, heads[n]) for n in prs],
            )
            assert row.id is not None
            landing_id = row.id
            queue.enqueue(session, "land", Land(REPO, landing_id).to_payload())
        return landing_id

    def next_landing_comment(self) -> int:
        self.landing_comments += 1
        return self.landing_comments

    def make_due(self) -> None:
        """Every pending task due now: a waiting landing looks again at every event."""
        with session_scope(self.engine) as session:
            session.execute(
                update(Task)
                .where(col(Task.status) == "pending")
                .values(run_after=queue.utcnow() - timedelta(seconds=1))
            )
        poll_now(self.engine)  # and poll_jobs queued, if none is

    def gpu_hours(self) -> float:
        return executor_gpu_hours(self.executor)


# -- one policy --------------------------------------------------------------------------------


@dataclass
class SeriesState:
    arrival: SeriesArrival
    landed_at: float | None = None
    fix_at: float | None = None
    queued: set[int] = field(default_factory=set)  # PRs in an active landing


def simulate(policy: str, args: argparse.Namespace, traffic: Traffic, url: str) -> dict[str, Any]:
    migrate.upgrade(url)
    engine = make_engine(url)
    tmp = Path(args.tmp) / policy
    window = 1 if policy == "series" else args.window
    settings = load_settings(
        data_dir=tmp, test_plan_policy="series-first", landing=LandingSettings(window=window)
    )
    world = World(engine, settings, args.nodes)
    # The tests the PRs break or make flaky exist on main from the start, passing (a test main
    # lacks is a new test, whose failure is never rerun).
    world.broken = {(a.broken, 1) for a in traffic.series if a.broken is not None}
    world.flaky = {a.flaky for a in traffic.series if a.flaky is not None}
    states = {a.key: SeriesState(a) for a in traffic.series}
    arrivals = list(traffic.series)
    pushes = list(traffic.main_pushes)
    landing_series: dict[int, str] = {}
    end = args.hours * 3600.0
    limit = end * 4 + 86400.0
    rounds = 0
    next_day = 86400.0
    while True:
        rounds += 1
        if world.now >= next_day:  # progress on stderr, a line a simulated day
            next_day = (world.now // 86400.0 + 1) * 86400.0
            landed = sum(1 for pull in world.github.pulls.values() if pull.merged)
            print(
                f"  {policy}: day {int(world.now // 86400)} of {args.hours / 24:g}, "
                f"{landed} PRs landed",
                file=sys.stderr,
                flush=True,
            )
        while arrivals and arrivals[0].at <= world.now:
            arrival = arrivals.pop(0)
            world.open_series(arrival)
            _queue(world, policy, states[arrival.key], landing_series)
        while pushes and pushes[0] <= world.now:
            pushes.pop(0)
            world.push_to_main()
        for state in states.values():
            if state.fix_at is not None and state.fix_at <= world.now:
                state.fix_at = None
                broken = state.arrival.broken
                if broken is not None and world.github.pulls[broken].state == "open":
                    world.fix(broken)
                _queue(world, policy, state, landing_series)
        for _ in range(8):  # what one look leads to (an integration, a merge) is looked at now
            before = _snapshot(world)
            world.make_due()
            world.worker.run_until_idle()
            if _snapshot(world) == before:
                break
        _after_round(world, states, landing_series, args)
        if policy == "per-pr":  # a landed parent lets its child into the queue
            for state in states.values():
                if state.arrival.prs[0] in world.github.pulls:
                    _queue(world, policy, state, landing_series)
        active = _active(world)
        upcoming = [
            t
            for t in (
                arrivals[0].at if arrivals else None,
                pushes[0] if pushes else None,
                *(s.fix_at for s in states.values()),
                world.executor.next_end(),
            )
            if t is not None
        ]
        if not upcoming:
            if active:
                # Nothing runs and nothing arrives, yet landings wait: let them look again.
                world.now += settings.landing.recheck_s
                if world.now > limit:
                    raise AssertionError(f"landings {active} wait for nothing")
                continue
            break
        world.now = max(world.now, min(upcoming))
        if world.now > limit:
            raise AssertionError("the queue did not drain")
    result = _measure(policy, world, states, traffic)
    engine.dispose()
    return result


def _queue(world: World, policy: str, state: SeriesState, landing_series: dict[int, str]) -> None:
    """``/stackbot land`` for what of the series is still open and not queued."""
    open_prs = [n for n in state.arrival.prs if world.github.pulls[n].state == "open"]
    todo = [n for n in open_prs if n not in state.queued]
    if not todo or state.fix_at is not None:
        return
    if policy == "per-pr":
        # Today's practice: a child PR is based on its parent's branch (pull-request/<parent>)
        # and can enter GitHub's merge queue for main only once its parent merged and it was
        # retargeted. So one PR of a series at a time, the lowest open one, queued on its own
        # (its own full test run); its child is queued when it has landed. (Before: every PR of
        # the series queued at once, children tested speculatively on top of their parents,
        # which GitHub's merge queue cannot do for a stack.)
        if state.queued & set(open_prs):
            return  # the series' PR in the queue has not landed yet
        n = open_prs[0]
        landing_series[world.land(state.arrival.key, [n], up_to=n)] = state.arrival.key
        state.queued.add(n)
        return
    else:
        landing_series[world.land(state.arrival.key, todo, up_to=None)] = state.arrival.key
    state.queued |= set(todo)


def _snapshot(world: World) -> list[tuple[Any, ...]]:
    """What a look at the landings can change: their rows, and the jobs' states."""
    with Session(world.engine) as session:
        jobs = session.exec(select(Job.status)).all()
        return [(len(jobs), sorted(jobs).count("passed"), sorted(jobs).count("failed"))] + [
            (
                row.id,
                row.state,
                row.waiting_for,
                row.main_sha,
                tuple(e.get("state") for e in row.entries),
                row.tested_run_id,
            )
            for row in landing_store.landings_of_repo(session, repo_id=world.repo_id)
        ]


def _active(world: World) -> list[int]:
    with Session(world.engine) as session:
        return [
            row.id
            for row in landing_store.active_landings_of_repo(session, repo_id=world.repo_id)
            if row.id is not None
        ]


def _after_round(
    world: World,
    states: dict[str, SeriesState],
    landing_series: dict[int, str],
    args: argparse.Namespace,
) -> None:
    """Series wholly merged are landed (now); a stopped landing's series is fixed and landed
    again ``--fix-hours`` later (at once when nothing of it was broken)."""
    with Session(world.engine) as session:
        rows = landing_store.landings_of_repo(session, repo_id=world.repo_id)
        for row in rows:
            key = landing_series.get(row.id or 0)
            if key is None or row.state in (LandingState.WAITING, LandingState.MERGING):
                continue
            state = states[key]
            if row.state == LandingState.STOPPED and row.id is not None:
                landing_series.pop(row.id)
                for entry in landing_store.entries_of(row):
                    if entry.state != "merged":
                        state.queued.discard(entry.number)
                if state.fix_at is None:  # someone reads the account and acts on it
                    state.fix_at = world.now + args.fix_hours * 3600.0
            elif row.id is not None:
                landing_series.pop(row.id)
    for state in states.values():
        if state.landed_at is None and all(
            world.github.pulls.get(n) is not None and world.github.pulls[n].merged
            for n in state.arrival.prs
        ):
            state.landed_at = world.now


def _percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = max(0, math.ceil(q * len(ordered)) - 1)
    return round(ordered[index], 1)


def _measure(
    policy: str, world: World, states: dict[str, SeriesState], traffic: Traffic
) -> dict[str, Any]:
    with Session(world.engine) as session:
        rows = landing_store.landings_of_repo(session, repo_id=world.repo_id)
        runs = {r.id: r for r in session.exec(select(IntegrationRun)) if r.id is not None}
        jobs = list(session.exec(select(Job).order_by(col(Job.id))))
        findings = list(session.exec(select(TestFinding)))
        session.expunge_all()
    landed_prs = sum(1 for r in rows for e in landing_store.entries_of(r) if e.state == "merged")
    durations = [s.landed_at - s.arrival.at for s in states.values() if s.landed_at is not None]
    # Runs thrown away: jobs ran, the tree never became main's nor stopped a landing.
    original = [j for j in jobs if j.reused_from_job_id is None and j.kind != "baseline"]
    with_jobs = {j.integration_run_id for j in original}
    # A failing run counts as used when it is a stopped landing's own tree (what stopped it).
    stopped_trees = {
        frozenset(e.number for e in landing_store.entries_of(r))
        for r in rows
        if r.state == LandingState.STOPPED
    }
    failing_runs = {
        f.run_id
        for f in findings
        if f.failure_class == "new"
        and f.run_id in runs
        and frozenset(int(n) for n in runs[f.run_id].heads) in stopped_trees
    }
    thrown = [
        rid
        for rid in with_jobs
        if rid in runs and runs[rid].final_tree not in world.main_trees and rid not in failing_runs
    ]
    again = jobs_on_passed_trees(jobs)
    untested = 0
    unaccounted = 0
    for row in rows:
        entries = landing_store.entries_of(row)
        if row.state == LandingState.LANDED:
            run = runs.get(row.tested_run_id or 0)
            tested_heads = dict(run.heads) if run is not None else {}
            for entry in entries:
                wrong_head = tested_heads.get(str(entry.number)) != entry.head_sha
                if row.landed_tree != row.tested_tree or wrong_head:
                    untested += 1
        merged = [e for e in entries if e.state == "merged"]
        if row.state == LandingState.STOPPED and merged:
            for entry in entries:
                pull = world.github.pulls[entry.number]
                body = next((b for b in pull.comments.values() if b.startswith(LANDING_MARKER)), "")
                left_badly = entry.state != "merged" and (
                    entry.state != "not merged"
                    or pull.state != "open"
                    or not _based_well(world, pull.base_ref)
                )
                if "Landing stopped" not in body or left_badly:
                    unaccounted += 1
    # Merges by a landing of a head it did not test (the landing's own account, above) and
    # merges GitHub made into a branch other than main.
    untested += world.github.into_other_branch
    hours = max(world.now, 1.0) / 3600.0
    gpu = world.gpu_hours()
    return {
        "policy": policy,
        "series": len(traffic.series),
        "prs": sum(len(a.prs) for a in traffic.series),
        "landed_prs": landed_prs,
        "landed_series": sum(1 for s in states.values() if s.landed_at is not None),
        "prs_per_hour": round(landed_prs / hours, 3),
        "gpu_hours": round(gpu, 2),
        "gpu_hours_per_landed_pr": round(gpu / landed_prs, 3) if landed_prs else None,
        "land_to_landed_p50_s": _percentile(durations, 0.50),
        "land_to_landed_p95_s": _percentile(durations, 0.95),
        "runs_thrown_away": len(thrown),
        "partly_landed_unaccounted": unaccounted,
        "untested_merges": untested,
        "prs_closed_by_base_deletion": world.github.closed_by_base_deletion,
        "merge_group_jobs_on_tested_trees": again,
        "stopped_landings": sum(1 for r in rows if r.state == LandingState.STOPPED),
        "by_series_size": by_series_size(world, traffic, rows, runs, jobs),
        "jobs": len(original),
        "wall_s": round(world.now, 1),
    }


def jobs_on_passed_trees(jobs: Sequence[Job]) -> int:
    """``merge_group_jobs_on_tested_trees``, measured on the jobs the run made (in the order
    they were made): jobs that ran (not a reused result) on a tree and configuration that
    already had a passed job. Each landing's tree on the main it lands on is integrated again
    (the merge group's tree, with GitHub's merge queue not modelled): when that tree was tested,
    its jobs must all be reused, so anything counted here is a GPU job spent on a tested tree."""
    passed_before: set[tuple[str, str]] = set()
    again = 0
    for job in jobs:
        key = (job.tree_sha or "", job.config_hash or "")
        if job.reused_from_job_id is None and key in passed_before:
            again += 1
        if job.status == "passed":
            passed_before.add(key)
    return again


SIZE_BUCKETS = (("1", 1, 1), ("2-5", 2, 5), ("6-30", 6, 30))


def size_bucket(size: int) -> str:
    for name, low, high in SIZE_BUCKETS:
        if low <= size <= high:
            return name
    return f">{SIZE_BUCKETS[-1][2]}"


def by_series_size(
    world: World,
    traffic: Traffic,
    rows: Sequence[Any],
    runs: dict[int, IntegrationRun],
    jobs: Sequence[Job],
) -> dict[str, dict[str, Any]]:
    """GPU-hours and landed PRs per series size (1, 2-5, 6-30 PRs): a job's GPU-hours go to
    the series of the landing whose tree it tested (its run's series: a gate run is asked by
    the landing whose PRs come last in it, on top of the ones ahead); main's baseline jobs
    (no run) are ``main``, in no bucket."""
    size_of = {a.key: len(a.prs) for a in traffic.series}
    run_of_job = {f"stackbot-job-{j.id}": j.integration_run_id for j in jobs}
    out: dict[str, dict[str, Any]] = {
        name: {"series": 0, "prs": 0, "landed_prs": 0, "gpu_hours": 0.0}
        for name, _, _ in SIZE_BUCKETS
    }
    out["main"] = {"gpu_hours": 0.0}
    for arrival in traffic.series:
        bucket = out.setdefault(
            size_bucket(len(arrival.prs)),
            {"series": 0, "prs": 0, "landed_prs": 0, "gpu_hours": 0.0},
        )
        bucket["series"] += 1
        bucket["prs"] += len(arrival.prs)
    for row in rows:
        merged = sum(1 for e in landing_store.entries_of(row) if e.state == "merged")
        out[size_bucket(size_of.get(row.series_key, 1))]["landed_prs"] += merged
    for running in world.executor.jobs.values():
        shape = running.spec.shape
        hours = shape.nodes * shape.gpus_per_node * (running.end - running.start) / 3600.0
        run = runs.get(run_of_job.get(running.spec.job_id) or 0)
        key = run.series_key if run is not None else None
        if key is None or key not in size_of:
            out["main"]["gpu_hours"] += hours
            continue
        out[size_bucket(size_of[key])]["gpu_hours"] += hours
    for values in out.values():
        values["gpu_hours"] = round(values["gpu_hours"], 2)
        if "landed_prs" in values:
            landed = values["landed_prs"]
            values["gpu_hours_per_landed_pr"] = (
                round(values["gpu_hours"] / landed, 3) if landed else None
            )
    return out


def _based_well(world: World, base: str) -> bool:
    """An open PR is based on main or on the branch of an open PR."""
    if base == "main":
        return True
    return any(p.head_ref == base and p.state == "open" for p in world.github.pulls.values())


# -- the command line ----------------------------------------------------------------------


def _database(kind: str, tmp: Path, name: str, stack: ExitStack) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp / (name + '.db')}"
    from tests.support import postgres

    return stack.enter_context(postgres.fresh_database("stackbot_bench"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--hours", type=float, default=720.0, help="hours of traffic (default: 30 days)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policy", choices=[*POLICIES, "all"], default="all")
    parser.add_argument("--rate", type=float, default=8.0, help="merged PRs a day (a peak day: 3x)")
    parser.add_argument(
        "--sizes",
        choices=["skewed", "uniform"],
        default="uniform",
        help="series sizes: uniform over 1-30 (the default) or skewed (60%% of one PR)",
    )
    parser.add_argument("--fail-rate", type=float, default=0.15, help="series with a real failure")
    parser.add_argument("--flaky-rate", type=float, default=0.10, help="series with a flaky test")
    parser.add_argument("--fix-hours", type=float, default=2.0)
    parser.add_argument("--main-pushes", type=float, default=2.0, help="non-landing commits/day")
    parser.add_argument("--window", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.hours <= 0 or args.rate <= 0:
        parser.error("--hours and --rate must be more than 0")
    for name in ("fail_rate", "flaky_rate"):
        if not 0 <= getattr(args, name) <= 1:
            parser.error(f"--{name.replace('_', '-')} must be between 0 and 1")
    if args.window < 1 or args.nodes < 4:
        parser.error("--window must be at least 1 and --nodes at least 4")
    traffic = make_traffic(args)
    policies = list(POLICIES) if args.policy == "all" else [args.policy]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-landing-") as tmp:
        args.tmp = tmp
        for policy in policies:
            print(f"simulating {policy} ...", file=sys.stderr, flush=True)
            with ExitStack() as stack:
                url = _database(args.database, Path(tmp), policy.replace("-", "_"), stack)
                results.append(simulate(policy, args, traffic, url))
    add_ratios(results)
    for result in results:
        result.update(seed=args.seed, hours=args.hours)
        print(json.dumps(result, sort_keys=True) if args.json else _line(result))
    return 0


def add_ratios(results: Sequence[dict[str, Any]]) -> None:
    """Each policy's GPU-hours per landed PR over ``per-pr``'s, in all and per series size
    (``ratio_to_per_pr``), when ``per-pr`` ran too (the goal: at most 0.2 for speculative)."""
    base = next((r for r in results if r["policy"] == "per-pr"), None)
    if base is None:
        return

    def ratio(mine: float | None, theirs: float | None) -> float | None:
        return round(mine / theirs, 3) if mine is not None and theirs else None

    for result in results:
        result["ratio_to_per_pr"] = ratio(
            result["gpu_hours_per_landed_pr"], base["gpu_hours_per_landed_pr"]
        )
        for name, values in result["by_series_size"].items():
            if "gpu_hours_per_landed_pr" in values:
                values["ratio_to_per_pr"] = ratio(
                    values["gpu_hours_per_landed_pr"],
                    base["by_series_size"].get(name, {}).get("gpu_hours_per_landed_pr"),
                )


def _line(r: dict[str, Any]) -> str:
    return (
        f"{r['policy']:<12} landed {r['landed_prs']:>4} PRs  {r['gpu_hours_per_landed_pr']} "
        f"GPU-h/PR  p50 {r['land_to_landed_p50_s']} s  p95 {r['land_to_landed_p95_s']} s  "
        f"thrown away {r['runs_thrown_away']}  untested {r['untested_merges']}  "
        f"unaccounted {r['partly_landed_unaccounted']}  closed {r['prs_closed_by_base_deletion']}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
