"""A PR's own test files (issue 13): found with git when a run is stored, run as one ``own`` job
per shape and tree (issue 24)
beside the configured test sets, and compared with main file by file for the PR's comment.

- :func:`own_test_files`: the test files under the configured roots that a PR's head adds or
  modifies relative to its base (the merge-base with each parent PR's head, or with the run's
  base commit for a PR without parents); deleted files are not its own tests. Stored on each
  merged step (``integration_steps.own_test_files``).
- :func:`run_requests` / :func:`baseline_requests`: the jobs they make on a tree: one per shape
  (the test set ``own``, its targets the files of every PR in the tree that run on that shape),
  and main's baseline of the files main has.
- :func:`files_for_pr`: which of a batched job's targets are one PR's (its results are split
  out of the job by file for that PR's comment, check run, retest and pages).
- :func:`own_tests_views`: what the PR's comment says of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlmodel import Session

from gpu_jobs.testsets import OWN_TEST_SET, OwnTests, is_own_test_set, own_test_set_pr
from stackbot.adapters.git import GitRepository
from stackbot.db import integration_store
from stackbot.db.models import IntegrationRun, IntegrationStep, Job
from stackbot.db.models.jobs import NOT_REUSABLE_STATES
from stackbot.domain.integration import StepOutcome
from stackbot.domain.own_tests import (
    ADDED,
    MODIFIED,
    OwnFile,
    OwnFileView,
    OwnTestsView,
    counts_by_file,
    owners_of,
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


def _tested_steps(steps: Sequence[IntegrationStep]) -> list[IntegrationStep]:
    """The steps whose own files a run's tree tests: every merged PR's, in a series run and in a
    stack run alike. A stack's tree holds its ancestors' new test files, and a child can break
    them; under every-stack nothing else would run them on the child's tree."""
    return [s for s in steps if s.outcome in _MERGED and s.own_test_files]


def _requests(own: OwnTests, paths: Sequence[str]) -> list[JobRequest]:
    """One request per shape the files need, its targets every file that runs on it."""
    shapes: list[str] = []
    for path in paths:
        shapes.extend(str(s) for s in own.shapes_for(path) if str(s) not in shapes)
    requests = []
    for shape in shapes:
        targets = tuple(p for p in paths if shape in {str(s) for s in own.shapes_for(p)})
        requests.append(JobRequest(own.test_set(targets, shape), shape))
    return requests


def _tree_files(steps: Sequence[IntegrationStep]) -> list[OwnFile]:
    """The own test files of every PR the run's tree holds, each path once (sorted: the same
    files make the same job whichever run asks)."""
    found: dict[str, OwnFile] = {}
    for step in _tested_steps(steps):
        for file in _files_of(step):
            known = found.get(file.path)
            found[file.path] = (
                file
                if known is None
                else OwnFile(file.path, known.status, known.on_main or file.on_main)
            )
    return [found[path] for path in sorted(found)]


def run_requests(
    own: OwnTests | None, run: IntegrationRun, steps: Sequence[IntegrationStep]
) -> list[JobRequest]:
    """The jobs of the own test files of every PR in the run's tree: one per shape."""
    if own is None:
        return []
    return _requests(own, [f.path for f in _tree_files(steps)])


def baseline_requests(
    own: OwnTests | None, run: IntegrationRun, steps: Sequence[IntegrationStep]
) -> list[JobRequest]:
    """Main's jobs for the own test files main has (a new file has nothing to compare with):
    one per shape, like the tree's."""
    if own is None:
        return []
    files = _tree_files(steps)
    on_main = {f.path for f in files if f.on_main}
    requests = []
    for request in _requests(own, [f.path for f in files]):
        targets = tuple(t for t in request.test_set.megatron_targets if t in on_main)
        if targets:
            requests.append(JobRequest(own.test_set(targets, request.shape), request.shape))
    return requests


def owners_of_steps(steps: Sequence[IntegrationStep]) -> dict[str, tuple[int, ...]]:
    """Each own test file of a run's tree → the PRs it belongs to."""
    by_pr: dict[int, list[str]] = {}
    for step in _tested_steps(steps):
        by_pr.setdefault(step.pr_number, []).extend(f.path for f in _files_of(step))
    return owners_of(by_pr)


def run_owners(session: Session, run_id: int) -> dict[str, tuple[int, ...]]:
    """:func:`owners_of_steps` of a stored run, read once per batch."""
    return read_batch.memo(
        session,
        ("own owners", run_id),
        lambda: owners_of_steps(read_batch.steps_of(session, run_id)),
    )


def files_for_pr(
    test_set: str, targets: Sequence[str] | None, owners: Mapping[str, Sequence[int]], pr: int
) -> tuple[str, ...]:
    """The targets of an own-files job that are PR ``pr``'s files: of the batched ``own`` job,
    those ``owners`` gives the PR; of a job stored before batching (``own:N``), all of them when
    N is the PR, else none."""
    named = own_test_set_pr(test_set)
    if named is not None:
        return tuple(targets or ()) if named == pr else ()
    if test_set != OWN_TEST_SET:
        return ()
    return tuple(t for t in targets or () if pr in owners.get(t, ()))


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


def _tree_jobs(session: Session, run_id: int) -> list[Job]:
    """The run's first-attempt jobs of own test files on its own tree (not bisection steps)."""
    return [
        job
        for job in read_batch.jobs_of_run(session, run_id)
        if job.step_position is None and job.attempt == 1 and is_own_test_set(job.test_set)
    ]


def own_tests_view(
    session: Session, number: int, run: IntegrationRun | None, where: str
) -> OwnTestsView | None:
    """PR ``number``'s own test files on ``run``, compared with main (None: not tested there).
    Its files' results are split out of the tree's batched jobs by file."""
    if run is None or run.id is None:
        return None
    run_id = run.id
    step = read_batch.memo(
        session, ("merged steps", run_id), lambda: _merged_steps(session, run_id)
    ).get(number)
    if step is None or not step.own_test_files:
        return None
    owners = run_owners(session, run_id)
    jobs = [
        job
        for job in read_batch.memo(
            session, ("own tree jobs", run_id), lambda: _tree_jobs(session, run_id)
        )
        if files_for_pr(job.test_set, job.targets, owners, number)
    ]
    if not jobs:
        return None
    newest: dict[str, Job] = {}
    for job in sorted(jobs, key=lambda j: j.id or 0):
        newest[job.shape] = job  # an infra retry (or a retest) supersedes the job before it
    baselines = [
        job
        for job in read_batch.baselines_on(session, run.repo_id, run.base_sha)
        if is_own_test_set(job.test_set) and job.status not in NOT_REUSABLE_STATES
    ]
    files = _files_of(step)
    views = []
    for shape, job in sorted(newest.items()):
        here = _outcomes(session, job)
        targets = list(files_for_pr(job.test_set, job.targets, owners, number))
        here_counts = counts_by_file(here, targets) if here is not None else {}
        for file in files:
            if file.path not in targets:
                continue  # the file runs on other shapes
            # main's newest job of this shape that ran the file
            base = next(
                (
                    b
                    for b in reversed(baselines)
                    if b.shape == shape and file.path in (b.targets or ())
                ),
                None,
            )
            main = _outcomes(session, base) if base is not None else None
            main_counts = counts_by_file(main, [file.path]) if main is not None else {}
            views.append(
                OwnFileView(
                    path=file.path,
                    status=file.status,
                    shape=shape,
                    job_status=job.status,
                    here=here_counts.get(file.path),
                    on_main=file.on_main,
                    main=main_counts.get(file.path),
                    main_status=base.status if base is not None else None,
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
