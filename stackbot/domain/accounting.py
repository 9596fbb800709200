"""GPU accounting (issue 13 point 5): what a job cost and what reuse saved, pure.

A job's cost is nodes x GPUs per node x wall seconds (its ``shape`` is ``"NODESxGPUS"``). A
copy that reuses another job's result costs 0 of its own; what it saved is its source's cost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

_SHAPE = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$")

PURPOSES = ("baseline", "tree", "confirm", "bisect", "retry")


def gpus_of_shape(shape: str) -> int:
    """``"2x4"`` -> 8; a shape that is not NODESxGPUS is an error naming it."""
    match = _SHAPE.match(shape)
    if match is None:
        raise ValueError(f"job shape {shape!r} is not NODESxGPUS_PER_NODE, e.g. '2x4'")
    return int(match[1]) * int(match[2])


def gpu_seconds(shape: str, started: datetime | None, finished: datetime | None) -> float:
    """GPUs x wall seconds; 0 when the job never started (no start time) or the times are
    reversed."""
    if started is None or finished is None:
        return 0.0
    if (started.tzinfo is None) != (finished.tzinfo is None):  # SQLite reads back naive UTC
        started, finished = started.replace(tzinfo=None), finished.replace(tzinfo=None)
    wall = (finished - started).total_seconds()
    return gpus_of_shape(shape) * max(wall, 0.0)


@dataclass
class GpuHours:
    """GPU-hours spent, split by purpose, and GPU-hours that reuse did not spend."""

    by_purpose: dict[str, float] = field(default_factory=dict)
    saved_by_reuse: float = 0.0

    @property
    def total(self) -> float:
        return sum(self.by_purpose.values())

    def add(self, purpose: str, seconds: float) -> None:
        self.by_purpose[purpose] = self.by_purpose.get(purpose, 0.0) + seconds / 3600.0


def policy_saving_hours(
    untested_stacks: int, mean_seconds_by_config: dict[str, float], gpus_by_config: dict[str, int]
) -> float:
    """The estimate of what series-first did not spend: stacks it did not test x, for each
    configuration, that configuration's mean measured duration x its GPUs."""
    per_stack = sum(
        mean_seconds_by_config[c] * gpus_by_config.get(c, 0) for c in mean_seconds_by_config
    )
    return untested_stacks * per_stack / 3600.0


# -- one series' account: per push, per PR, and what reuse and the policy saved ----------------

# Job states whose duration is a measured run of the tests (an infra, timed-out or cancelled job
# says nothing about how long a configuration takes).
MEASURED_STATES = frozenset({"passed", "failed", "error"})


@dataclass(frozen=True)
class RunFacts:
    """What the account needs of one integration run of the series."""

    id: int
    kind: str  # stack | series
    target_pr: int | None
    base_sha: str
    heads: dict[str, str]  # PR number (as text) -> head sha
    final_tree: str | None
    created_at: datetime | None = None
    merged: frozenset[int] = frozenset()  # a series run: the PRs it merged (clean or resolved)


@dataclass(frozen=True)
class SpentRow:
    """GPU-seconds of a run's own (not reused) jobs of one purpose and configuration."""

    run_id: int
    purpose: str
    test_set: str
    shape: str
    status: str
    jobs: int
    seconds: float
    own_pr: int | None = None  # the PR whose own test files the test set runs (``own:N``)
    # PRs' own test files (``own``, batched; ``own:N``): their duration is their files', never a
    # configuration's measured mean
    own: bool = False


@dataclass(frozen=True)
class SavedRow:
    """A run's reused copies of one test set: their sources' GPU-seconds, which they saved."""

    run_id: int
    test_set: str
    jobs: int
    seconds: float
    own_pr: int | None = None


@dataclass
class Slice:
    """GPU-hours spent (by purpose) and saved by reuse by some jobs, and how many jobs."""

    hours: GpuHours = field(default_factory=GpuHours)
    jobs: int = 0  # jobs that ran (or will run): not reused copies
    reused: int = 0  # reused copies

    def spend(self, row: SpentRow) -> None:
        self.hours.add(row.purpose, row.seconds)
        self.jobs += row.jobs

    def save(self, row: SavedRow) -> None:
        self.hours.saved_by_reuse += row.seconds / 3600.0
        self.reused += row.jobs


@dataclass
class PushAccount:
    """One push of the series: its series run and the stack runs made with it (same base,
    same heads), what their jobs spent and what reuse and the policy saved."""

    series_run_id: int | None  # None: stack runs that no series run holds
    created_at: datetime | None
    base_sha: str
    changed: tuple[int, ...]  # PRs pushed (new or another head) since the previous push
    dropped: tuple[int, ...]  # PRs the previous push had and this one does not
    base_moved: bool
    first: bool  # the series' first integration
    run_ids: list[int] = field(default_factory=list)
    spent: Slice = field(default_factory=Slice)
    untested_stacks: int = 0
    saved_by_policy: float = 0.0  # GPU-hours


@dataclass
class SeriesAccount:
    """Every GPU-hour a series' runs spent, per push, per PR, on the shared series tree, and
    what reuse and the test plan policy saved."""

    total: Slice = field(default_factory=Slice)
    pushes: list[PushAccount] = field(default_factory=list)
    by_pr: dict[int, Slice] = field(default_factory=dict)
    shared: Slice = field(default_factory=Slice)  # the series tree's jobs, shared by its PRs
    untested_stacks: int = 0
    mean_seconds_by_config: dict[str, float] = field(default_factory=dict)
    gpus_by_config: dict[str, int] = field(default_factory=dict)
    saved_by_policy: float = 0.0  # GPU-hours

    @property
    def per_stack_hours(self) -> float:
        return policy_saving_hours(1, self.mean_seconds_by_config, self.gpus_by_config)


def account_series(
    runs: list[RunFacts],
    spent: list[SpentRow],
    saved: list[SavedRow],
    tested_trees: set[str],
) -> SeriesAccount:
    """Group a series' aggregated job rows by push and by PR, and estimate what the policy
    saved.

    A push is a series run; a stack run belongs to the first series run (by id) on the same
    base whose heads hold the stack's heads (the integration that made it). A job counts for a
    PR when it runs that PR's own test files alone (``own:N``, stored before own test files
    were batched) or belongs to that PR's stack run; the series run's other jobs, its batched
    own-files job (every PR's files in one) included, are shared by every PR its tree holds.

    The policy's saving: a stack run with no job whose PR the push's (tested) series tree
    merged was left to the series tree by ``series-first``; every-stack would have tested it,
    unless its tree was tested anyway (the top of a linear series is the series tree). Each
    such distinct tree counts once, at the mean measured duration of each configuration."""
    account = SeriesAccount()
    series = sorted((r for r in runs if r.kind == "series"), key=lambda r: r.id)
    pushes: dict[int | None, PushAccount] = {}
    previous: RunFacts | None = None
    for run in series:
        before = previous.heads if previous else {}
        pushes[run.id] = PushAccount(
            series_run_id=run.id,
            created_at=run.created_at,
            base_sha=run.base_sha,
            changed=tuple(sorted(int(n) for n, sha in run.heads.items() if before.get(n) != sha)),
            dropped=tuple(sorted(int(n) for n in before if n not in run.heads)),
            base_moved=previous is not None and previous.base_sha != run.base_sha,
            first=previous is None,
        )
        previous = run
    push_of: dict[int, int | None] = {run.id: run.id for run in series}
    for run in sorted(runs, key=lambda r: r.id):
        if run.kind == "series":
            continue
        holder = next(
            (
                s.id
                for s in series
                if s.base_sha == run.base_sha
                and all(s.heads.get(n) == sha for n, sha in run.heads.items())
            ),
            None,
        )
        push_of[run.id] = holder
        if holder is None and None not in pushes:
            pushes[None] = PushAccount(None, None, run.base_sha, (), (), False, False)
    for run in sorted(runs, key=lambda r: r.id):
        pushes[push_of[run.id]].run_ids.append(run.id)

    by_id = {run.id: run for run in runs}
    with_jobs = {row.run_id for row in spent} | {row.run_id for row in saved}

    def owner(run_id: int, own_pr: int | None) -> int | None:
        if own_pr is not None:
            return own_pr
        run = by_id.get(run_id)
        return run.target_pr if run is not None and run.kind != "series" else None

    measured: dict[str, tuple[float, int]] = {}
    for row in spent:
        account.total.spend(row)
        if row.run_id in by_id:
            pushes[push_of[row.run_id]].spent.spend(row)
        pr = owner(row.run_id, row.own_pr)
        (account.by_pr.setdefault(pr, Slice()) if pr is not None else account.shared).spend(row)
        if row.own_pr is None and not row.own and row.status in MEASURED_STATES and row.jobs:
            label = f"{row.test_set} {row.shape}"
            seconds, jobs = measured.get(label, (0.0, 0))
            measured[label] = (seconds + row.seconds, jobs + row.jobs)
            account.gpus_by_config[label] = gpus_of_shape(row.shape)
    for saved_row in saved:
        account.total.save(saved_row)
        if saved_row.run_id in by_id:
            pushes[push_of[saved_row.run_id]].spent.save(saved_row)
        pr = owner(saved_row.run_id, saved_row.own_pr)
        target = account.by_pr.setdefault(pr, Slice()) if pr is not None else account.shared
        target.save(saved_row)
    account.mean_seconds_by_config = {
        label: seconds / jobs / max(account.gpus_by_config[label], 1)
        for label, (seconds, jobs) in sorted(measured.items())
    }

    per_stack = account.per_stack_hours
    counted: set[str] = set()
    for run in sorted(runs, key=lambda r: r.id):
        holder = push_of[run.id]
        if run.kind == "series" or holder is None or run.id in with_jobs:
            continue
        series_run = by_id[holder]
        if (
            holder not in with_jobs
            or run.target_pr not in series_run.merged
            or not run.final_tree
            or run.final_tree in tested_trees
            or run.final_tree in counted
        ):
            continue
        counted.add(run.final_tree)
        pushes[holder].untested_stacks += 1
        pushes[holder].saved_by_policy += per_stack
    account.untested_stacks = len(counted)
    account.saved_by_policy = account.untested_stacks * per_stack
    account.pushes = [pushes[k] for k in sorted(pushes, key=lambda k: (k is None, k or 0))]
    account.by_pr = dict(sorted(account.by_pr.items()))
    return account
