"""The check runs stackbot sets on a PR's head: one per test row, ``stackbot/integration``,
``stackbot/series-tests`` and ``stackbot/approval``, rendered from the same
:class:`~stackbot.domain.report_view.PrReportView` as the sticky comment."""

from __future__ import annotations

from stackbot.domain.report_failures import count_line
from stackbot.domain.report_lines import (
    RUNNING_WORD,
    finding_line,
    introduced_here,
    plural_s,
    retry_line,
    short,
    test_summary,
)
from stackbot.domain.report_view import (
    CheckRunContent,
    CheckStatus,
    Conclusion,
    PrReportView,
    TestRow,
    test_set_words,
)
from stackbot.domain.verdict import Verdict, decide, row_state

_CONCLUSION_ICON: dict[Conclusion, str] = {
    "success": "✅",
    "failure": "❌",
    "neutral": "⚪",
    "cancelled": "⛔",
    "timed_out": "⌛",
    "action_required": "⚠️",
}


def row_conclusion(row: TestRow) -> Conclusion | None:
    """The check-run conclusion of a finished row; None while it is queued or running."""
    if row.status in RUNNING_WORD:
        return None
    if row.status == "timeout":
        return "timed_out"
    if row.status == "cancelled":
        return "cancelled"
    if row.status == "infra":
        return "neutral"  # the machine failed, not the code: `/stackbot retest` runs it again
    comparison = row.comparison
    if comparison is None or row.status == "error":
        return "failure"
    if comparison.failures == 0:
        return "success"
    # Failing tests that fail on main too are main's problem, not this PR's.
    return "failure" if comparison.regressed else "neutral"


def check_run_name(test_set: str, shape: str) -> str:
    """``stackbot / amax-group 2x4``; a PR's own test files: ``stackbot / #8034's own test
    files 1x4``."""
    return f"stackbot / {test_set_words(test_set)} {shape}"


INTEGRATION_CHECK = "stackbot/integration"
SERIES_TESTS_CHECK = "stackbot/series-tests"
APPROVAL_CHECK = "stackbot/approval"


def ordered_rows(view: PrReportView) -> tuple[TestRow, ...]:
    """The PR's test rows, new failures first (GitHub's merge box lists check runs in the
    order they were created)."""
    order = {"new-failures": 0, "job-trouble": 1, "no-regressions": 2, "running": 3, "passed": 4}
    return tuple(sorted(view.tests, key=lambda row: order[row_state(row)]))


def render_check_run(view: PrReportView, test_set: str, shape: str) -> CheckRunContent:
    row = view.row(test_set, shape)
    name = check_run_name(test_set, shape)
    if row.status in RUNNING_WORD:
        status: CheckStatus = "queued" if RUNNING_WORD[row.status] == "queued" else "in_progress"
        return CheckRunContent(
            name, status, None, RUNNING_WORD[row.status], _check_summary(view, row)
        )
    conclusion = row_conclusion(row)
    title = _title(row)
    summary = _check_summary(view, row)
    mine = introduced_here(view, test_set, shape)
    if mine:
        conclusion = "failure"
        title = "introduced by this PR: " + ", ".join(f.nodeid for f in mine[:3])
        summary += "\n" + "\n".join(f"- {finding_line(view, f)}" for f in mine)
    return CheckRunContent(
        name=name,
        status="completed",
        conclusion=conclusion,
        title=title[:1000],
        summary=summary,
        text=_check_text(row),
    )


def render_integration_check(view: PrReportView) -> CheckRunContent | None:
    """``stackbot/integration``: failure while this PR conflicts (or a parent's conflict blocks
    it), success once its tree merges, in progress while integrating; None before any run."""
    stack = view.stack_integration
    verdict = decide(view)
    summary = _verdict_summary(view, verdict)
    if verdict.kind in ("conflict", "blocked"):
        return CheckRunContent(
            INTEGRATION_CHECK, "completed", "failure", verdict.text()[:1000], summary
        )
    if stack is None:
        return None
    if stack.status in ("pending", "running"):
        return CheckRunContent(INTEGRATION_CHECK, "in_progress", None, "integrating", summary)
    if stack.status == "error":
        title = f"integration error: {stack.error or 'no reason recorded'}"
        return CheckRunContent(INTEGRATION_CHECK, "completed", "failure", title[:1000], summary)
    title = f"merges onto {stack.base_ref} {short(stack.base_sha)} ({stack.status})"
    if stack.commit:
        title += f" as {short(stack.commit)}"
    return CheckRunContent(INTEGRATION_CHECK, "completed", "success", title, summary)


def integration_details_url(view: PrReportView) -> str | None:
    """Where ``stackbot/integration``'s "Details" lead: the run that decides it (the series run
    where this PR conflicts, not its clean stack run), else the stack run, else the PR's page."""
    verdict = decide(view)
    if verdict.kind in ("conflict", "blocked") and verdict.url:
        return verdict.url
    stack = view.stack_integration
    return (stack.url if stack else None) or view.url


def render_series_tests_check(view: PrReportView) -> CheckRunContent | None:
    """``stackbot/series-tests``: the series run's failing tests from this PR's side. Failure
    naming the tests that this PR introduced; neutral while a PR below it introduced one (it is
    blocked, not blamed) or only main's failures remain; in progress while a failure is being
    confirmed or bisected; success when only flaky tests failed. None when nothing concerns it."""
    concerning = [f for f in view.findings if finding_line(view, f) is not None]
    if not concerning:
        return None
    lines = [f"- {finding_line(view, f)}" for f in concerning]
    summary = _verdict_summary(view, decide(view)) + "\n\n" + "\n".join(lines)
    mine = [f for f in concerning if f.failure_class == "new" and f.pr == view.pr.number]
    if mine:
        title = "introduced by this PR: " + ", ".join(f.nodeid for f in mine[:3])
        if len(mine) > 3:
            title += f" and {len(mine) - 3} more"
        return CheckRunContent(SERIES_TESTS_CHECK, "completed", "failure", title[:1000], summary)
    unattributed = [f for f in concerning if f.failure_class == "new" and f.pr is None]
    if unattributed:
        title = "new failures not attributed: " + ", ".join(f.nodeid for f in unattributed[:3])
        return CheckRunContent(SERIES_TESTS_CHECK, "completed", "failure", title[:1000], summary)
    pending = [f for f in concerning if f.failure_class in ("suspect", "bisecting")]
    if pending:
        title = f"{len(pending)} failing test{plural_s(len(pending))} being confirmed or bisected"
        return CheckRunContent(SERIES_TESTS_CHECK, "in_progress", None, title, summary)
    blockers = sorted({f.pr for f in concerning if f.failure_class == "new" and f.pr})
    if blockers:
        title = "blocked by " + ", ".join(f"#{n}" for n in blockers) + " (a failure it introduced)"
        return CheckRunContent(SERIES_TESTS_CHECK, "completed", "neutral", title, summary)
    if any(f.failure_class == "pre-existing" for f in concerning):
        title = "no new failures: the failing tests also fail on main"
        return CheckRunContent(SERIES_TESTS_CHECK, "completed", "neutral", title, summary)
    title = "no failures: flaky tests only (passed on a rerun)"
    return CheckRunContent(SERIES_TESTS_CHECK, "completed", "success", title, summary)


def render_approval_check(view: PrReportView) -> CheckRunContent:
    """``stackbot/approval``: pending while a vetter is needed, success once the head is
    approved (or its author is trusted)."""
    head = short(view.head_sha)
    # The verdict alone: this check says who approved, it is not rewritten as tests finish.
    summary = _verdict_summary(view, decide(view), counts=False)
    approval = view.approval
    if approval.kind == "waiting":
        title = f"a vetter must comment /ok to test {head}"
        return CheckRunContent(APPROVAL_CHECK, "queued", None, title, summary)
    if approval.kind == "trusted":
        title = f"trusted author @{approval.by}: {head} is tested automatically"
    else:
        title = f"{head} approved by @{approval.by}"
    return CheckRunContent(APPROVAL_CHECK, "completed", "success", title, summary)


def _headline(view: PrReportView, verdict: Verdict) -> list[str]:
    """The comment's first lines: the verdict, then the failures counted."""
    counts = count_line(view)
    return [verdict.markdown(), counts] if counts else [verdict.markdown()]


def _verdict_summary(view: PrReportView, verdict: Verdict, *, counts: bool = True) -> str:
    head = _headline(view, verdict) if counts else [verdict.markdown()]
    lines = [*head, "", f"#{view.pr.number} at `{short(view.head_sha)}`"]
    if view.url:
        lines[-1] += f" · [dashboard]({view.url})"
    if verdict.url:
        lines.append(f"- details: [{_where(verdict.url)}]({verdict.url})")
    return "\n".join(lines)


def _where(url: str) -> str:
    """``…/runs/5`` → ``run 5``, ``…/jobs/7`` → ``job 7``; another URL as it is."""
    parts = url.rstrip("/").rsplit("/", 2)
    words = {"runs": "run", "jobs": "job"}
    if len(parts) == 3 and parts[1] in words:
        return f"{words[parts[1]]} {parts[2]}"
    return url


_ROW_TITLE = {
    "passed": "passed",
    "no-regressions": "no regressions",
    "new-failures": "new failures",
    "job-trouble": "no usable result",
    "running": "running",
}


def _title(row: TestRow) -> str:
    state = row_state(row)
    if row.comparison is None:
        return f"{_ROW_TITLE[state]}: {row.status}" + (f": {row.error}" if row.error else "")
    comparison = row.comparison
    text = comparison.counts.describe()
    main = comparison.main_counts
    text += f" · main: {main.describe()}" if main else " · main: not run yet"
    if state == "new-failures":
        failing = comparison.newly_fail + comparison.failing_new
        named = f": {', '.join(n.split('::')[-1] for n in failing[:3])}" if failing else ""
        return f"new failures{named} — {text}"
    if state == "no-regressions":
        return f"no regressions: the failures also fail on main — {text}"
    return text


def _check_summary(view: PrReportView, row: TestRow) -> str:
    verdict = decide(view)
    lines = [
        *_headline(view, verdict),
        "",
        f"{row.shown} for #{view.pr.number} at `{short(view.head_sha)}`",
    ]
    if view.tested_commit:
        lines.append(f"- integration commit: `{short(view.tested_commit)}`")
    if view.main_sha:
        lines.append(f"- main: `{short(view.main_sha)}`")
    lines.append(f"- result: {test_summary(row)}")
    if row.retry_note:
        lines.append(f"- attempts: {retry_line(row)}")
    if row.url:
        job = row.url.rsplit("/", 1)[-1]
        lines.append(f"- [job {job}]({row.url}) · [log]({row.url}#log)")
    return "\n".join(lines)


def _check_text(row: TestRow) -> str | None:
    comparison = row.comparison
    if comparison is None:
        return None
    sections = [
        ("Newly failing: passed on main", comparison.newly_fail),
        ("New tests failing: not on main", comparison.failing_new),
        ("Failing here and on main", comparison.still_failing),
        ("Newly passing", comparison.newly_pass),
        ("New tests: not on main", comparison.absent_on_main),
    ]
    blocks = []
    for heading, ids in sections:
        if ids:
            listed = "\n".join(f"- `{nodeid}`" for nodeid in ids[:200])
            more = f"\n- and {len(ids) - 200} more" if len(ids) > 200 else ""
            blocks.append(f"### {heading} ({len(ids)})\n\n{listed}{more}")
    return "\n\n".join(blocks) or None
