"""The demo's ending: a maintainer lands the tested series with ``/stackbot land``.

Once every report is posted, ``maintainer-p`` reviews #8034, #8035 and #8748 (main's branch
protection asks for one approving review by someone with write access, and the check
``stackbot/tests: amax-group 1x4``, which stackbot posted on every PR of the tested tree), then
comments ``/stackbot land`` on #8748. :func:`follow_landing` tells what happens, read from the
stand-in (each PR's base branch and merge) and from stackbot's database (the landing, the jobs):
children retargeted before their parent merges, each PR merged bottom-up at its tested head,
main ending on the tree that was tested, #8050 left open and reported against the new main.

It then counts the GPU jobs that ran since ``/stackbot land`` (issue 24's carry-over figure):
those before the first merge are the landing's own (its tree was tested already: 0 expected),
those after it ran because the parents landed (main moved only by them: the children's trees
are the tested ones, their results are carried: 0 expected). Each is a job row that did not
reuse another's result.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlmodel import Session, col, select

from stackbot.db.engine import make_engine
from stackbot.db.models import IntegrationRun, Job, Landing
from stackbot.db.models._columns import utcnow
from stackbot.demo import scenario
from stackbot.domain.landing_text import LANDING_MARKER
from stackbot.domain.report import MARKER
from stackbot.domain.report_view import test_set_words
from stackbot.standin import hosting

Say = Callable[[str], None]
FINISHED_JOBS = ("passed", "failed", "error", "timeout", "infra", "cancelled")


@dataclass
class LandingOutcome:
    """What the landing did, and the GPU jobs it and the moved main cost."""

    ok: bool
    reason: str = ""
    state: str = ""
    merged: list[int] = field(default_factory=list)
    closed_unmerged: list[int] = field(default_factory=list)
    retargeted: dict[int, str] = field(default_factory=dict)  # PR -> the base it left
    main_sha: str = ""
    main_tree: str = ""
    tested_tree: str = ""
    landing_comment: str = ""
    open_report: dict[int, str] = field(default_factory=dict)  # #8050's sticky comment
    jobs_before_first_merge: list[Job] = field(default_factory=list)  # GPU jobs
    jobs_after_first_merge: list[Job] = field(default_factory=list)  # GPU jobs
    carried: int = 0  # results reused (no GPU job) since `/stackbot land`
    elapsed_s: float = 0.0
    first_job_id: int = 0  # the first job row made after `/stackbot land`
    refresh_jobs: list[Job] = field(default_factory=list)  # GPU jobs of the refreshed heads
    refresh_reused: int = 0


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _job_words(job: Job, runs: Mapping[int, IntegrationRun]) -> str:
    run = runs.get(job.integration_run_id or -1)
    if job.kind == "baseline":
        tree = f"main {job.commit_sha[:7]} (baseline)"
    elif run is not None and run.kind == "series":
        tree = f"the series tree {job.tree_sha[:7]}"
    elif run is not None:
        tree = f"#{run.target_pr}'s stack {job.tree_sha[:7]}"
    else:
        tree = f"tree {job.tree_sha[:7]}"
    return f"{test_set_words(job.test_set)} {job.shape} on {tree}"


def follow_landing(
    stack: object,
    database_url: str,
    *,
    first_job_id: int,
    tell: Callable[[str], None],
    show: Callable[[str, str], None],
    observe: Callable[[], tuple[str, str, bool]],
    timeout_s: float,
) -> LandingOutcome:
    """Follow the landing asked on the stand-in of ``stack`` (a DemoStack) until it ended and
    stackbot followed the new main (no task busy, every job finished, #8050 reported against
    the new main). ``tell`` says a story line, ``show`` draws the progress line, ``observe``
    tells stackbot's own events and gives its progress line and whether it is idle."""
    control = stack.github.control  # type: ignore[attr-defined]
    bare = control.repo(scenario.REPO).bare_path
    engine = make_engine(database_url)
    started = time.monotonic()
    deadline = started + timeout_s
    outcome = LandingOutcome(ok=False, first_job_id=first_job_id)
    told: set[tuple[object, ...]] = set()
    bases = {n: control.pull(scenario.REPO, n).base_ref for n in scenario.TESTED_PRS}
    try:
        while True:
            with Session(engine) as session:
                row = session.exec(select(Landing).order_by(col(Landing.id).desc())).first()
                if row is not None:
                    session.expunge(row)
            if row is not None:
                _tell_start(row, told, tell)
            pulls = {n: control.pull(scenario.REPO, n) for n in scenario.TESTED_PRS}
            for number, pull in pulls.items():
                if pull.base_ref != bases[number] and ("retarget", number) not in told:
                    told.add(("retarget", number))
                    outcome.retargeted[number] = bases[number]
                    tell(
                        f"#{number} retargeted onto {pull.base_ref} (it was based on "
                        f"{bases[number]}, the branch of the PR below it, which GitHub deletes "
                        "when that PR merges)"
                    )
                if pull.state == "closed" and not pull.merged and ("closed", number) not in told:
                    told.add(("closed", number))
                    outcome.closed_unmerged.append(number)
                    tell(f"#{number} was closed without merging (its base branch was deleted)")
            if row is not None:
                _tell_merges(row, told, tell)
            key, line, idle = observe()  # stackbot's own story (replies, runs, jobs) too
            seconds = time.monotonic() - started
            active = row is None or row.state in ("waiting", "merging")
            if row is not None and row.state in ("stopped", "cancelled"):
                main_sha = hosting.resolve(bare, "refs/heads/main") or ""
                outcome.state = row.state
                outcome.elapsed_s = seconds
                _finish(outcome, engine, control, row, main_sha, _sticky(control), first_job_id)
                return outcome
            if active:
                merged = sum(1 for e in (row.entries if row else []) if e.get("state") == "merged")
                total = len(row.entries) if row else len(scenario.TESTED_PRS)
                what = "waiting for its tree's tests" if row and row.state == "waiting" else ""
                what = what or f"{merged} of {total} PRs merged"
                show(f"landing {what}", f"landing the series: {what}, {seconds:.0f} s")
            elif row is not None:
                main_sha = hosting.resolve(bare, "refs/heads/main") or ""
                reports = _sticky(control)
                reported = main_sha[:7] in reports.get(8050, "")
                if not reported:
                    line = f"{line}; #8050 to be reported against main {main_sha[:7]}"
                show(f"after landing {key} {reported}", f"following the new main: {line}")
                if idle and reported:
                    outcome.state = row.state
                    outcome.elapsed_s = seconds
                    _finish(outcome, engine, control, row, main_sha, reports, first_job_id)
                    return outcome
            if time.monotonic() > deadline:
                outcome.reason = (
                    f"the landing did not end, or #8050 was not reported on the new main, within "
                    f"{timeout_s:.0f} s (landing: {row.state if row else 'not queued'})"
                )
                return outcome
            time.sleep(1.0)
    finally:
        engine.dispose()


def _tell_start(row: Landing, told: set[tuple[object, ...]], tell: Callable[[str], None]) -> None:
    """What the landing takes, what it waits for, when it starts merging."""
    order = " → ".join(f"#{e['number']}" for e in row.entries)
    if ("queued", row.id) not in told:
        told.add(("queued", row.id))
        landed = {int(e["number"]) for e in row.entries}
        left = [n for n in scenario.REPORTED_PRS if n not in landed]
        rest = "".join(
            f"; #{n} is not in it: the tested series tree left it out (its conflict), it stays open"
            for n in left
        )
        tell(f"the landing takes {order}, bottom-up{rest}")
    if row.state == "waiting" and row.waiting_for and ("wait", row.waiting_for) not in told:
        told.add(("wait", row.waiting_for))
        tell(f"the landing waits: {row.waiting_for}")
    if row.state != "waiting" and ("merging", row.id) not in told:
        told.add(("merging", row.id))
        tree = f" {row.tested_tree[:7]}" if row.tested_tree else ""
        on = f" on main {row.main_sha[:7]}" if row.main_sha else ""
        tell(f"the tree to land{tree} was tested green{on}: merging bottom-up, nothing re-run")


def _tell_merges(row: Landing, told: set[tuple[object, ...]], tell: Callable[[str], None]) -> None:
    """Each PR merged, then how the landing ended."""
    order = " → ".join(f"#{e['number']}" for e in row.entries)
    for entry in row.entries:
        number = entry["number"]
        if entry.get("state") == "merged" and ("merged", number) not in told:
            told.add(("merged", number))
            into = f" (main is now {entry['merge_sha'][:7]})" if entry.get("merge_sha") else ""
            tell(f"#{number} merged at its tested head {str(entry['head_sha'])[:7]}{into}")
    if row.state in ("landed", "stopped", "cancelled") and ("end", row.id) not in told:
        told.add(("end", row.id))
        if row.state == "landed":
            same = row.landed_tree == row.tested_tree and row.landed_tree is not None
            holds = "the tree that was tested" if same else "NOT the tree that was tested"
            tell(f"landed {order} on main: main now holds {holds}")
        else:
            tell(f"the landing {row.state}: {row.reason or 'no reason recorded'}")


def _sticky(control: object) -> dict[int, str]:
    found: dict[int, str] = {}
    for number in scenario.REPORTED_PRS:
        for comment in control.comments(scenario.REPO, number):  # type: ignore[attr-defined]
            if comment.body.startswith(MARKER):
                found[number] = comment.body
    return found


def _finish(
    outcome: LandingOutcome,
    engine: object,
    control: object,
    row: Landing,
    main_sha: str,
    reports: Mapping[int, str],
    first_job_id: int,
) -> None:
    bare = control.repo(scenario.REPO).bare_path  # type: ignore[attr-defined]
    pulls = {n: control.pull(scenario.REPO, n) for n in scenario.REPORTED_PRS}  # type: ignore[attr-defined]
    outcome.merged = [int(e["number"]) for e in row.entries if pulls[int(e["number"])].merged]
    outcome.main_sha = main_sha
    outcome.main_tree = hosting.commit_info(bare, main_sha).tree
    outcome.tested_tree = row.tested_tree or ""
    outcome.open_report = {n: reports[n] for n in reports if pulls[n].state == "open"}
    comments = control.comments(scenario.REPO, row.requested_on)  # type: ignore[attr-defined]
    outcome.landing_comment = next(
        (c.body for c in comments if c.body.startswith(LANDING_MARKER)), ""
    )
    merged_at = [pulls[n].merged_at for n in outcome.merged if pulls[n].merged_at]
    first_merge = datetime.fromtimestamp(min(merged_at), UTC) if merged_at else utcnow()
    with Session(engine) as session:  # type: ignore[arg-type]
        jobs = list(session.exec(select(Job).where(col(Job.id) >= first_job_id)).all())
        session.expunge_all()
    ran = [j for j in jobs if j.reused_from_job_id is None]
    outcome.carried = len(jobs) - len(ran)
    outcome.jobs_before_first_merge = [j for j in ran if _aware(j.created_at) < first_merge]
    outcome.jobs_after_first_merge = [j for j in ran if _aware(j.created_at) >= first_merge]
    problems = []
    if row.state != "landed":
        problems.append(f"the landing {row.state}: {row.reason}")
    if outcome.merged != [int(e["number"]) for e in row.entries]:
        problems.append("not every PR of the landing merged")
    if outcome.closed_unmerged:
        problems.append(f"closed by a deleted base: {outcome.closed_unmerged}")
    if outcome.main_tree != outcome.tested_tree:
        problems.append("main does not hold the tested tree")
    outcome.ok = not problems
    outcome.reason = "; ".join(problems)


def jobs_between(database_url: str, first: int, end: int) -> tuple[list[Job], int]:
    """The GPU jobs (job rows that reused no result) with ids in ``first`` … ``end - 1``, and
    how many rows reused a result instead."""
    engine = make_engine(database_url)
    try:
        with Session(engine) as session:
            rows = list(
                session.exec(select(Job).where(col(Job.id) >= first, col(Job.id) < end)).all()
            )
            session.expunge_all()
    finally:
        engine.dispose()
    ran = [j for j in rows if j.reused_from_job_id is None]
    return ran, len(rows) - len(ran)


def gpu_job_lines(outcome: LandingOutcome, runs: Mapping[int, IntegrationRun]) -> list[str]:
    """The carry-over figures, in words, with each GPU job named when there is one."""
    before, after = outcome.jobs_before_first_merge, outcome.jobs_after_first_merge
    parents = ", ".join(f"#{n}" for n in outcome.merged[:-1]) or "the first PR"
    refresh = outcome.refresh_jobs
    lines = [
        f"GPU jobs for the refreshed branches before landing: {len(refresh)}"
        + f" — the series tree did not change ({outcome.refresh_reused} results reused)",
        *(
            [
                "  these ran while #8748's new head waited for a vetter's `/ok to test`: stackbot "
                "then tests the approved PRs' own stacks, so they are not held back"
            ]
            if refresh
            else []
        ),
        *(f"    ran: {_job_words(job, runs)} (job {job.id})" for job in refresh),
        f"GPU jobs since `/stackbot land`: {len(before) + len(after)}",
        f"  for the landing itself (before its first merge): {len(before)}"
        + (" — its tree was tested already" if not before else ""),
        f"  after {parents} landed, main otherwise unchanged: {len(after)}"
        + (
            (
                f" — the merged trees equal the tested trees: {outcome.carried} results carried"
                if outcome.carried
                else " — each child merged at its tested head onto the tested tree: nothing "
                "needed testing again"
            )
            if not after
            else ""
        ),
    ]
    for job in [*before, *after]:
        lines.append(f"    ran: {_job_words(job, runs)} (job {job.id})")
    return lines


def runs_by_id(database_url: str) -> dict[int, IntegrationRun]:
    engine = make_engine(database_url)
    try:
        with Session(engine) as session:
            runs = {r.id or 0: r for r in session.exec(select(IntegrationRun)).all()}
            session.expunge_all()
        return runs
    finally:
        engine.dispose()


def last_job_id(database_url: str) -> int:
    engine = make_engine(database_url)
    try:
        with Session(engine) as session:
            ids: Sequence[int | None] = session.exec(select(Job.id)).all()
        return max((i for i in ids if i is not None), default=0)
    finally:
        engine.dispose()
