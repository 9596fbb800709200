"""Report views built from stored rows: approvals, the stack, runs, jobs and main's baseline."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from stackbot.config import Settings, load_settings
from stackbot.db import github_store as store
from stackbot.db.engine import session_scope
from stackbot.db.models import IntegrationRun, IntegrationStep, Job, TestResult
from stackbot.domain.comparison import Counts
from stackbot.domain.records import PrRecord
from stackbot.domain.report import render_sticky_comment
from stackbot.domain.types import PrNumber
from stackbot.services.report_views import build_report_view

REPO = "NVIDIA/Megatron-LM"
ALLOWLIST = "tools/process_group_usage_allowlist.json"
MAIN = "7" * 40
HEAD = "be10fd5" + "0" * 33
OLD = "1dd9473" + "0" * 33


def report_settings(tmp_path: Path) -> Settings:
    return load_settings(dev=True, data_dir=tmp_path / "data", public_url="http://bot.example/")


def job(
    repo_id: int,
    run_id: int | None,
    shape: str,
    status: str,
    result: dict[str, object] | None,
    **extra: object,
) -> Job:
    return Job(
        repo_id=repo_id,
        integration_run_id=run_id,
        kind="integration" if run_id else "baseline",
        test_set="amax-group",
        shape=shape,
        tree_sha="t" * 40,
        commit_sha=MAIN if run_id is None else "c" * 40,
        config_hash="h",
        status=status,
        result=result,
        **extra,  # type: ignore[arg-type]
    )


def result_json(passed: int, failed: int) -> dict[str, object]:
    tests = [{"nodeid": f"t.py::test_{i}", "outcome": "passed"} for i in range(passed)]
    tests += [
        {"nodeid": f"t.py::test_{i}", "outcome": "failed"} for i in range(passed, passed + failed)
    ]
    return {
        "status": "failed" if failed else "passed",
        "counts": {"passed": passed, "failed": failed},
        "tests": tests,
    }


def seed(engine: Engine) -> int:
    with session_scope(engine) as session:
        repo = store.upsert_repository(session, full_name=REPO, clone_url="x")
        assert repo.id is not None
        for number, head, body in (
            (8034, "a" * 40, ""),
            (8035, OLD, "Depends on #8034"),
            (8748, "d" * 40, ""),
        ):
            store.save_pull(
                session,
                repo_id=repo.id,
                record=PrRecord(
                    number=PrNumber(number), title=f"PR {number}", head_sha=head, body=body
                ),
            )
        store.save_pull(
            session,
            repo_id=repo.id,
            record=PrRecord(number=PrNumber(8035), title="PR 8035", head_sha=HEAD),
        )
        store.replace_graph(
            session,
            repo_id=repo.id,
            edges=[(8035, 8034, "depends_on"), (8748, 8035, "base_branch")],
            series=[
                store.SeriesData(
                    "#6307",
                    (8034, 8035, 8748),
                    tracking_issue=6307,
                    problems=(
                        {
                            "kind": "missing_parent",
                            "prs": [8035, 7000],
                            "detail": "#7000 does not exist",
                        },
                    ),
                )
            ],
        )
        store.add_approval(
            session, repo_id=repo.id, pr_number=8035, sha=OLD, vetter="phlip", kind="ok_to_test"
        )
        old_run = IntegrationRun(
            repo_id=repo.id,
            kind="stack",
            target_pr=8035,
            base_ref="main",
            base_sha=MAIN,
            status="clean",
            heads={"8034": "a" * 40, "8035": OLD},
        )
        run = IntegrationRun(
            repo_id=repo.id,
            kind="stack",
            target_pr=8035,
            base_ref="main",
            base_sha=MAIN,
            status="resolved",
            final_commit="c" * 40,
            heads={"8034": "a" * 40, "8035": HEAD},
            allowlist={
                "path": ALLOWLIST,
                "total": 194,
                "base_total": 195,
                "new": [],
                "stale": ["m.py:f:accessor:parallel_state.get_x_group"],
                "unparsed": [],
            },
        )
        session.add_all([old_run, run])
        session.flush()
        assert run.id is not None
        session.add(
            IntegrationStep(
                run_id=run.id, position=0, pr_number=8034, head_sha="a" * 40, outcome="clean"
            )
        )
        session.add(
            IntegrationStep(
                run_id=run.id,
                position=1,
                pr_number=8035,
                head_sha=HEAD,
                outcome="resolved",
                conflicts=[{"path": ALLOWLIST, "type": "contents"}],
                resolution="regenerated on the merged tree",
            )
        )
        source = job(repo.id, old_run.id, "2x4", "passed", result_json(23, 0))
        session.add(source)
        session.flush()
        session.add(job(repo.id, None, "1x4", "failed", result_json(14, 9)))  # main's baseline
        session.add(job(repo.id, run.id, "1x4", "passed", result_json(23, 0)))
        session.add(
            job(repo.id, run.id, "2x4", "passed", result_json(23, 0), reused_from_job_id=source.id)
        )
        series_run = IntegrationRun(
            repo_id=repo.id,
            kind="series",
            series_key="#6307",
            base_ref="main",
            base_sha=MAIN,
            status="clean",
            final_commit="5" * 40,
            heads={"8034": "a" * 40, "8035": HEAD, "8748": "d" * 40},
        )
        session.add(series_run)
        session.flush()
        for position, (number, sha) in enumerate(series_run.heads.items()):
            session.add(
                IntegrationStep(
                    run_id=series_run.id,
                    position=position,
                    pr_number=int(number),
                    head_sha=sha,
                    outcome="clean",
                )
            )
        session.add(job(repo.id, series_run.id, "1x4", "failed", result_json(20, 3)))
        queued = job(repo.id, run.id, "4x4", "running", None)
        session.add(queued)
        counted = job(repo.id, run.id, "1x8", "failed", None)
        session.add(counted)
        session.flush()
        session.add(TestResult(job_id=counted.id or 0, nodeid="t.py::test_0", outcome="failed"))
        return repo.id


def test_a_view_from_stored_state(engine: Engine, tmp_path: Path) -> None:
    seed(engine)
    with session_scope(engine) as session:
        view = build_report_view(session, report_settings(tmp_path), repo=REPO, number=8035)
    assert view is not None
    assert view.head_sha == HEAD
    assert view.url == "http://bot.example/pulls/8035"
    # the approval was for the old head: it does not carry over
    assert view.approval.kind == "waiting" and view.approval.earlier_sha == OLD
    assert [p.number for p in view.stack.parents] == [8034]
    assert [c.number for c in view.stack.children] == [8748]
    assert view.stack.series_key == "#6307"
    assert view.stack.problems == ("#7000 does not exist",)
    stack = view.stack_integration
    assert stack is not None and stack.status == "resolved" and stack.commit == "c" * 40
    assert stack.steps[1].resolved_files == (ALLOWLIST,) and stack.steps[1].conflicting_paths == ()
    assert view.allowlist is not None and view.allowlist.delta == -1
    rows = {row.label: row for row in view.tests}
    assert sorted(rows) == ["amax-group 1x4", "amax-group 1x8", "amax-group 2x4", "amax-group 4x4"]
    one = rows["amax-group 1x4"].comparison
    assert (
        one is not None
        and one.main_counts == Counts(passed=14, failed=9)
        and len(one.newly_pass) == 9
    )
    assert rows["amax-group 2x4"].reused_from is not None
    assert rows["amax-group 2x4"].reused_from.run_id is not None
    assert rows["amax-group 4x4"].comparison is None
    per_test = rows["amax-group 1x8"].comparison
    assert per_test is not None and per_test.counts == Counts(failed=1)
    series = view.series_integration
    assert series is not None and series.commit == "5" * 40
    [series_row] = view.series_tests
    assert series_row.comparison is not None
    assert (len(series_row.comparison.newly_pass), len(series_row.comparison.still_failing)) == (
        6,
        3,
    )
    assert view.series_tested_commit == "5" * 40
    text = render_sticky_comment(view)
    assert "on the series #6307 integration `5555555`" in text
    assert "amax-group 1x4**: 23 passed · main: 14 passed, 9 failed (9 newly pass)" in text


def test_the_current_heads_approval_and_missing_prs(engine: Engine, tmp_path: Path) -> None:
    repo_id = seed(engine)
    settings = report_settings(tmp_path)
    with session_scope(engine) as session:
        store.add_approval(
            session, repo_id=repo_id, pr_number=8035, sha=HEAD, vetter="dima", kind="ok_to_test"
        )
        store.add_approval(
            session, repo_id=repo_id, pr_number=8748, sha="d" * 40, vetter="conn", kind="trusted"
        )
    with session_scope(engine) as session:
        view = build_report_view(session, settings, repo=REPO, number=8035)
        trusted = build_report_view(session, settings, repo=REPO, number=8748)
        assert build_report_view(session, settings, repo=REPO, number=1) is None
        assert build_report_view(session, settings, repo="other/repo", number=8035) is None
    assert view is not None and (view.approval.kind, view.approval.by) == ("approved", "dima")
    assert trusted is not None and (trusted.approval.kind, trusted.approval.by) == (
        "trusted",
        "conn",
    )
    assert trusted.stack_integration is None and trusted.tests == ()
