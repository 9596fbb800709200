"""One verdict per PR: whether it is fine and what to do next, decided once.

The sticky comment, the check runs, the dashboard and the API all show the :class:`Verdict` that
:func:`decide` gives for a :class:`~stackbot.domain.report_view.PrReportView`, with the words and
the colour (:data:`TONE`) of this module, so the four never disagree.

The rules, first match wins:

1. a PR that is not open is ``closed`` (merged, closed or superseded): nothing to do;
2. ``conflict``: its own merge conflicts, in its stack run or in the series run (with which PR
   and which paths; a conflict with the base branch names the base);
3. ``blocked by #N``: a PR it depends on conflicts, so its tree cannot be built;
4. ``error``: the integration failed for a reason other than a conflict;
5. ``needs approval``: nobody may test this head until a vetter comments ``/ok to test <sha>``;
6. ``new failures``: a test fails on this PR's tree and passes on main (or is new and fails);
7. ``error`` again when a job ended without a usable result (timeout, infra, cancelled; an
   infra job only once its retries on other nodes are spent: a row shows the newest attempt);
8. ``testing``: integrating, or test jobs are queued or running;
9. ``no regressions``: every failure also fails on main (main's problem, shown amber, never red);
10. ``ready``: the tree this PR would land in (its stack, or a series tree holding exactly its
    stack) is integrated and every test passes; ``passes with the series`` when every test
    passes but only on a series tree that also holds PRs above it (issue 24).

A tree's results count for a PR only if the PR is in that tree: the series run's tests are
used only when the PR's own step merged (clean or resolved).
"""

from __future__ import annotations

from stackbot.domain.report_view import IntegrationView, PrReportView, StepView, TestRow
from stackbot.domain.retries import note_text
from stackbot.domain.tested_tree import (
    TestedTree,
    is_landing_tree,
    landing_tree_words,
    own_stack,
    tested_tree,
)
from stackbot.domain.verdict_kinds import (
    ICON,
    TONE,
    RowState,
    Tone,
    Verdict,
    VerdictKind,
    row_state,
)

__all__ = [
    "ICON",
    "TONE",
    "RowState",
    "Tone",
    "Verdict",
    "VerdictKind",
    "decide",
    "in_tree",
    "row_state",
    "step_of",
]


MAX_NAMED = 3  # tests or paths named on the first line before "and N more"
_MERGED_STEP = frozenset({"clean", "resolved"})


# -- steps --------------------------------------------------------------------------------------


def step_of(run: IntegrationView | None, pr: int) -> StepView | None:
    if run is None:
        return None
    index = run.step_positions.get(pr)
    return run.steps[index] if index is not None else None


def in_tree(run: IntegrationView | None, pr: int) -> bool:
    """Whether the run's tree holds the PR (its step merged cleanly or was resolved)."""
    step = step_of(run, pr)
    return step is not None and step.outcome in _MERGED_STEP


def _code(items: tuple[str, ...]) -> str:
    shown = ", ".join(f"`{item}`" for item in items[:MAX_NAMED])
    rest = len(items) - MAX_NAMED
    return f"{shown} and {rest} more" if rest > 0 else shown


def _prs(numbers: tuple[int, ...]) -> str:
    return ", ".join(f"#{n}" for n in numbers)


# -- the decision -------------------------------------------------------------------------------


def decide(view: PrReportView) -> Verdict:
    """The PR's verdict from its report view: the first of the module's rules that matches."""
    number = view.pr.number
    if view.pr.state != "open" or view.pr.superseded_by is not None:
        return _closed(view)
    for run in (view.stack_integration, view.series_integration):
        step = step_of(run, number)
        if step is not None and step.outcome == "conflict" and run is not None:
            return _conflict(view, run, step)
    blocked = _blocked(view)
    if blocked is not None:
        return blocked
    stack = view.stack_integration
    if stack is not None and stack.status == "error":
        return Verdict(
            VerdictKind.ERROR,
            f"the stack integration failed: {stack.error or 'no reason recorded'}",
            "stackbot retries it; if it persists, see the run",
            url=stack.url,
        )
    if view.approval.kind == "waiting":
        sha = view.head_sha[:7]
        summary = f"`{sha}` is not tested until a vetter approves it"
        if view.approval.earlier_sha:
            summary += f" (the approval of `{view.approval.earlier_sha[:7]}` does not carry over: not the same patch)"
        return Verdict(
            VerdictKind.NEEDS_APPROVAL, summary, f"a vetter must comment `/ok to test {sha}`"
        )
    attributed = _attributed(view)
    if attributed is not None:
        return attributed
    return _from_tests(view)


def _attributed(view: PrReportView) -> Verdict | None:
    """A new failure of the series run that bisection attributed to this PR (it broke the
    test), or to a PR merged before it in the series (it is blocked, not blamed)."""
    number = view.pr.number
    series = view.series_integration
    url = series.url if series else None
    new = [f for f in view.findings if f.failure_class == "new" and f.pr is not None]
    mine = tuple(f.nodeid for f in new if f.pr == number)
    if mine:
        return Verdict(
            VerdictKind.NEW_FAILURES,
            f"introduced by this PR (bisected in the series run): {_code(mine)}",
            "fix it in this PR; the PRs above it wait for the fix",
            failing=mine,
            url=url,
        )
    if not new or series is None:
        return None
    # the PRs merged before this one in the series run
    positions = series.step_positions
    mine_at = positions.get(number)
    below = sorted(
        {
            f.pr
            for f in new
            if mine_at is not None and f.pr is not None and positions.get(f.pr, mine_at) < mine_at
        }
    )
    if below:
        culprit = below[0]
        tests = tuple(f.nodeid for f in new if f.pr == culprit)
        return Verdict(
            VerdictKind.BLOCKED,
            f"#{culprit}, merged before this PR in the series, introduced {_code(tests)}",
            f"nothing to change here: wait for #{culprit}'s fix",
            blocked_by=culprit,
            url=url,
        )
    return None


def _closed(view: PrReportView) -> Verdict:
    if view.pr.superseded_by is not None:
        summary = f"superseded by #{view.pr.superseded_by}"
    else:
        summary = f"this PR is {view.pr.state}"
    return Verdict(VerdictKind.CLOSED, summary, "nothing to do: stackbot no longer tests it")


def _conflict(view: PrReportView, run: IntegrationView, step: StepView) -> Verdict:
    paths = step.conflicting_paths
    where = f" in {_code(paths)}" if paths else ""
    which = "in the series run" if run.kind == "series" else "in its stack run"
    others = step.conflicts_with
    depends_on = set(view.stack.ancestors) | {parent.number for parent in view.stack.parents}
    if others and not set(others) & depends_on:
        summary, action = _sibling_conflict(view, others, where)
    elif others:
        summary = f"with {_prs(others)}{where} ({which})"
        mine = tuple(n for n in others if n in depends_on)
        heads = f"#{mine[0]}'s head" if len(mine) == 1 else f"the heads of {_prs(mine)}"
        action = f"merge {heads} into this branch and resolve"
        siblings = tuple(n for n in others if n not in depends_on)
        if siblings:  # merging their heads would make this PR depend on them: the choices
            action += (
                f"; {_prs(siblings)} {'is' if len(siblings) == 1 else 'are'} not a dependency "
                f"(a sibling conflict): declare one with `/stackbot depends-on #{siblings[0]}`, "
                "or let one side land first and rebase the other then"
            )
    else:
        summary = f"with `{run.base_ref}`{where} ({which})"
        action = f"merge `{run.base_ref}` into this branch and resolve"
    return Verdict(
        VerdictKind.CONFLICT,
        summary,
        action + _still_waiting(view),
        conflicts_with=others,
        paths=paths,
        url=run.url,
    )


def _sibling_conflict(view: PrReportView, others: tuple[int, ...], where: str) -> tuple[str, str]:
    """A conflict with PRs this one does not depend on (nor they on it: they merged first in
    the series): merging their heads in would make an independent PR depend on unmerged work,
    so the choices are to declare the dependency or to let one land first."""
    stack = view.stack_integration
    alone = (
        f"; on its own it merges cleanly onto `{stack.base_ref}`"
        if stack is not None and stack.status in ("clean", "resolved")
        else ""
    )
    named = _prs(others)
    summary = (
        f"with {named}{where} in the series run: a sibling conflict, neither PR depends on the "
        f"other{alone}"
    )
    first = others[0]
    action = (
        f"either declare the dependency with `/stackbot depends-on #{first}` (this PR is then "
        f"integrated and tested on top of {named}), or wait until one of #{view.pr.number} and "
        f"{named} lands and rebase the other onto `{stack.base_ref if stack else 'main'}` then"
    )
    return summary, action


def _still_waiting(view: PrReportView) -> str:
    """What the conflict must not hide: that this head is not approved for testing yet."""
    if view.approval.kind != "waiting":
        return ""
    sha = view.head_sha[:7]
    return f"; this head also waits for a vetter to comment `/ok to test {sha}`"


def _blocked(view: PrReportView) -> Verdict | None:
    number = view.pr.number
    stack = view.stack_integration
    if stack is not None and stack.status == "conflict":
        stopped = next((s for s in stack.steps if s.outcome == "conflict"), None)
        if stopped is not None and stopped.pr != number:
            return _blocked_by(stopped.pr, stack.url)
    step = step_of(view.series_integration, number)
    if step is not None and step.outcome == "skipped" and view.series_integration is not None:
        cause = next(
            (
                s.pr
                for s in view.series_integration.steps
                if s.outcome == "conflict" and f"#{s.pr}" in (step.skipped_reason or "")
            ),
            None,
        )
        if cause is not None:
            return _blocked_by(cause, view.series_integration.url)
    return None


def _blocked_by(culprit: int, url: str | None) -> Verdict:
    return Verdict(
        VerdictKind.BLOCKED,
        f"#{culprit}, which this PR depends on, conflicts, so this PR's tree cannot be built",
        f"fix #{culprit}'s conflict first (see its comment)",
        blocked_by=culprit,
        url=url,
    )


def verdict_rows(view: PrReportView) -> tuple[TestRow, ...]:
    """The test rows the verdict is decided on: the stack's, else the series' when the series
    tree holds the PR (series-first testing)."""
    if view.tests:
        return view.tests
    if in_tree(view.series_integration, view.pr.number):
        return view.series_tests
    return ()


def _from_tests(view: PrReportView) -> Verdict:
    stack = view.stack_integration
    if stack is None or stack.status in ("pending", "running"):
        return Verdict(
            VerdictKind.TESTING,
            "integrating onto the base branch",
            "nothing to do yet: this updates itself",
        )
    rows = verdict_rows(view)
    if not rows:
        return Verdict(
            VerdictKind.TESTING,
            f"integrated as `{(stack.commit or '')[:7]}`; test jobs not created yet",
            "nothing to do yet: this updates itself",
        )
    states = [(row, row_state(row)) for row in rows]
    regressed = [row for row, state in states if state == "new-failures"]
    if regressed:
        return _new_failures(regressed)
    trouble = [row for row, state in states if state == "job-trouble"]
    if trouble:
        row = trouble[0]
        summary = f"{row.shown} ended {row.status} without a usable result" + (
            f" ({row.error})" if row.error else ""
        )
        if row.status == "infra" and row.retry_note:
            summary = f"{row.shown} has {note_text(row.retry_note)}"  # each attempt's machine
        return Verdict(
            VerdictKind.ERROR,
            summary,
            f"a vetter comments `/stackbot retest {row.test_set}`",
            url=row.url,
        )
    running = [row for row, state in states if state == "running"]
    if running:
        done = len(rows) - len(running)
        return Verdict(
            VerdictKind.TESTING,
            f"{done} of {len(rows)} test jobs finished; {running[0].shown} {running[0].status}",
            "nothing to do yet: this updates itself",
        )
    # Rows run on fewer ranks than their tests need say nothing of the tree: neutral.
    not_judged = [row for row, state in states if state == "not-judged"]
    judged = [row for row, state in states if state != "not-judged"]
    unjudged_note = (
        f"; not judged: {', '.join(row.shown for row in not_judged)} (fewer ranks than its "
        "tests need)"
        if not_judged
        else ""
    )
    pre_existing = tuple(
        nodeid for row in judged if row.comparison for nodeid in row.comparison.still_failing
    )
    series_note = _series_failures(view) if rows is view.tests else ""
    if any(state == "no-regressions" for _, state in states):
        count = len(pre_existing)
        named = f" ({_code(pre_existing)})" if pre_existing else ""
        return Verdict(
            VerdictKind.NO_REGRESSIONS,
            f"{count or 'some'} test failure{'s' if count != 1 else ''} also fail on main{named}"
            + series_note
            + unjudged_note,
            "nothing to fix in this PR",
        )
    if not judged:  # nothing was run on the ranks its tests need: no verdict on the tree
        return Verdict(
            VerdictKind.ERROR,
            f"not judged: {', '.join(row.shown for row in not_judged)} ran on fewer ranks than "
            "its tests need (the configuration, not this PR)",
            "a maintainer gives the test set a shape with enough ranks",
            url=not_judged[0].url,
        )
    # The headline says where it was tested; the line under it counts the failures (issue 27:
    # not "4 test jobs pass").
    passing = "integrated and tested"
    if rows is view.tests:
        where = f"the integration `{(view.tested_commit or stack.commit or '')[:7]}`"
    else:  # series-first testing: the series tree holds this PR, its own stack ran nothing
        tree = tested_tree(view)
        if tree is not None and not is_landing_tree(view, tree):
            return _with_series(view, tree, unjudged_note)
        series = view.series_integration
        commit = view.series_tested_commit or (series.commit if series else None) or ""
        where = (
            f"the series integration `{commit[:7]}`, this PR's own tree "
            f"({landing_tree_words(view)})"
        )
    summary = f"{passing} on {where}" + series_note + unjudged_note
    return Verdict(VerdictKind.READY, summary, "nothing to do")


def _with_series(view: PrReportView, tree: TestedTree, note: str) -> Verdict:
    """ "ready" is for the tree this PR would land in: a PR that passed only inside the series
    tree (which also holds PRs above it) says so, and how to get its own tree tested."""
    own = set(own_stack(view))
    beyond = tuple(n for n in tree.prs if n not in own) or tree.others(view.pr.number)
    return Verdict(
        VerdictKind.WITH_SERIES,
        f"as part of the series tree with {_prs(beyond)}, it passes on `{tree.commit[:7]}`; "
        f"its own tree ({landing_tree_words(view)}) was not tested alone" + note,
        "land with the series, or `/stackbot test-alone`",
        url=tree.url,
    )


def _series_failures(view: PrReportView) -> str:
    """A note when the series tree (which holds this PR) fails what its stack passes: the
    culprit may be another PR of the series, so it does not decide this PR's verdict."""
    if not in_tree(view.series_integration, view.pr.number):
        return ""
    failing = tuple(
        nodeid
        for row in view.series_tests
        if row.comparison is not None and row.comparison.regressed
        for nodeid in row.comparison.newly_fail + row.comparison.failing_new
    )
    names = tuple(nodeid.split("::")[-1] for nodeid in failing)
    return f"; the series tree also fails {_code(names)}, not this stack" if failing else ""


def _new_failures(rows: list[TestRow]) -> Verdict:
    failing: list[str] = []
    for row in rows:
        comparison = row.comparison
        if comparison is not None:
            failing.extend(n for n in comparison.newly_fail + comparison.failing_new)
    unique = tuple(dict.fromkeys(failing))
    labels = ", ".join(row.shown for row in rows)
    if unique:
        files = tuple(dict.fromkeys(nodeid.split("::")[0] for nodeid in unique))
        names = tuple(nodeid.split("::")[-1] for nodeid in unique)
        summary = (
            f"{_code(names)} fail{'s' if len(unique) == 1 else ''} in {labels} and pass on main"
        )
        log = f"; [log]({rows[0].url}#log)" if rows[0].url else ""
        action = f"fix {_code(files)}{log}"
    else:
        summary = f"more failures than main in {labels} (a rank crashed or a test errored)"
        action = "read the job's log"
    return Verdict(VerdictKind.NEW_FAILURES, summary, action, failing=unique, url=rows[0].url)
