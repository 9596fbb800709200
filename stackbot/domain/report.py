"""What stackbot says on a PR, rendered from a plain view of stored state.

Rendering is a pure function of :class:`PrReportView`: the same state always gives the same
text, so the publisher can skip writes whose text has not changed, and golden files pin the
wording. The sticky comment starts with :data:`MARKER` so stackbot finds its own comment again
even when its database has forgotten the comment's id.
"""

from __future__ import annotations

from stackbot.domain.comparison import Comparison
from stackbot.domain.own_tests import render_own_tests
from stackbot.domain.report_view import (
    AllowlistView,
    ApprovalKind,
    ApprovalView,
    CheckRunContent,
    CheckStatus,
    Conclusion,
    FindingView,
    IntegrationView,
    PrRef,
    PrReportView,
    ReusedFrom,
    StackView,
    StepView,
    TestRow,
)
from stackbot.domain.retries import note_markdown
from stackbot.domain.verdict import ROW_ICON, Verdict, decide, in_tree, row_state, step_of

MARKER = "<!-- stackbot:report v1 -->"
MAX_LISTED = 10  # test ids or paths listed inline before "and N more"

__all__ = [
    "MARKER",
    "AllowlistView",
    "ApprovalKind",
    "ApprovalView",
    "CheckRunContent",
    "CheckStatus",
    "Conclusion",
    "FindingView",
    "IntegrationView",
    "PrRef",
    "PrReportView",
    "ReusedFrom",
    "StackView",
    "StepView",
    "TestRow",
    "render_approval_check",
    "render_check_run",
    "render_integration_check",
    "render_series_tests_check",
    "render_status_reply",
    "render_sticky_comment",
]


def short(sha: str | None) -> str:
    return (sha or "")[:7]


def code_list(items: tuple[str, ...] | list[str], *, limit: int = MAX_LISTED) -> str:
    shown = ", ".join(f"`{item}`" for item in items[:limit])
    rest = len(items) - limit
    return f"{shown} and {rest} more" if rest > 0 else shown


def pr_list(numbers: tuple[int, ...]) -> str:
    return ", ".join(f"#{n}" for n in numbers)


# -- the sticky comment ------------------------------------------------------------------------


def render_sticky_comment(view: PrReportView) -> str:
    """The marker (invisible once rendered), then the verdict and the next action as the first
    line a reader sees, then the facts behind it."""
    verdict = decide(view)
    title = f"<sub>stackbot · #{view.pr.number} at `{short(view.head_sha)}`"
    if view.url:
        title += f" · [dashboard]({view.url})"
    title += "</sub>"
    return MARKER + "\n" + _join([f"{verdict.markdown()}\n{title}", *_sections(view)])


def render_status_reply(view: PrReportView) -> str:
    """The answer to ``/stackbot status``: the same sections, without the sticky marker (so the
    reply is never mistaken for the sticky comment)."""
    verdict = decide(view)
    title = f"<sub>stackbot status · #{view.pr.number} at `{short(view.head_sha)}`"
    if view.url:
        title += f" · [dashboard]({view.url})"
    title += "</sub>"
    return _join([f"{verdict.markdown()}\n{title}", *_sections(view)])


def _join(blocks: list[str]) -> str:
    return "\n\n".join(block for block in blocks if block) + "\n"


def _sections(view: PrReportView) -> list[str]:
    return [
        _approval(view),
        _stack(view.stack),
        _integration(view),
        _allowlist(view.allowlist),
        _tests(view),
        "\n\n".join(render_own_tests(own) for own in view.own_tests),
        _findings(view),
    ]


def _approval(view: PrReportView) -> str:
    head = short(view.head_sha)
    if view.pr.state != "open":
        state = view.pr.state
        if view.pr.superseded_by is not None:
            state += f", superseded by #{view.pr.superseded_by}"
        return f"This PR is {state}: stackbot no longer integrates or tests it."
    approval = view.approval
    if approval.kind == "approved":
        return f"**Approval:** ✅ `{head}` approved by @{approval.by}."
    if approval.kind == "trusted":
        return f"**Approval:** ✅ trusted author @{approval.by}: `{head}` is tested automatically."
    text = f"**Approval:** ⏳ waiting for a vetter to comment `/ok to test {head}`."
    if approval.earlier_sha:
        text += (
            f" The approval of `{short(approval.earlier_sha)}` does not carry over to a new head."
        )
    return text


def _stack(stack: StackView) -> str:
    heading = "**Stack**" + (f" · series `{stack.series_key}`" if stack.series_key else "")
    lines = [heading]
    if stack.parents:
        lines.append("- depends on: " + ", ".join(p.describe() for p in stack.parents))
    if stack.children:
        lines.append("- needed by: " + ", ".join(p.describe() for p in stack.children))
    if not stack.parents and not stack.children:
        lines.append("- no parent or child PRs")
    lines.extend(f"- ⚠️ {problem}" for problem in stack.problems)
    return "\n".join(lines)


_OUTCOME_ICON = {
    "clean": "✅",
    "resolved": "✅",
    "conflict": "❌",
    "error": "❌",
    "skipped": "⏭️",
    "pending": "⏳",
    "running": "⏳",
}


def _integration(view: PrReportView) -> str:
    lines = ["**Integration**"]
    if view.stack_integration is not None:
        head, notable = _run_lines(view.stack_integration, view.stack.series_key)
        lines.append(head)
        lines.extend(f"  {line}" for line in notable)
    if view.series_integration is not None:
        lines.extend(_series_lines(view, view.series_integration))
    return "\n".join(lines) if len(lines) > 1 else ""


def _series_lines(view: PrReportView, run: IntegrationView) -> list[str]:
    """The series run as far as it concerns this PR: whether its tree holds the PR (and if not,
    why), and the conflicts of other PRs with this one. Other PRs' troubles stay on their own
    comments and on the dashboard."""
    number = view.pr.number
    what = f"Series `{view.stack.series_key or '?'}`"
    if run.steps:
        what += f" ({len(run.steps)} PR{_s(len(run.steps))})"
    link = f" ([run]({run.url}))" if run.url else ""
    head = f"- {what} onto `{run.base_ref}` `{short(run.base_sha)}`: "
    step = step_of(run, number)
    if run.status in ("pending", "running"):
        return [head + f"⏳ {run.status}{link}"]
    if run.status == "error":
        return [head + f"❌ error{link}" + (f": {run.error}" if run.error else "")]
    if step is None:
        return [head + f"this PR is not part of it{link}"]
    if in_tree(run, number):
        text = head + f"✅ this PR merged ({step.outcome})"
        if run.commit:
            text += f" → `{short(run.commit)}`"
        lines = [text + link]
        if step.outcome == "resolved":
            lines.append(f"  {_step_line(step)}")
    else:
        lines = [head + f"{_OUTCOME_ICON.get(step.outcome, '❔')} this PR was left out{link}"]
        lines.append(f"  {_step_line(step)}")
        lines.append("  - the series' test results do not include this PR, so none are shown here")
    others = [
        other
        for other in run.steps
        if other.pr != number and other.outcome == "conflict" and number in other.conflicts_with
    ]
    for other in others:
        lines.append(
            f"  - ⚠️ #{other.pr} conflicts with this PR in {code_list(other.conflicting_paths)}"
            f" and was left out of the series (its comment says how to fix it)"
        )
    return lines


def _details(summary: str, lines: list[str]) -> str:
    body = "\n".join(lines)
    return f"\n<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


def _run_lines(run: IntegrationView, series_key: str | None) -> tuple[str, list[str]]:
    what = "Stack" if run.kind == "stack" else f"Series `{series_key or '?'}`"
    if run.steps:
        what += f" ({len(run.steps)} PR{_s(len(run.steps))})"
    head = f"- {what} onto `{run.base_ref}` `{short(run.base_sha)}`: "
    head += f"{_OUTCOME_ICON.get(run.status, '❔')} {run.status}"
    if run.commit:
        head += f" → `{short(run.commit)}`"
    if run.url:
        head += f" ([run]({run.url}))"
    if run.error:
        head += f": {run.error}"
    return head, [_step_line(step) for step in run.steps if step.outcome != "clean"]


def _step_line(step: StepView) -> str:
    icon = _OUTCOME_ICON.get(step.outcome, "❔")
    if step.outcome == "conflict":
        text = f"- {icon} #{step.pr} conflicts in {code_list(step.conflicting_paths)}"
        if step.conflicts_with:
            text += f" with {pr_list(step.conflicts_with)}"
        return text
    if step.outcome == "resolved":
        text = (
            f"- {icon} #{step.pr}: conflict in generated {code_list(step.resolved_files)} resolved"
        )
        return text + (f": {step.resolution}" if step.resolution else " by regenerating it")
    if step.outcome == "skipped":
        return f"- {icon} #{step.pr} skipped: {step.skipped_reason or 'no reason recorded'}"
    return f"- {icon} #{step.pr} {step.outcome}"


def _allowlist(allowlist: AllowlistView | None) -> str:
    if allowlist is None:
        return ""
    delta = allowlist.delta
    total = f"total {_number(allowlist.total_before)} → {_number(allowlist.total_after)}"
    if delta is not None:
        total += f" ({delta:+d})" if delta else " (unchanged)"
    lines = [f"**Allowlist** `{allowlist.path}`: {total}"]
    if allowlist.new_reads:
        count = len(allowlist.new_reads)
        lines.append(
            f"- ⚠️ {count} new read{_s(count)} that no side listed (a human must allow or "
            f"remove {'them' if count > 1 else 'it'}): {code_list(allowlist.new_reads)}"
        )
    if allowlist.stale_dropped:
        count = len(allowlist.stale_dropped)
        lines.append(
            f"- {count} stale entr{'ies' if count > 1 else 'y'} dropped: {code_list(allowlist.stale_dropped)}"
        )
    if allowlist.unparsed:
        lines.append(f"- ⚠️ files that do not parse (not scanned): {code_list(allowlist.unparsed)}")
    return "\n".join(lines)


def _number(value: int | None) -> str:
    return "?" if value is None else str(value)


def _s(count: int) -> str:
    return "" if count == 1 else "s"


# -- tests ---------------------------------------------------------------------------------------


def _tests(view: PrReportView) -> str:
    blocks = []
    if view.tests:
        where = "the stack integration"
        blocks.append(_test_block(view, view.tests, where, view.tested_commit))
    if view.series_tests and in_tree(view.series_integration, view.pr.number):
        key = view.stack.series_key
        series = f"the series {key} integration" if key else "the series integration"
        blocks.append(_test_block(view, view.series_tests, series, view.series_tested_commit))
    return "\n\n".join(blocks)


def _test_block(
    view: PrReportView, rows: tuple[TestRow, ...], where: str, commit: str | None
) -> str:
    heading = "**Tests**"
    if commit:
        heading += f" on {where} `{short(commit)}`"
    if view.main_sha:
        heading += f", compared with main `{short(view.main_sha)}`"
    lines = [heading]
    for row in rows:
        lines.append(f"- {test_line(row)}")
        if row.retry_note:
            lines.append(f"  - {retry_line(row)}")
    details = [block for row in rows if (block := _test_details(row))]
    return "\n".join(lines + details)


_RUNNING = {
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
}


def test_line(row: TestRow) -> str:
    """``✅ amax-group 2x4: 23 passed · main: 14 passed, 9 failed (9 newly pass)``; the icon is
    the verdict's colour for the row (🟡: fails only what main fails too)."""
    state = row_state(row)
    text = f"{ROW_ICON[state]} **{row.label}**: {test_summary(row)}"
    if state == "no-regressions":
        text += f" — {_ROW_WORDS[state]}"
    return text


def retry_line(row: TestRow) -> str:
    """``🔁 passed on a retry on gpu-02 after an infra failure on gpu-01 (rank 1 lost, killed by
    SIGKILL)``, each machine linking its job; empty when the row's job is a first attempt."""
    note = row.retry_note
    return f"🔁 {note_markdown(note)}" if note else ""


def test_summary(row: TestRow) -> str:
    if row.status in _RUNNING:
        return _RUNNING[row.status]
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


def _test_details(row: TestRow) -> str:
    comparison = row.comparison
    if comparison is None:
        return ""
    failing = comparison.newly_fail + comparison.failing_new
    if not failing:
        return ""
    items = [f"- `{nodeid}`" for nodeid in failing[:MAX_LISTED]]
    if len(failing) > MAX_LISTED:
        items.append(f"- and {len(failing) - MAX_LISTED} more")
    return _details(f"{row.label}: failing here, not on main", items)


def _evidence(f: FindingView) -> str:
    if not f.roles:
        return _jobs(f.jobs)
    return "; ".join(f"{role}: job {j}" for j, role in f.roles)


def _jobs(jobs: tuple[int, ...]) -> str:
    return ", ".join(f"job {j}" for j in jobs) if jobs else "no job recorded"


def _prefix(position: int | None, pr: int | None) -> str:
    if not position or pr is None:
        return "main alone"
    return f"the first {position} PR{_s(position)} of the series (up to #{pr})"


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
    test = f"`{f.nodeid}` ({f.label})"
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
    if f.failure_class == "suspect":
        return f"⏳ {test} failed once: being confirmed by a rerun of the same tree."
    if f.failure_class == "bisecting":
        return (
            f"⏳ {test} failed twice: being bisected (passes on "
            f"{_prefix(f.passes_at, f.passes_pr)}, fails on {_prefix(f.fails_at, f.fails_pr)})."
        )
    return f"{test}: {f.failure_class}"


def _findings(view: PrReportView) -> str:
    lines = [line for f in view.findings if (line := finding_line(view, f))]
    if not lines:
        return ""
    key = view.stack.series_key
    where = f"the series {key} run" if key else "the series run"
    return "\n".join([f"**Failing tests of {where}**", *(f"- {line}" for line in lines)])


def introduced_here(view: PrReportView, test_set: str, shape: str) -> list[FindingView]:
    """The series run's new failures of this configuration attributed to this PR."""
    return [
        f
        for f in view.findings
        if f.failure_class == "new"
        and f.pr == view.pr.number
        and (f.test_set, f.shape) == (test_set, shape)
    ]


# -- check runs ------------------------------------------------------------------------------------

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
    if row.status in _RUNNING:
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
    return f"stackbot / {test_set} {shape}"


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
    if row.status in _RUNNING:
        status: CheckStatus = "queued" if _RUNNING[row.status] == "queued" else "in_progress"
        return CheckRunContent(name, status, None, _RUNNING[row.status], _check_summary(view, row))
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
        title = f"{len(pending)} failing test{_s(len(pending))} being confirmed or bisected"
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
    summary = _verdict_summary(view, decide(view))
    approval = view.approval
    if approval.kind == "waiting":
        title = f"a vetter must comment /ok to test {head}"
        return CheckRunContent(APPROVAL_CHECK, "queued", None, title, summary)
    if approval.kind == "trusted":
        title = f"trusted author @{approval.by}: {head} is tested automatically"
    else:
        title = f"{head} approved by @{approval.by}"
    return CheckRunContent(APPROVAL_CHECK, "completed", "success", title, summary)


def _verdict_summary(view: PrReportView, verdict: Verdict) -> str:
    lines = [verdict.markdown(), "", f"#{view.pr.number} at `{short(view.head_sha)}`"]
    if view.url:
        lines[-1] += f" · [dashboard]({view.url})"
    if verdict.url:
        lines.append(f"- details: {verdict.url}")
    return "\n".join(lines)


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
        verdict.markdown(),
        "",
        f"{row.label} for #{view.pr.number} at `{short(view.head_sha)}`",
    ]
    if view.tested_commit:
        lines.append(f"- integration commit: `{short(view.tested_commit)}`")
    if view.main_sha:
        lines.append(f"- main: `{short(view.main_sha)}`")
    lines.append(f"- result: {test_summary(row)}")
    if row.retry_note:
        lines.append(f"- attempts: {retry_line(row)}")
    if row.url:
        lines.append(f"- job and its log: {row.url}#log")
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
