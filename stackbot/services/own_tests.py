"""A PR's own test files (issue 13): found with git when a run is stored, run as ``own:N`` jobs
beside the configured test sets, and compared with main file by file for the PR's comment.

- :func:`own_test_files`: the test files under the configured roots that a PR's head adds or
  modifies relative to its base (the merge-base with each parent PR's head, or with the run's
  base commit for a PR without parents); deleted files are not its own tests. Stored on each
  merged step (``integration_steps.own_test_files``).
- :func:`run_requests` / :func:`baseline_requests`: the jobs they make, one per PR and shape
  (the files whose rule names that shape), and main's baseline of the files main has.
- :func:`own_tests_views`: what the PR's comment says of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlmodel import Session

from gpu_jobs.testsets import OwnTests, own_test_set_name
from stackbot.adapters.git import GitRepository
from stackbot.db import integration_store
from stackbot.db.models import IntegrationRun, IntegrationStep, Job
from stackbot.db.models.jobs import NOT_REUSABLE_STATES
from stackbot.domain.integration import RunKind, StepOutcome
from stackbot.domain.own_tests import (
    ADDED,
    MODIFIED,
    OwnFile,
    OwnFileView,
    OwnTestsView,
    counts_by_file,
)
from stackbot.domain.types import PrNumber, Sha
from stackbot.services import read_batch
from stackbot.services.jobs import JobRequest

_MERGED = (StepOutcome.CLEAN, StepOutcome.RESOLVED)


def own_test_files(
    repo: GitRepository, own: OwnTests, *, head: str, bases: Sequence[str], main_sha: str
) -> list[OwnFile]:
    """The test files ``head`` adds or modifies relative to every one of ``bases`` (its
    parents' heads, or main), each compared at its merge-base with ``head``, and that main
    does not already hold as they are at ``head``."""
    head_tree = repo.tree_of(Sha(head))
    main_tree = repo.tree_of(Sha(main_sha))
    found: dict[str, str] | None = None
    for base in bases or (main_sha,):
        fork = repo.merge_base(Sha(head), Sha(base)) or Sha(base)
        base_tree = repo.tree_of(fork)
        changed: set[str] = set()
        for root in own.roots:
            changed |= repo.changed_paths(base_tree, head_tree, under=root)
        files = {
            path: MODIFIED if repo.blob_at(base_tree, path) else ADDED
            for path in changed
            if own.is_test_file(path) and repo.blob_at(head_tree, path)
        }
        found = files if found is None else {p: s for p, s in found.items() if p in files}
    # A file main now has exactly as the head has it is not the PR's change: it came in with a
    # parent that landed (a squash merge leaves the child's fork point behind main). Its own
    # test files stay those it changes itself, so its tree's jobs stay the ones tested before.
    found = {
        path: status
        for path, status in (found or {}).items()
        if repo.blob_at(main_tree, path) != repo.blob_at(head_tree, path)
    }
    return [
        OwnFile(path, status, repo.blob_at(main_tree, path) is not None)
        for path, status in sorted(found.items())
    ]


def record_own_test_files(
    session: Session,
    repo: GitRepository,
    own: OwnTests | None,
    run: IntegrationRun,
    *,
    depends_on: Mapping[PrNumber, Sequence[PrNumber]],
) -> None:
    """Store each merged step's own test files (its PR's, relative to its parents in the run)."""
    if own is None or run.id is None:
        return
    heads = {int(pr): sha for pr, sha in run.heads.items()}
    for step in integration_store.steps_of(session, run_id=run.id):
        if step.outcome not in _MERGED:
            continue
        parents = [heads[p] for p in depends_on.get(PrNumber(step.pr_number), ()) if p in heads]
        files = own_test_files(
            repo, own, head=step.head_sha, bases=parents or [run.base_sha], main_sha=run.base_sha
        )
        step.own_test_files = [f.to_json() for f in files]
        session.add(step)
    session.flush()


def _files_of(step: IntegrationStep) -> list[OwnFile]:
    return [OwnFile.from_json(item) for item in step.own_test_files or ()]


def _tested_steps(run: IntegrationRun, steps: Sequence[IntegrationStep]) -> list[IntegrationStep]:
    """The steps whose own files a run tests: every merged PR of a series run; the target PR of
    a stack run (its parents' files are tested on their own stacks)."""
    merged = [s for s in steps if s.outcome in _MERGED and s.own_test_files]
    if run.kind == RunKind.STACK and run.target_pr is not None:
        return [s for s in merged if s.pr_number == run.target_pr]
    return merged


def _requests(own: OwnTests, pr: int, paths: Sequence[str]) -> list[JobRequest]:
    shapes: list[str] = []
    for path in paths:
        shapes.extend(str(s) for s in own.shapes_for(path) if str(s) not in shapes)
    requests = []
    for shape in shapes:
        targets = tuple(p for p in paths if shape in {str(s) for s in own.shapes_for(p)})
        requests.append(JobRequest(own.test_set(pr, targets, shape), shape))
    return requests


def run_requests(
    own: OwnTests | None, run: IntegrationRun, steps: Sequence[IntegrationStep]
) -> list[JobRequest]:
    """The jobs of the PRs' own test files on the run's tree."""
    if own is None:
        return []
    return [
        request
        for step in _tested_steps(run, steps)
        for request in _requests(own, step.pr_number, [f.path for f in _files_of(step)])
    ]


def baseline_requests(
    own: OwnTests | None, run: IntegrationRun, steps: Sequence[IntegrationStep]
) -> list[JobRequest]:
    """Main's jobs for the own test files main has (a new file has nothing to compare with)."""
    if own is None:
        return []
    requests = []
    for step in _tested_steps(run, steps):
        files = _files_of(step)
        for request in _requests(own, step.pr_number, [f.path for f in files]):
            on_main = [t for t in request.test_set.megatron_targets if _on_main(files, t)]
            if on_main:
                request = JobRequest(
                    own.test_set(step.pr_number, tuple(on_main), request.shape), request.shape
                )
                requests.append(request)
    return requests


def _on_main(files: Sequence[OwnFile], path: str) -> bool:
    return any(f.path == path and f.on_main for f in files)


# -- the PR's comment ---------------------------------------------------------------------------


def own_tests_views(
    session: Session,
    number: int,
    runs: Sequence[tuple[IntegrationRun | None, str]],
) -> tuple[OwnTestsView, ...]:
    """PR ``number``'s own test files on each of ``runs`` (a run and how the comment names it)
    that tested them, compared with main (like the Tests section: the stack, then the series)."""
    found = [view for run, where in runs if (view := own_tests_view(session, number, run, where))]
    return tuple(found)


def _merged_steps(session: Session, run_id: int) -> dict[int, IntegrationStep]:
    """Each PR's first merged step of the run."""
    found: dict[int, IntegrationStep] = {}
    for step in read_batch.steps_of(session, run_id):
        if step.outcome in _MERGED:
            found.setdefault(step.pr_number, step)
    return found


def _tree_jobs_by_set(session: Session, run_id: int) -> dict[str, list[Job]]:
    """The run's first-attempt jobs on its own tree (not bisection steps), by test set."""
    found: dict[str, list[Job]] = {}
    for job in read_batch.jobs_of_run(session, run_id):
        if job.step_position is None and job.attempt == 1:
            found.setdefault(job.test_set, []).append(job)
    return found


def own_tests_view(
    session: Session, number: int, run: IntegrationRun | None, where: str
) -> OwnTestsView | None:
    """PR ``number``'s own test files on ``run``, compared with main (None: not tested there)."""
    name = own_test_set_name(number)
    if run is None or run.id is None:
        return None
    run_id = run.id
    step = read_batch.memo(
        session, ("merged steps", run_id), lambda: _merged_steps(session, run_id)
    ).get(number)
    jobs = read_batch.memo(
        session, ("tree jobs by set", run_id), lambda: _tree_jobs_by_set(session, run_id)
    ).get(name, [])
    if step is None or not step.own_test_files or not jobs:
        return None
    newest: dict[str, Job] = {}
    for job in sorted(jobs, key=lambda j: j.id or 0):
        newest[job.shape] = job  # an infra retry supersedes the job it retries
    baselines: dict[str, Job] = {}
    for job in read_batch.baselines_on(session, run.repo_id, run.base_sha):
        if job.test_set == name and job.status not in NOT_REUSABLE_STATES:
            baselines[job.shape] = job
    files = _files_of(step)
    views = []
    for shape, job in sorted(newest.items()):
        here = _outcomes(session, job)
        base = baselines.get(shape)
        main = _outcomes(session, base) if base is not None else None
        targets = list(job.targets or ())
        here_counts = counts_by_file(here, targets) if here is not None else {}
        main_counts = counts_by_file(main, targets) if main is not None else {}
        for file in files:
            if file.path not in targets:
                continue  # the file runs on other shapes
            ran_on_main = base is not None and file.path in (base.targets or ())
            views.append(
                OwnFileView(
                    path=file.path,
                    status=file.status,
                    shape=shape,
                    job_status=job.status,
                    here=here_counts.get(file.path),
                    on_main=file.on_main,
                    main=main_counts.get(file.path) if ran_on_main else None,
                    main_status=base.status if base is not None and ran_on_main else None,
                    error=(job.error or "").strip().splitlines()[-1][:200] if job.error else None,
                )
            )
    views.sort(key=lambda v: (v.path, v.shape))
    return OwnTestsView(number, where, run.final_commit, run.base_sha, tuple(views))


def _outcomes(session: Session, job: Job) -> dict[str, str] | None:
    """The finished job's outcomes per node id (None while it runs, or when it recorded how
    many tests did what but not which)."""
    outcomes = read_batch.outcomes_of(session, job)
    return dict(outcomes.tests) if outcomes is not None and outcomes.per_test else None
