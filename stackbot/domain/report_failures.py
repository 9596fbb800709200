"""A PR's failures counted and grouped, as PyTorch's Dr.CI does: the count line under the
verdict ("❌ 2 new failures · 🟡 1 fails on main too", "✅ no failures · ⚪ 1 flaky") and one
group per kind of failure, each line linked to its job and log.

The groups: NEW FAILURE (fails on this PR's tree, passes on main), FAILS ON MAIN TOO (main's
problem), FLAKY (failed, then passed on a rerun of the same tree), INFRA (a machine or a time
limit gave no usable result: the code is not to blame), and, while the test plan works on it,
BEING CONFIRMED. The rows counted are the ones the verdict is decided on, and the series tree's
when it holds this PR; a failing test is counted once per group even when both trees fail it.
Pure: rendered from the same :class:`~stackbot.domain.report_view.PrReportView` as the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from stackbot.domain.report_lines import code_list, finding_line, plural_s, retry_line
from stackbot.domain.report_view import FindingView, PrReportView, TestRow
from stackbot.domain.verdict import in_tree, row_state, verdict_rows

Group = Literal["new", "main", "flaky", "infra", "pending", "quarantined"]

GROUPS: tuple[tuple[Group, str], ...] = (
    ("new", "**NEW FAILURE**: fails here, passes on main"),
    ("pending", "**BEING CONFIRMED**: failed once, rerun or bisection under way"),
    ("main", "**FAILS ON MAIN TOO**: main's problem, not this PR's"),
    ("flaky", "**FLAKY**: failed, then passed on a rerun of the same tree"),
    ("infra", "**INFRA**: no usable result from the machine; the code is not to blame"),
    ("quarantined", "**QUARANTINED**: failed, not counted (the test is quarantined)"),
)
_TROUBLE = frozenset({"infra", "timeout", "cancelled"})


@dataclass(frozen=True)
class FailureLine:
    group: Group
    text: str  # Markdown, without the list dash
    tests: frozenset[str] = frozenset()  # node ids counted (empty: the job counts once)
    counted: bool = True  # False: shown, not counted (a row that passed on a retry)
    # A failure of the series tree whose own stack passed: another PR of the series may cause
    # it, so it is counted apart and does not make this PR red.
    series_only: bool = False


def failure_lines(view: PrReportView) -> list[FailureLine]:
    """Every failure of the trees that concern this PR, in the order of :data:`GROUPS`."""
    lines: list[FailureLine] = []
    rows = verdict_rows(view)
    stack_tested = bool(view.tests)
    where = "the stack" if stack_tested else "the series tree"
    for row in rows:
        lines.extend(_row_lines(view, row, where))
    from_findings = {(f.label, f.nodeid) for f in view.findings}
    if stack_tested and in_tree(view.series_integration, view.pr.number):
        for row in view.series_tests:
            lines.extend(
                replace(line, series_only=True)
                for line in _row_lines(view, row, "the series tree", skip=from_findings)
            )
    for finding in view.findings:
        line = _finding_line(view, finding)
        if line is not None:
            lines.append(line)
    order = {group: n for n, (group, _) in enumerate(GROUPS)}
    return sorted(lines, key=lambda line: order[line.group])


def _links(view: PrReportView, url: str | None) -> str:
    if not url:
        return ""
    job = url.rsplit("/", 1)[-1]
    return f" — [job {job}]({url}) · [log]({url}#log)"


def _tests_text(nodeids: tuple[str, ...]) -> str:
    """``test_a``, ``test_b`` in ``tests/x.py``; several files: each with its tests."""
    by_file: dict[str, list[str]] = {}
    for nodeid in nodeids:
        path, _, name = nodeid.partition("::")
        by_file.setdefault(path, []).append(name or path)
    return "; ".join(f"{code_list(names)} in `{path}`" for path, names in by_file.items())


def _row_lines(
    view: PrReportView,
    row: TestRow,
    where: str,
    skip: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset(),
) -> list[FailureLine]:
    state = row_state(row)
    on = f"**{row.shown}** on {where}"
    links = _links(view, row.url)
    comparison = row.comparison
    lines: list[FailureLine] = []
    if state == "new-failures" and comparison is not None:
        failing = tuple(
            n for n in comparison.newly_fail + comparison.failing_new if (row.label, n) not in skip
        )
        if failing:
            text = f"❌ {_tests_text(failing)} ({on}){links}"
            lines.append(FailureLine("new", text, frozenset(failing)))
        elif not comparison.newly_fail + comparison.failing_new:
            text = f"❌ {on}: more failures than main (a rank crashed or a test errored){links}"
            lines.append(FailureLine("new", text))
    if comparison is not None and comparison.still_failing:
        still = tuple(n for n in comparison.still_failing if (row.label, n) not in skip)
        if still:
            text = f"🟡 {_tests_text(still)} ({on}){links}"
            lines.append(FailureLine("main", text, frozenset(still)))
    if state == "job-trouble":
        why = f": {row.error}" if row.error else ""
        if row.status in _TROUBLE:
            text = f"⚠️ {on}: no result ({row.status}){why}{links}"
            lines.append(FailureLine("infra", text))
        else:
            text = f"❌ {on} ended {row.status} without a usable result{why}{links}"
            lines.append(FailureLine("new", text))
    elif row.retry_note:
        note = retry_line(row).removeprefix("🔁 ")
        lines.append(FailureLine("infra", f"🔁 {on}: {note}", counted=False))
    return lines


_FINDING_GROUP: dict[str, Group] = {
    "new": "new",
    "pre-existing": "main",
    "flaky": "flaky",
    "suspect": "pending",
    "bisecting": "pending",
    "quarantined": "quarantined",
}


def _finding_line(view: PrReportView, finding: FindingView) -> FailureLine | None:
    text = finding_line(view, finding)
    group = _FINDING_GROUP.get(finding.failure_class)
    if text is None or group is None:
        return None
    jobs = finding.failed_in or finding.jobs
    if view.dashboard and jobs:
        url = f"{view.dashboard}/jobs/{jobs[0]}"
        text += f" [Log of job {jobs[0]}]({url}#log)."
    counted = group != "quarantined"  # shown, never counted (issue 26)
    return FailureLine(group, text, frozenset({finding.nodeid}), counted=counted)


def _count(lines: list[FailureLine], group: Group, *, series_only: bool = False) -> int:
    tests: set[str] = set()
    jobs = 0
    for line in lines:
        if line.group == group and line.counted and line.series_only == series_only:
            if line.tests:
                tests |= line.tests
            else:
                jobs += 1
    return len(tests) + jobs


def count_line(view: PrReportView, lines: list[FailureLine] | None = None) -> str:
    """``❌ 2 new failures · 🟡 1 fails on main too``; ``✅ no failures · ⚪ 1 flaky``; empty
    while no test job of this PR's trees has finished."""
    lines = failure_lines(view) if lines is None else lines
    rows = list(verdict_rows(view))
    finished = [row for row in rows if row_state(row) != "running"]
    if not finished and not lines:
        return ""
    new, pending = _count(lines, "new"), _count(lines, "pending")
    main, flaky, infra = _count(lines, "main"), _count(lines, "flaky"), _count(lines, "infra")
    parts = []
    if new:
        parts.append(f"❌ {new} new failure{plural_s(new)}")
    elsewhere = _count(lines, "new", series_only=True)
    if elsewhere and not new:
        parts.append("✅ no failures on this stack")
    if elsewhere:
        parts.append(
            f"❌ {elsewhere} new failure{plural_s(elsewhere)} in the series tree, not this stack"
        )
    if pending:
        parts.append(f"⏳ {pending} being confirmed")
    if main:
        parts.append(f"🟡 {main} fail{'s' if main == 1 else ''} on main too")
    if infra:
        parts.append(f"⚠️ {infra} without a result (infra)")
    if not parts:
        parts.append("✅ no failures")
    if flaky:
        parts.append(f"⚪ {flaky} flaky")
    held = quarantined_count(lines)
    if held:
        parts.append(f"🔕 {held} quarantined (not counted)")
    running = len(rows) - len(finished)
    if running:
        parts.append(f"⏳ {running} of {len(rows)} test job{plural_s(len(rows))} still running")
    return " · ".join(parts)


def quarantined_count(lines: list[FailureLine]) -> int:
    """The quarantined tests that failed: shown, not counted."""
    return len({n for line in lines if line.group == "quarantined" for n in line.tests})


def render_failure_groups(lines: list[FailureLine], quarantine_page: str | None = None) -> str:
    """The groups that have lines, each under its heading; the quarantined group's heading
    says how many failed (not counted) and links the quarantine page."""
    blocks = []
    for group, heading in GROUPS:
        members = [line.text for line in lines if line.group == group]
        if members and group == "quarantined":
            held = quarantined_count(lines)
            said = f"{held} quarantined test{plural_s(held)} failed (not counted)"
            said = f"{said}: [quarantined tests]({quarantine_page})" if quarantine_page else said
            heading = f"**QUARANTINED**: {said}"
        if members:
            blocks.append("\n".join([heading, *(f"- {text}" for text in members)]))
    return "\n\n".join(blocks)
