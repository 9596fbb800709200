"""What stackbot says on a PR, rendered from a plain view of stored state.

Rendering is a pure function of :class:`PrReportView`: the same state always gives the same
text, so the publisher can skip writes whose text has not changed, and golden files pin the
wording. The sticky comment starts with :data:`MARKER` so stackbot finds its own comment again
even when its database has forgotten the comment's id.
"""

from __future__ import annotations

from stackbot.domain.approval_carry import carried_note
from stackbot.domain.own_tests import render_own_tests
from stackbot.domain.report_lines import (
    MAX_LISTED,
    code_list,
    finding_line,
    plural_s,
    pr_list,
    retry_line,
    short,
    test_line,
)
from stackbot.domain.report_view import (
    AllowlistView,
    IntegrationView,
    PrReportView,
    StackView,
    StepView,
    TestRow,
)
from stackbot.domain.verdict import decide, in_tree, step_of

MARKER = "<!-- stackbot:report v1 -->"

__all__ = ["MARKER", "render_status_reply", "render_sticky_comment"]


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
    if approval.kind == "approved" and approval.carried_from:
        return (
            f"**Approval:** ✅ `{head}` approved by @{approval.by} — "
            f"{carried_note(approval.carried_from)} (the PR's own commits are the approved ones, "
            "on a new base)."
        )
    if approval.kind == "approved":
        return f"**Approval:** ✅ `{head}` approved by @{approval.by}."
    if approval.kind == "trusted":
        return f"**Approval:** ✅ trusted author @{approval.by}: `{head}` is tested automatically."
    text = f"**Approval:** ⏳ waiting for a vetter to comment `/ok to test {head}`."
    if approval.earlier_sha:
        text += (
            f" The approval of `{short(approval.earlier_sha)}` does not carry over: the PR's own"
            " patch is not the approved one (a restack or rebase that keeps each own commit's patch"
            " and author carries it)."
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
        what += f" ({len(run.steps)} PR{plural_s(len(run.steps))})"
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
        what += f" ({len(run.steps)} PR{plural_s(len(run.steps))})"
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
            f"- ⚠️ {count} new read{plural_s(count)} that no side listed (a human must allow or "
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


def _findings(view: PrReportView) -> str:
    lines = [line for f in view.findings if (line := finding_line(view, f))]
    if not lines:
        return ""
    key = view.stack.series_key
    where = f"the series {key} run" if key else "the series run"
    head = [f"**Failing tests of {where}**"]
    held = len({f.nodeid for f in view.findings if f.failure_class == "quarantined"})
    if held:
        said = f"{held} quarantined test{plural_s(held)} failed (not counted)"
        page = quarantine_url(view.url)
        head.append(f"{said}: [quarantined tests]({page})" if page else said)
    return "\n".join([*head, *(f"- {line}" for line in lines)])


def quarantine_url(pr_url: str | None) -> str | None:
    """The dashboard's quarantine page, beside the PR's page."""
    if not pr_url or "://" not in pr_url:
        return None
    scheme, rest = pr_url.split("://", 1)
    return f"{scheme}://{rest.split('/', 1)[0]}/quarantine"
