"""A PR's test rows and the series run's findings in words: what the sticky comment
(:mod:`stackbot.domain.report`) and the check runs (:mod:`stackbot.domain.report_checks`) both
say about one row or one failing test, and the small formatting helpers they share."""

from __future__ import annotations

from stackbot.domain.comparison import Comparison
from stackbot.domain.report_view import FindingView, PrReportView, ReusedFrom, TestRow
from stackbot.domain.retries import note_markdown
from stackbot.domain.verdict_kinds import ROW_ICON, row_state

MAX_LISTED = 10  # test ids or paths listed inline before "and N more"


def short(sha: str | None) -> str:
    return (sha or "")[:7]


def code_list(items: tuple[str, ...] | list[str], *, limit: int = MAX_LISTED) -> str:
    shown = ", ".join(f"`{item}`" for item in items[:limit])
    rest = len(items) - limit
    return f"{shown} and {rest} more" if rest > 0 else shown


def pr_list(numbers: tuple[int, ...]) -> str:
    return ", ".join(f"#{n}" for n in numbers)


def plural_s(count: int) -> str:
    return "" if count == 1 else "s"


# -- test rows ---------------------------------------------------------------------------------

# The word for a row whose job has not finished (what it waits for).
RUNNING_WORD = {
    "queued": "queued",
    "starting": "queued",
    "submitted": "queued",
    "running": "running",
}


_ROW_WORDS = {
    "passed": "passed",
    "no-regressions": "no regressions: these failures also fail on main",
    "new-failures": "new failures",
    "running": "",
    "job-trouble": "no usable result",
    "not-judged": "not judged: run on fewer ranks than its tests need (the configuration, not the PR)",
}


def test_line(row: TestRow) -> str:
    """``✅ amax-group 2x4: 23 passed · main: 14 passed, 9 failed (9 newly pass)``; the icon is
    the verdict's colour for the row (🟡: fails only what main fails too)."""
    state = row_state(row)
    text = f"{ROW_ICON[state]} **{row.shown}**: {test_summary(row)}"
    if state in ("no-regressions", "not-judged"):
        text += f" — {_ROW_WORDS[state]}"
    return text + missing_note(row)


def missing_note(row: TestRow) -> str:
    """``; 2 targets absent from the tree, not run: `a.py`, `b.py` `` (a row that "passed"
    without them must say so)."""
    missing = row.missing_targets
    if not missing:
        return ""
    count = len(missing)
    return (
        f"; ⚠️ {count} target{plural_s(count)} absent from the tree, not run: {code_list(missing)}"
    )


def retry_line(row: TestRow) -> str:
    """``🔁 passed on a retry on gpu-02 after an infra failure on gpu-01 (rank 1 lost, killed by
    SIGKILL)``, each machine linking its job; empty when the row's job is a first attempt."""
    note = row.retry_note
    return f"🔁 {note_markdown(note)}" if note else ""


def test_summary(row: TestRow) -> str:
    if row.status in RUNNING_WORD:
        return RUNNING_WORD[row.status]
    comparison = row.comparison
    if comparison is None:
        return row.status + _trouble(row, ": ")
    text = comparison.counts.describe()
    if comparison.main_counts is None:
        text += " · main: not run yet"
    else:
        text += f" · main: {comparison.main_counts.describe()}"
    changes = _changes(comparison)
    if changes:
        text += f" ({changes})"
    if row.status in ("error", "timeout", "infra", "cancelled"):
        text += f"; job {row.status}" + _trouble(row, ": ")
    if row.reused_from is not None:
        text += f"; reused from {_reused(row.reused_from)}"
    return text


def _trouble(row: TestRow, sep: str) -> str:
    """The job's error after ``sep``; nothing for infra attempts that the row's retry line
    names one by one."""
    if not row.error or (row.status == "infra" and row.retry_note):
        return ""
    return sep + row.error


def _changes(comparison: Comparison) -> str:
    parts = []
    if comparison.newly_fail:
        parts.append(f"{len(comparison.newly_fail)} newly fail")
    if comparison.newly_pass:
        parts.append(f"{len(comparison.newly_pass)} newly pass")
    if comparison.absent_on_main:
        parts.append(f"{len(comparison.absent_on_main)} not on main")
    return ", ".join(parts)


def _reused(reused: ReusedFrom) -> str:
    if reused.run_id is None:
        return f"job {reused.job_id}"
    return f"run {reused.run_id} (job {reused.job_id})"


# -- findings ----------------------------------------------------------------------------------


def _evidence(f: FindingView) -> str:
    if not f.roles:
        return _jobs(f.jobs)
    return "; ".join(f"{role}: job {j}" for j, role in f.roles)


def _jobs(jobs: tuple[int, ...]) -> str:
    return ", ".join(f"job {j}" for j in jobs) if jobs else "no job recorded"


def _prefix(position: int | None, pr: int | None) -> str:
    if not position or pr is None:
        return "main alone"
    return f"the first {position} PR{plural_s(position)} of the series (up to #{pr})"


def _merged_before(view: PrReportView, culprit: int) -> bool:
    """Whether this PR is merged after ``culprit`` in the series run (so the failure is in its
    series tree without being its doing)."""
    run = view.series_integration
    order = [step.pr for step in run.steps] if run else []
    if culprit not in order or view.pr.number not in order:
        return False
    return order.index(culprit) < order.index(view.pr.number)


def finding_line(view: PrReportView, f: FindingView) -> str | None:
    """One failing test of the series run, said from this PR's side; None when it does not
    concern this PR (a failure introduced above it)."""
    test = f"`{f.nodeid}` ({f.shown})"
    me = view.pr.number
    if f.failure_class == "new" and f.pr == me:
        return (
            f"❌ **Introduced by this PR**: {test}. The series tree failed it and main passes "
            f"it; a rerun of the same tree failed it again; bisection: passes on "
            f"{_prefix(f.passes_at, f.passes_pr)}, fails on {_prefix(f.fails_at, f.fails_pr)}. "
            f"Evidence: {_evidence(f)}."
        )
    if f.failure_class == "new" and f.pr is not None:
        if not _merged_before(view, f.pr):
            return None
        return (
            f"🚧 {test} fails from #{f.pr} on, which introduced it (not this PR): this PR is "
            f"blocked by #{f.pr} until that is fixed."
        )
    if f.failure_class == "new":
        why = f": {f.note}" if f.note else ""
        return (
            f"❌ {test} fails in the series run and not on main; not attributed to a PR{why}. "
            f"Evidence: {_evidence(f)}."
        )
    if f.failure_class == "pre-existing":
        return f"🟡 {test} also fails on main: not caused by the series. Evidence: {_evidence(f)}."
    if f.failure_class == "flaky":
        if f.failed_in and f.passed_in:
            runs = f"failed in {_jobs(f.failed_in)}, passed on a rerun of the same tree in " + (
                _jobs(f.passed_in)
            )
        else:
            runs = "failed, then passed on a rerun of the same tree"
        return f"⚪ flaky: {test} {runs}; not counted as a failure, attributed to no PR."
    if f.failure_class == "quarantined":
        runs = (
            f"failed in {_jobs(f.failed_in)}, passed on a rerun of the same tree in "
            f"{_jobs(f.passed_in)}"
            if f.failed_in and f.passed_in
            else "failed, then passed on a rerun of the same tree"
        )
        return f"🔕 quarantined: {test} {runs}; not counted (the test is quarantined)."
    if f.failure_class == "suspect":
        return f"⏳ {test} failed once: being confirmed by a rerun of the same tree."
    if f.failure_class == "bisecting":
        return (
            f"⏳ {test} failed twice: being bisected (passes on "
            f"{_prefix(f.passes_at, f.passes_pr)}, fails on {_prefix(f.fails_at, f.fails_pr)})."
        )
    return f"{test}: {f.failure_class}"


def introduced_here(view: PrReportView, test_set: str, shape: str) -> list[FindingView]:
    """The series run's new failures of this configuration attributed to this PR."""
    return [
        f
        for f in view.findings
        if f.failure_class == "new"
        and f.pr == view.pr.number
        and (f.test_set, f.shape) == (test_set, shape)
    ]
