"""What stackbot says on a PR, rendered from a plain view of stored state.

Rendering is a pure function of :class:`PrReportView`: the same state always gives the same
text, so the publisher can skip writes whose text has not changed, and golden files pin the
wording. The sticky comment starts with :data:`MARKER` so stackbot finds its own comment again
even when its database has forgotten the comment's id.
"""

from __future__ import annotations

from stackbot.domain.approval_carry import carried_note
from stackbot.domain.own_tests import render_own_tests
from stackbot.domain.report_failures import (
    FailureLine,
    count_line,
    failure_lines,
    render_failure_groups,
)
from stackbot.domain.report_lines import (
    code_list,
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
from stackbot.domain.verdict import VerdictKind, decide, in_tree, step_of

MARKER = "<!-- stackbot:report v1 -->"

__all__ = ["MARKER", "render_status_reply", "render_sticky_comment"]


# -- the sticky comment ------------------------------------------------------------------------


def render_sticky_comment(view: PrReportView) -> str:
    """The marker (invisible once rendered), then the verdict and the next action as the first
    line a reader sees, the failures counted on the next, then the facts behind it: what needs
    reading open, the rest (test rows, allowlist, stack) folded."""
    return MARKER + "\n" + _render(view, "stackbot")


def render_status_reply(view: PrReportView) -> str:
    """The answer to ``/stackbot status``: the same sections, without the sticky marker (so the
    reply is never mistaken for the sticky comment)."""
    return _render(view, "stackbot status")


def _render(view: PrReportView, who: str) -> str:
    verdict = decide(view)
    failures = failure_lines(view)
    title = f"<sub>{who} · #{view.pr.number} at `{short(view.head_sha)}`"
    if view.url:
        title += f" · [dashboard]({view.url})"
    title += "</sub>"
    head = [verdict.markdown(), count_line(view, failures), title]
    return _join(["\n".join(line for line in head if line), *_sections(view, failures)])


def _join(blocks: list[str]) -> str:
    return "\n\n".join(block for block in blocks if block) + "\n"


def _sections(view: PrReportView, failures: list[FailureLine]) -> list[str]:
    # A closed PR's or an unapproved head's verdict already says what the approval line would.
    said = decide(view).kind in (VerdictKind.CLOSED, VerdictKind.NEEDS_APPROVAL)
    return [
        "" if said else _approval(view),
        _integration(view),
        render_failure_groups(failures, quarantine_url(view.url)),
        _tests(view),
        _allowlist(view.allowlist),
        _stack(view.stack),
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
        return f"**Approval:** ✅ `{head}` approved for testing by @{approval.by}."
    if approval.kind == "trusted":
        return (
            f"**Approval:** ✅ @{approval.by} is a trusted author: `{head}` is tested without "
            f"waiting for a vetter."
        )
    text = f"**Approval:** ⏳ not tested yet: waiting for a vetter to comment `/ok to test {head}`."
    if approval.earlier_sha:
        text += (
            f" The approval of `{short(approval.earlier_sha)}` does not carry over: the PR's own"
            " patch is not the approved one (a restack or rebase that keeps each own commit's patch"
            " and author carries it)."
        )
    return text


def _stack(stack: StackView) -> str:
    """Folded: the stack's shape is on the dashboard too; its problems stay in view."""
    problems = "\n".join(f"⚠️ {problem}" for problem in stack.problems)
    lines = []
    if stack.parents:
        lines.append("- depends on: " + ", ".join(p.describe() for p in stack.parents))
    if stack.children:
        lines.append("- needed by: " + ", ".join(p.describe() for p in stack.children))
    if not lines:
        return problems
    counts = []
    if stack.parents:
        counts.append(f"{len(stack.parents)} parent PR{plural_s(len(stack.parents))}")
    if stack.children:
        counts.append(f"{len(stack.children)} child PR{plural_s(len(stack.children))}")
    summary = "Stack" + (f" of series {stack.series_key}" if stack.series_key else "")
    folded = _details(f"{summary}: {', '.join(counts)}", lines).strip()
    return "\n".join(block for block in (problems, folded) if block)


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
        # A step resolved the same way in both runs is said once (under the stack run).
        said = {line.strip() for line in lines}
        series = _series_lines(view, view.series_integration)
        lines.extend(line for line in series if line.strip() not in said or line.startswith("-"))
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
        lines.append(
            "  - the series' test results do not include this PR, so none are counted here"
        )
    others = [
        other
        for other in run.steps
        if other.pr != number and other.outcome == "conflict" and number in other.conflicts_with
    ]
    for other in others:
        lines.append(
            f"  - ⚠️ #{other.pr} conflicts with this PR in {code_list(other.conflicting_paths)};"
            f" it was left out of the series run, and its comment gives the ways out"
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
        files = code_list(step.resolved_files)
        what = f"- {icon} #{step.pr}: generated {files}"
        resolution = step.resolution or ""
        for path in step.resolved_files:  # the stored sentence starts with the path again
            resolution = resolution.removeprefix(f"{path} ")
        if not resolution:
            return what + " conflicted; stackbot regenerated it on the merged tree"
        if resolution.startswith("conflicted"):
            return f"{what} {resolution}"
        return f"{what} conflicted; {resolution}"
    if step.outcome == "skipped":
        return f"- {icon} #{step.pr} skipped: {step.skipped_reason or 'no reason recorded'}"
    return f"- {icon} #{step.pr} {step.outcome}"


def _allowlist(allowlist: AllowlistView | None) -> str:
    """What a human must act on (new reads, files that do not parse) stays in view; the totals
    and the stale entries dropped are folded."""
    if allowlist is None:
        return ""
    delta = allowlist.delta
    total = f"total {_number(allowlist.total_before)} → {_number(allowlist.total_after)}"
    if delta is not None:
        total += f" ({delta:+d})" if delta else " (unchanged)"
    loud = []
    if allowlist.new_reads:
        count = len(allowlist.new_reads)
        loud.append(
            f"- ⚠️ {count} new read{plural_s(count)} that no side listed (a human must allow or "
            f"remove {'them' if count > 1 else 'it'}): {code_list(allowlist.new_reads)}"
        )
    if allowlist.unparsed:
        loud.append(f"- ⚠️ files that do not parse (not scanned): {code_list(allowlist.unparsed)}")
    quiet = []
    if allowlist.stale_dropped:
        count = len(allowlist.stale_dropped)
        entries = "entries" if count > 1 else "entry"
        quiet.append(f"- {count} stale {entries} dropped: {code_list(allowlist.stale_dropped)}")
    summary = f"Allowlist `{allowlist.path}`: {total}"
    if loud:
        folded = _details("stale entries dropped", quiet) if quiet else ""
        return "\n".join([f"**{summary}**", *loud]) + folded
    if not quiet:
        return f"{summary}, regenerated on the merged tree."
    return _details(summary, quiet).strip()


def _number(value: int | None) -> str:
    return "?" if value is None else str(value)


# -- tests ---------------------------------------------------------------------------------------


def _tests(view: PrReportView) -> str:
    """Each test row (and the PR's own test files), folded: the failures above say what the
    verdict needs; the rows are for whoever wants the numbers."""
    blocks = []
    placed: set[int] = set()  # own-test views shown inside a block of test rows
    if view.tests:
        blocks.append(_test_block(view, view.tests, "the stack integration", view.tested_commit))
        placed |= _own_ids(view, "the stack integration", view.tested_commit)
    if view.series_tests and in_tree(view.series_integration, view.pr.number):
        key = view.stack.series_key
        series = f"the series {key} integration" if key else "the series integration"
        blocks.append(_test_block(view, view.series_tests, series, view.series_tested_commit))
        placed |= _own_ids(view, series, view.series_tested_commit)
    # own test files whose tree has no rows here yet are still shown
    blocks.extend(
        block
        for index, own in enumerate(view.own_tests)
        if index not in placed and (block := render_own_tests(own))
    )
    return "\n\n".join(blocks)


def _own_ids(view: PrReportView, where: str, commit: str | None) -> set[int]:
    return {
        index
        for index, own in enumerate(view.own_tests)
        if own.where == where and own.commit in (None, commit)
    }


def _test_block(
    view: PrReportView, rows: tuple[TestRow, ...], where: str, commit: str | None
) -> str:
    summary = f"Tests: {len(rows)} job{plural_s(len(rows))} on {where}"
    if commit:
        summary += f" `{short(commit)}`"
    if view.main_sha:
        summary += f", compared with main `{short(view.main_sha)}`"
    lines = []
    for row in rows:
        lines.append(f"- {test_line(row)}")
        if row.retry_note:
            lines.append(f"  - {retry_line(row)}")
    own = [
        render_own_tests(own)
        for own in view.own_tests
        if own.where == where and own.commit in (None, commit)
    ]
    body = "\n\n".join(["\n".join(lines), *(block for block in own if block)])
    return _details(summary, [body]).strip()


def quarantine_url(pr_url: str | None) -> str | None:
    """The dashboard's quarantine page, beside the PR's page."""
    if not pr_url or "://" not in pr_url:
        return None
    scheme, rest = pr_url.split("://", 1)
    return f"{scheme}://{rest.split('/', 1)[0]}/quarantine"
