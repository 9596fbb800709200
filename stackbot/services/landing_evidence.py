"""The one question a landing asks of stackbot's results: was this exact tree tested green, for
these PR heads, with all its test sets and the PRs' own test files, on this main?

:func:`tested_tree` answers it with what the store holds today: the newest integration run of
these heads on this main (the series run when the whole series lands, the stack run of #N for a
prefix), its jobs on the final tree and its findings. When results are keyed by tree, test-set
definition, shape and runner environment (issue 24), this is the one function to switch: the
landing only reads the :class:`~stackbot.domain.landing.TreeEvidence` it returns.

Green means: the run integrated (clean, or resolved by regeneration), it has jobs, every job
finished, and every failure is a failure main has too (pre-existing) or a confirmed flake; no
finding is new, suspect or still bisecting; no job ended without a usable result. A series run
that left a PR out of its tree for a conflict counts for a landing that does not take that PR.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import Engine

from stackbot.db import landing_store
from stackbot.db.engine import session_scope
from stackbot.db.models import Job, TestFinding
from stackbot.db.models.jobs import FINISHED_STATES
from stackbot.domain.landing import TreeEvidence
from stackbot.domain.report_checks import check_run_name

_INTEGRATED = frozenset({"clean", "resolved"})
_NOT_GREEN_FINDINGS = frozenset({"new"})
_UNDECIDED_FINDINGS = frozenset({"suspect", "bisecting"})
_NO_RESULT = frozenset({"error", "timeout", "infra", "cancelled"})


def tested_tree(
    engine: Engine,
    *,
    repo_id: int,
    series_key: str,
    numbers: Sequence[int],
    heads: Mapping[int, str],
    main_sha: str,
    whole_series: bool,
    gate: bool = False,
) -> TreeEvidence:
    """Whether the tree of ``numbers`` at ``heads`` merged onto ``main_sha`` was tested green.

    ``gate``: ``numbers`` is a speculative tree (the landings ahead in the gate, then this
    one), found only as a gate run of exactly those PRs. Otherwise the series run (the whole
    series) or the stack run of the last PR (a prefix) answers, or a gate run of exactly
    ``numbers`` (what a landing asks for when the test plan gave its tree no run of its own)."""
    kinds = ["gate"] if gate else ["series" if whole_series else "stack", "gate"]
    with session_scope(engine, immediate=False) as session:
        found = [
            run
            for kind in kinds
            if (
                run := landing_store.newest_matching_run(
                    session,
                    repo_id=repo_id,
                    kind=kind,
                    series_key=series_key,
                    target_pr=numbers[-1] if numbers else None,
                    base_sha=main_sha,
                    heads={n: heads[n] for n in numbers},
                )
            )
            is not None
        ]
        run = max(found, key=lambda r: r.id or 0) if found else None
        if run is None or run.id is None:
            return TreeEvidence("untested", detail="its integration on the current main")
        if run.status in ("pending", "running"):
            return TreeEvidence("testing", run.id, detail="its integration on the current main")
        # A series run that left out only PRs this landing does not take (a conflicting
        # sibling) integrated exactly this landing's tree.
        left_out = set(landing_store.left_out_of_run(session, run_id=run.id))
        integrated = run.status in _INTEGRATED or (
            run.status == "conflict" and bool(run.final_tree) and not left_out & set(numbers)
        )
        if not integrated:
            why = "a conflict" if run.status == "conflict" else "an integration error"
            return TreeEvidence("failed", run.id, detail=f"its integration ended in {why}")
        jobs, findings = landing_store.tree_jobs_and_findings(session, run_id=run.id)
        evidence = _judge(run.id, run.final_tree, jobs, findings)
        if evidence.state == "testing" and not jobs and run.kind != "gate":
            # The test plan gave this run no jobs (a prefix under series-first): the landing
            # asks for its exact tree as a gate run, which is tested.
            return TreeEvidence("untested", run.id, run.final_tree, "its tree to be tested")
        return evidence


def _judge(
    run_id: int, tree: str | None, jobs: Sequence[Job], findings: Sequence[TestFinding]
) -> TreeEvidence:
    if not jobs:
        return TreeEvidence("testing", run_id, tree, "its test jobs to be planned")
    running = [j for j in jobs if j.status not in FINISHED_STATES]
    if running:
        return TreeEvidence("testing", run_id, tree, f"{len(running)} test job(s) to finish")
    classes = {f.failure_class for f in findings}
    if classes & _NOT_GREEN_FINDINGS:
        new = sorted(f.nodeid for f in findings if f.failure_class in _NOT_GREEN_FINDINGS)
        return TreeEvidence("failed", run_id, tree, f"new failures: {', '.join(new[:3])}")
    if classes & _UNDECIDED_FINDINGS:
        return TreeEvidence("testing", run_id, tree, "failing tests to be confirmed or bisected")
    classified = {(f.test_set, f.shape) for f in findings}
    unclassified = [
        j for j in jobs if j.status == "failed" and (j.test_set, j.shape) not in classified
    ]
    if unclassified:
        return TreeEvidence("testing", run_id, tree, "failing tests to be compared with main")
    # A job without a usable result counts only if no later attempt of it has one.
    settled = {(j.test_set, j.shape, tuple(j.targets or ())) for j in jobs if j.status == "passed"}
    settled |= {(j.test_set, j.shape, tuple(j.targets or ())) for j in jobs if j.status == "failed"}
    broken = [
        j
        for j in jobs
        if j.status in _NO_RESULT and (j.test_set, j.shape, tuple(j.targets or ())) not in settled
    ]
    if broken:
        names = ", ".join(sorted({f"{j.test_set} {j.shape}" for j in broken}))
        return TreeEvidence("failed", run_id, tree, f"jobs without a result: {names}")
    return TreeEvidence("green", run_id, tree, "tested green")


def tree_evidence(engine: Engine, *, repo_id: int, tree: str) -> tuple[TreeEvidence, list[str]]:
    """Whether the git tree ``tree`` was tested (results keyed by tree: any integration run of
    the repository whose final tree it is, newest first, a green one preferred), and the names
    of the check runs its jobs give a PR (``stackbot/tests: <test set> <shape>``, own files)."""
    with session_scope(engine, immediate=False) as session:
        runs = landing_store.runs_with_tree(session, repo_id=repo_id, tree=tree)
        verdicts: list[tuple[TreeEvidence, list[str]]] = []
        for run in runs:
            assert run.id is not None
            if run.status in ("pending", "running"):
                verdicts.append((TreeEvidence("testing", run.id, tree, "its tests to run"), []))
                continue
            if run.status not in _INTEGRATED and run.status != "conflict":
                continue
            jobs, findings = landing_store.tree_jobs_and_findings(session, run_id=run.id)
            names = sorted({check_run_name(j.test_set, j.shape) for j in jobs})
            verdicts.append((_judge(run.id, tree, jobs, findings), names))
    for wanted in ("green", "testing", "failed"):
        found = next((v for v in verdicts if v[0].state == wanted), None)
        if found is not None:
            return found
    return TreeEvidence("untested", detail="no run of this tree"), []
