"""The failure classes as a PR's reader sees them (issue 13): the series run's findings, made by
the real planner over the real queue (benchmarks/plan_sim.py) on both databases, loaded as the
report views load them, rendered into the sticky comment and the ``stackbot/series-tests``
check run."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session

from benchmarks.plan_sim import Injected, Simulation
from stackbot.config import Settings
from stackbot.db import jobs_store
from stackbot.db.engine import session_scope
from stackbot.db.models import IntegrationRun
from stackbot.domain.quarantine import QuarantinePolicy
from stackbot.domain.report import render_sticky_comment
from stackbot.domain.report_checks import render_series_tests_check
from stackbot.domain.report_view import (
    ApprovalView,
    IntegrationView,
    PrRef,
    PrReportView,
    StackView,
    StepView,
)
from stackbot.services import quarantine
from stackbot.services.report_findings import series_findings
from stackbot.services.report_rows import run_test_rows
from stackbot.web.readmodel.cells import cells_of_runs

PRS = 8


def _views(sim: Simulation, run_id: int) -> dict[int, PrReportView]:
    with Session(sim.engine) as session:
        run = session.get(IntegrationRun, run_id)
        assert run is not None
        findings = series_findings(session, run)
    series = IntegrationView(
        kind="series",
        status="clean",
        base_ref="main",
        base_sha="77391e7f" + "0" * 32,
        commit="5e71e5c2" + "0" * 32,
        url="http://stackbot.example:8000/runs/" + str(run_id),
        steps=tuple(StepView(n, "clean") for n in range(1, PRS + 1)),
    )
    return {
        n: PrReportView(
            repo="NVIDIA/Megatron-LM",
            pr=PrRef(n, f"layer {n}"),
            head_sha=f"{n:040x}",
            approval=ApprovalView("trusted", by="maintainer"),
            stack=StackView(series_key="#6307"),
            series_integration=series,
            findings=findings,
        )
        for n in range(1, PRS + 1)
    }


def _sim(engine: Engine, settings: Settings, injected: Injected) -> tuple[Simulation, int]:
    settings = settings.model_copy(update={"test_plan_policy": "series-first"})
    sim = Simulation(engine, settings, prs=PRS, injected=injected)
    pushed = sim.push()
    sim.drive()
    return sim, pushed.series_run


def _keep(name: str, text: str) -> None:
    """Write the rendered text where a reviewer can read it (REPORT_RENDER_DIR)."""
    where = os.environ.get("REPORT_RENDER_DIR")
    if where:
        Path(where, name).write_text(text)


def test_a_new_failure_is_told_to_the_pr_that_introduced_it(
    engine: Engine, settings: Settings
) -> None:
    sim, run_id = _sim(engine, settings, Injected(fail_at=[4]))
    views = _views(sim, run_id)
    nodeid = "tests/unit_tests/test_layer_4.py::test_fail_4"

    culprit = render_sticky_comment(views[4])
    _keep("new-culprit.md", culprit)
    assert f"❌ **Introduced by this PR**: `{nodeid}` (amax-group 1x4)" in culprit
    assert "passes on the first 3 PRs of the series (up to #3)" in culprit
    assert "fails on the first 4 PRs of the series (up to #4)" in culprit
    assert "confirming rerun of the series tree: job" in culprit
    assert "bisection: the first 3 PRs: job" in culprit
    assert culprit.splitlines()[1].startswith(
        f"❌ **new failures**: introduced by this PR (bisected in the series run): `{nodeid}`"
    )
    check = render_series_tests_check(views[4])
    assert check is not None
    assert (check.conclusion, check.title) == ("failure", f"introduced by this PR: {nodeid}")

    above = render_sticky_comment(views[6])
    _keep("new-above.md", above)
    assert "Introduced by this PR" not in above
    assert above.splitlines()[1].startswith(
        f"🚧 **blocked by #4**: #4, merged before this PR in the series, introduced `{nodeid}`"
    )
    assert "which introduced it (not this PR): this PR is blocked by #4" in above
    check = render_series_tests_check(views[6])
    assert check is not None
    assert (check.conclusion, check.title) == ("neutral", "blocked by #4 (a failure it introduced)")

    # PRs below #4 do not hold the failure: nothing is said to them.
    assert "test_fail_4" not in render_sticky_comment(views[2])
    assert render_series_tests_check(views[2]) is None


def test_a_flaky_test_is_listed_with_both_runs_and_blames_no_one(
    engine: Engine, settings: Settings
) -> None:
    sim, run_id = _sim(engine, settings, Injected(flaky_at=[3]))
    [finding] = sim.findings(run_id)
    failed, passed = finding.evidence["failed_in"], finding.evidence["passed_in"]
    views = _views(sim, run_id)
    for n in (3, 8):
        comment = render_sticky_comment(views[n])
        _keep(f"flaky-{n}.md", comment)
        assert (
            f"⚪ flaky: `tests/unit_tests/test_layer_3.py::test_flaky_3` (amax-group 1x4) "
            f"failed in job {failed[0]}, passed on a rerun of the same tree in job {passed[0]}; "
            "not counted as a failure, attributed to no PR."
        ) in comment
        assert "Introduced by this PR" not in comment and "blocked by" not in comment
        check = render_series_tests_check(views[n])
        assert check is not None and check.conclusion == "success"


def test_a_quarantined_tests_failure_is_shown_and_not_counted(
    engine: Engine, settings: Settings
) -> None:
    settings = settings.model_copy(update={"test_plan_policy": "series-first"})
    sim = Simulation(engine, settings, prs=PRS, injected=Injected(flaky_at=[3]))
    nodeid = "tests/unit_tests/test_layer_3.py::test_flaky_3"
    with session_scope(engine) as session:
        quarantine.quarantine_by_maintainer(
            session, sim.repo_id, nodeid, login="maintainer", policy=QuarantinePolicy()
        )
    run_id = sim.push().series_run
    sim.drive()
    [finding] = sim.findings(run_id)
    assert finding.failure_class == "quarantined"
    view = replace(_views(sim, run_id)[5], url="http://stackbot.example:8000/pr/NVIDIA/x/5")
    comment = render_sticky_comment(view)
    _keep("quarantined-5.md", comment)
    assert (
        "1 quarantined test failed (not counted): "
        "[quarantined tests](http://stackbot.example:8000/quarantine)"
    ) in comment
    assert f"🔕 quarantined: `{nodeid}` (amax-group 1x4) failed in job" in comment
    assert "new failures" not in comment and "Introduced by this PR" not in comment
    check = render_series_tests_check(view)
    assert check is not None and check.conclusion == "success"
    assert check.title == "no counted failures: 1 quarantined test failed (not counted)"


def test_a_failure_on_main_is_pre_existing_and_amber(engine: Engine, settings: Settings) -> None:
    sim, run_id = _sim(engine, settings, Injected(broken_on_main=True))
    views = _views(sim, run_id)
    comment = render_sticky_comment(views[5])
    _keep("pre-existing.md", comment)
    assert (
        "🟡 `tests/unit_tests/test_main.py::test_broken_on_main` (amax-group 1x4) also fails "
        "on main: not caused by the series."
    ) in comment
    check = render_series_tests_check(views[5])
    assert check is not None
    assert check.conclusion == "neutral"
    assert check.title == "no new failures: the failing tests also fail on main"


def test_the_run_page_lists_each_failing_test_with_its_class_and_pr(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    from fastapi.testclient import TestClient

    from stackbot.web.app import create_app

    sim, run_id = _sim(engine, settings, Injected(fail_at=[4], flaky_at=[2]))
    [flaky] = [f for f in sim.findings(run_id) if f.failure_class == "flaky"]
    app = create_app(settings, engine=engine)
    with TestClient(app) as client:
        page = client.get(f"/runs/{run_id}").text
    _keep("run-page.html", page)
    assert "<h2>Failing tests</h2>" in page
    assert "<code>tests/unit_tests/test_layer_4.py::test_fail_4</code>" in page
    assert '<td>new</td>\n<td><a class="pr" href="/pulls/4">#4</a></td>' in page
    assert "<td>flaky (passed on a rerun)</td>" in page
    failed, passed = flaky.evidence["failed_in"][0], flaky.evidence["passed_in"][0]
    assert f"failed in job {failed}, passed in job {passed}" in page


def test_the_series_rows_show_the_series_tree_not_the_last_bisection_probe(
    engine: Engine, settings: Settings
) -> None:
    """Bisection probes are jobs of the series run on prefixes of it (other trees): the run's
    row of that configuration is still its own tree's result (the failing rerun), never the
    last probe (which passed: it did not hold the culprit)."""
    sim, run_id = _sim(engine, settings, Injected(fail_at=[4]))
    with Session(sim.engine) as session:
        run = session.get(IntegrationRun, run_id)
        assert run is not None
        jobs = jobs_store.jobs_of_run(session, run_id=run_id)
        probes = [j for j in jobs if j.step_position is not None]
        assert probes and probes[-1].id == max(j.id or 0 for j in jobs)
        assert probes[-1].status == "passed"
        rows, _ = run_test_rows(session, run, "", None)
        cells = cells_of_runs(session, [run])[run_id]
    [row] = [r for r in rows if r.label == "amax-group 1x4"]
    assert row.status == "failed" and row.comparison is not None
    assert row.comparison.counts.failed == 1, row.comparison
    [cell] = [c for c in cells if c.label == "amax-group 1x4"]
    assert cell.job is not None and cell.job.status == "failed" and cell.job.step_position is None
