"""What stackbot says on a PR, rendered from a plain view of stored state.

Rendering is a pure function of :class:`PrReportView`: the same state always gives the same
text, so the publisher can skip writes whose text has not changed, and golden files pin the
wording. The sticky comment starts with :data:`MARKER` so stackbot finds its own comment again
even when its database has forgotten the comment's id.
"""

from __future__ import annotations

from stackbot.domain.comparison import Comparison
from stackbot.domain.report_view import (
    AllowlistView,
    ApprovalKind,
    ApprovalView,
    CheckRunContent,
    CheckStatus,
    Conclusion,
    IntegrationView,
    PrRef,
    PrReportView,
    ReusedFrom,
    StackView,
    StepView,
    TestRow,
)

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
    "IntegrationView",
    "PrRef",
    "PrReportView",
    "ReusedFrom",
    "StackView",
    "StepView",
    "TestRow",
    "render_check_run",
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
    title = f"**stackbot** · #{view.pr.number} at `{short(view.head_sha)}`"
    if view.url:
        title += f" · [dashboard]({view.url})"
    return _join([MARKER, title, *_sections(view)])


def render_status_reply(view: PrReportView) -> str:
    """The answer to ``/stackbot status``: the same sections, without the sticky marker (so the
    reply is never mistaken for the sticky comment)."""
    title = f"**stackbot status** · #{view.pr.number} at `{short(view.head_sha)}`"
    if view.url:
        title += f" · [dashboard]({view.url})"
    return _join([title, *_sections(view)])


def _join(blocks: list[str]) -> str:
    return "\n\n".join(block for block in blocks if block) + "\n"


def _sections(view: PrReportView) -> list[str]:
    return [
        _approval(view),
        _stack(view.stack),
        _integration(view),
        _allowlist(view.allowlist),
        _tests(view),
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
    runs = [run for run in (view.stack_integration, view.series_integration) if run is not None]
    if not runs:
        return ""
    lines = ["**Integration**"]
    folded: list[str] = []
    for run in runs:
        head, notable = _run_lines(run, view.stack.series_key)
        lines.append(head)
        if run.kind == "series" and len(notable) > MAX_LISTED:
            # A 60-PR series would drown the comment: its steps fold away.
            summary = f"series {view.stack.series_key or '?'}: {len(notable)} PRs need attention"
            folded.append(_details(summary, notable))
        else:
            lines.extend(f"  {line}" for line in notable)
    return "\n".join(lines + folded)


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
        where = "the stack integration" if view.series_tests else "the integration"
        blocks.append(_test_block(view, view.tests, where, view.tested_commit))
    if view.series_tests:
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
    lines = [heading, *(f"- {test_line(row)}" for row in rows)]
    details = [block for row in rows if (block := _test_details(row))]
    return "\n".join(lines + details)


_RUNNING = {
    "queued": "queued",
    "starting": "queued",
    "submitted": "queued",
    "running": "running",
}


def test_line(row: TestRow) -> str:
    """``✅ amax-group 2x4: 23 passed · main: 14 passed, 9 failed (9 newly pass)``."""
    conclusion = row_conclusion(row)
    icon = _CONCLUSION_ICON[conclusion] if conclusion else "⏳"
    return f"{icon} **{row.label}**: {test_summary(row)}"


def test_summary(row: TestRow) -> str:
    if row.status in _RUNNING:
        return _RUNNING[row.status]
    comparison = row.comparison
    if comparison is None:
        return f"{row.status}" + (f": {row.error}" if row.error else "")
    text = comparison.counts.describe()
    if comparison.main_counts is None:
        text += " · main: not run yet"
    else:
        text += f" · main: {comparison.main_counts.describe()}"
    changes = _changes(comparison)
    if changes:
        text += f" ({changes})"
    if row.status in ("error", "timeout", "infra", "cancelled"):
        text += f"; job {row.status}" + (f": {row.error}" if row.error else "")
    if row.reused_from is not None:
        text += f"; reused from {_reused(row.reused_from)}"
    return text


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


def render_check_run(view: PrReportView, test_set: str, shape: str) -> CheckRunContent:
    row = view.row(test_set, shape)
    name = check_run_name(test_set, shape)
    if row.status in _RUNNING:
        status: CheckStatus = "queued" if _RUNNING[row.status] == "queued" else "in_progress"
        return CheckRunContent(name, status, None, _RUNNING[row.status], _check_summary(view, row))
    conclusion = row_conclusion(row)
    return CheckRunContent(
        name=name,
        status="completed",
        conclusion=conclusion,
        title=_title(row)[:1000],
        summary=_check_summary(view, row),
        text=_check_text(row),
    )


def _title(row: TestRow) -> str:
    if row.comparison is None:
        return row.status + (f": {row.error}" if row.error else "")
    text = row.comparison.counts.describe()
    main = row.comparison.main_counts
    return text + (f" · main: {main.describe()}" if main else " · main: not run yet")


def _check_summary(view: PrReportView, row: TestRow) -> str:
    lines = [f"{row.label} for #{view.pr.number} at `{short(view.head_sha)}`"]
    if view.tested_commit:
        lines.append(f"- integration commit: `{short(view.tested_commit)}`")
    if view.main_sha:
        lines.append(f"- main: `{short(view.main_sha)}`")
    lines.append(f"- result: {test_summary(row)}")
    if row.url:
        lines.append(f"- job: {row.url}")
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
