"""The check runs stackbot sets on a PR's head: ``stackbot/tests: <test set> <shape>`` per test
row of the tree the PR was tested in and ``stackbot/tests: own files`` for its own test files
(on every PR that tree holds, naming the tree: issue 24), ``stackbot/integration``,
``stackbot/series-tests`` and ``stackbot/approval``, rendered from the same
:class:`~stackbot.domain.report_view.PrReportView` as the sticky comment."""

from __future__ import annotations

from stackbot.domain.approval_carry import carried_note
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
)
from stackbot.domain.tested_tree import TestedTree, is_landing_tree, tested_tree
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
    if row_state(row) == "not-judged":
        return "neutral"  # too few ranks for its tests: the configuration, not the code
    comparison = row.comparison
    if comparison is None or row.status == "error":
        return "failure"
    if comparison.failures == 0:
        return "success"
    # Failing tests that fail on main too are main's problem, not this PR's.
    return "failure" if comparison.regressed else "neutral"


TESTS_CHECK_PREFIX = "stackbot/tests: "
OWN_FILES_CHECK = TESTS_CHECK_PREFIX + "own files"
# A PR's own test files: its rows are ``own:N`` (its part of the tree's batched ``own`` job).
OWN_SET_PREFIX = "own:"
OWN_SET = "own"


def _is_own(test_set: str) -> bool:
    return test_set == OWN_SET or test_set.startswith(OWN_SET_PREFIX)


def check_run_name(test_set: str, shape: str) -> str:
    """The stable name a repository can require: ``stackbot/tests: amax-group 1x4``."""
    if _is_own(test_set):
        return OWN_FILES_CHECK
    return f"{TESTS_CHECK_PREFIX}{test_set} {shape}"


def is_own_row(row: TestRow) -> bool:
    return _is_own(row.test_set)


INTEGRATION_CHECK = "stackbot/integration"
SERIES_TESTS_CHECK = "stackbot/series-tests"
APPROVAL_CHECK = "stackbot/approval"


def ordered_rows(view: PrReportView) -> tuple[TestRow, ...]:
    """The test rows of the tree the PR was tested in (its stack's, else the series' that
    holds it), new failures first (GitHub's merge box lists check runs in the order they were
    created)."""
    order = {
        "new-failures": 0,
        "job-trouble": 1,
        "no-regressions": 2,
        "not-judged": 3,
        "running": 3,
        "passed": 4,
    }
    tree = tested_tree(view)
    rows = tree.rows if tree is not None else view.tests
    return tuple(sorted(rows, key=lambda row: order[row_state(row)]))


def _tree_row(view: PrReportView, test_set: str, shape: str) -> TestRow:
    tree = tested_tree(view)
    for row in tree.rows if tree is not None else ():
        if (row.test_set, row.shape) == (test_set, shape):
            return row
    return view.row(test_set, shape)


def render_check_run(view: PrReportView, test_set: str, shape: str) -> CheckRunContent:
    row = _tree_row(view, test_set, shape)
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
    tree = tested_tree(view)
    if tree is not None and tree.kind == "series":
        # The stack's own commit was not tested: name the commit the tests ran on.
        title += f"; its tests ran on the series tree {short(tree.commit)}"
        summary += f"\n- tests ran on {tree.describe()}"
    elif stack.commit:
        title += f" as {short(stack.commit)}"
        title += ", the commit its tests ran on" if tree is not None else ""
    return CheckRunContent(INTEGRATION_CHECK, "completed", "success", title[:1000], summary)


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
    held = len({f.nodeid for f in concerning if f.failure_class == "quarantined"})
    if held:
        title = f"no counted failures: {held} quarantined test{plural_s(held)} failed (not counted)"
        return CheckRunContent(SERIES_TESTS_CHECK, "completed", "success", title, summary)
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
    elif approval.carried_from:
        title = f"{head} approved by @{approval.by} ({carried_note(approval.carried_from)})"
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
    "not-judged": "not judged",
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
    tree = tested_tree(view)
    if tree is not None:
        lines.append(f"- tested on {tree.describe()}{_tree_note(view, tree)}")
    elif view.tested_commit:
        lines.append(f"- integration commit: `{short(view.tested_commit)}`")
    if view.main_sha:
        lines.append(f"- compared with {_base_ref(tree)} `{short(view.main_sha)}`")
    lines.append(f"- result: {test_summary(row)}")
    if row.retry_note:
        lines.append(f"- attempts: {retry_line(row)}")
    if row.url:
        job = row.url.rsplit("/", 1)[-1]
        lines.append(f"- [job {job}]({row.url}) · [log]({row.url}#log)")
    return "\n".join(lines)


def _base_ref(tree: TestedTree | None) -> str:
    return tree.base_ref if tree is not None else "main"


def _tree_note(view: PrReportView, tree: TestedTree) -> str:
    if is_landing_tree(view, tree):
        return " (the tree this PR lands in)"
    return " (a larger tree than this PR's own: `/stackbot test-alone` tests that one)"


def render_own_files_check(view: PrReportView, rows: tuple[TestRow, ...]) -> CheckRunContent:
    """``stackbot/tests: own files``: the PR's own test files on every shape they ran on, in
    one check run (its name holds no shape, so a repository can require it whatever shapes the
    files need): in progress while one runs, else the worst of the rows' conclusions."""
    verdict = decide(view)
    lines = [
        *_headline(view, verdict),
        "",
        f"#{view.pr.number}'s own test files at `{short(view.head_sha)}`",
    ]
    tree = tested_tree(view)
    if tree is not None:
        lines.append(f"- tested on {tree.describe()}{_tree_note(view, tree)}")
    if view.main_sha:
        lines.append(f"- compared with {_base_ref(tree)} `{short(view.main_sha)}`")
    for row in rows:
        lines.append(
            f"- {row.shape}: {test_summary(row)}" + (f" ({row.url}#log)" if row.url else "")
        )
    summary = "\n".join(lines)
    texts = [text for row in rows if (text := _check_text(row))]
    text = "\n\n".join(texts) or None
    running = [row for row in rows if row.status in RUNNING_WORD]
    if running:
        word = RUNNING_WORD[running[0].status]
        status: CheckStatus = "queued" if word == "queued" else "in_progress"
        return CheckRunContent(OWN_FILES_CHECK, status, None, word, summary, text)
    conclusions = [_own_conclusion(view, row) for row in rows]
    worst = min(conclusions, key=_SEVERITY.index) if conclusions else "neutral"
    titles = [f"{row.shape}: {_title(row)}" for row in rows]
    return CheckRunContent(
        OWN_FILES_CHECK, "completed", worst, "; ".join(titles)[:1000], summary, text
    )


_SEVERITY: list[Conclusion] = [
    "failure",
    "timed_out",
    "cancelled",
    "action_required",
    "neutral",
    "success",
]


def _own_conclusion(view: PrReportView, row: TestRow) -> Conclusion:
    if introduced_here(view, row.test_set, row.shape):
        return "failure"
    return row_conclusion(row) or "neutral"


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


def render_retired_check(name: str, view: PrReportView) -> CheckRunContent:
    """A test check run this head got for an earlier tree that the PR's tree now has no rows
    for (the series graph changed: a stacked PR's "own" files were its parent's until the parent
    joined the series). Completed as neutral, never left queued: a queued check run a branch
    protection rule requires would block the merge for good."""
    return CheckRunContent(
        name=name,
        status="completed",
        conclusion="neutral",
        title="no longer run for this commit",
        summary=(
            f"The tree #{view.pr.number} is tested in now runs none of these tests; this check "
            "was for an earlier tree (the series changed since). Nothing here counts for or "
            "against the PR."
        ),
    )
