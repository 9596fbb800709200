"""Issue 24 end to end, on SQLite (embedded worker) and PostgreSQL (two worker processes): a
tested tree's results are check runs on every PR it holds, under names a repository can
require, naming the tree; verdicts name the tree ("ready" only for the tree the PR would land
in); `/stackbot test-alone` tests a PR's own tree and its check runs are updated in place.

Branch protection is read the way GitHub's merge box does it for required status checks: every
required name has a completed, successful check run on the PR's head SHA
(``checks/list-for-ref``), in :mod:`tests.support.required_checks`, the one place to switch to
the branch-protection API once the stand-in serves it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from sqlmodel import Session, col, select

from stackbot.db.models import IntegrationRun
from tests.e2e.harness import REPO, World, running_world
from tests.support import required_checks

pytestmark = pytest.mark.torchrun

REQUIRED = ("stackbot/tests: quick 1x2",)
FEATURE = "def test_feature():\n    from pkg.feature import feature\n    assert feature() >= 1\n"


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> World:
    with running_world(tmp_path_factory.mktemp("e2e-tree"), request.param) as running:
        yield running  # type: ignore[misc]


def check_runs_for_ref(world: World, sha: str) -> list[dict[str, Any]]:
    token = world.control.create_token("bob")
    return required_checks.check_runs_for_ref(world.stack.github.url, token, REPO, sha)


def missing_required_checks(world: World, sha: str, required: Iterable[str]) -> list[str]:
    return required_checks.missing(check_runs_for_ref(world, sha), required)


def _series(world: World) -> None:
    """#21 → #22 → #23, stacked by base branch, all by a trusted author."""
    c = world.control
    c.open_pull(
        REPO,
        author="alice",
        head="feature-1",
        title="Add a feature",
        body="Part of #200.",
        number=21,
        files={
            "pkg/feature.py": "def feature():\n    return 1\n",
            "tests/test_feature.py": FEATURE,
        },
    )
    c.open_pull(
        REPO,
        author="alice",
        head="feature-2",
        base="feature-1",
        title="Grow the feature",
        body="Part of #200.",
        number=22,
        files={"pkg/feature.py": "def feature():\n    return 2\n"},
    )
    c.open_pull(
        REPO,
        author="alice",
        head="feature-3",
        base="feature-2",
        title="Grow it again",
        body="Part of #200.",
        number=23,
        files={"pkg/feature.py": "def feature():\n    return 3\n"},
    )


def _stack_run_of(world: World, number: int) -> int:
    with Session(world.engine) as session:
        runs = session.exec(
            select(IntegrationRun)
            .where(IntegrationRun.kind == "stack", IntegrationRun.target_pr == number)
            .order_by(col(IntegrationRun.id).desc())
        ).all()
    assert runs and runs[0].id is not None
    return runs[0].id


def _first_line(world: World, number: int) -> str:
    _, body = world.sticky(number)
    return body.splitlines()[1]


def _test_check(world: World, number: int) -> dict[str, Any]:
    head = world.control.pull(REPO, number).head_sha
    [run] = [r for r in check_runs_for_ref(world, head) if r["name"] == REQUIRED[0]]
    return run


def test_every_pr_of_the_tested_series_tree_has_the_required_checks_naming_the_tree(
    world: World,
) -> None:
    _series(world)
    world.settle()
    for number in (21, 22, 23):
        head = world.control.pull(REPO, number).head_sha
        assert missing_required_checks(world, head, REQUIRED) == [], number
        run = _test_check(world, number)
        summary = str(run["output"]["summary"])  # type: ignore[index]
        assert "with #21, #22, #23 on main" in summary and "the series integration" in summary
        assert "· main: 2 passed" in str(run["output"]["title"])  # type: ignore[index]
        integration = [
            r for r in check_runs_for_ref(world, head) if r["name"] == "stackbot/integration"
        ]
        title = str(integration[0]["output"]["title"])  # type: ignore[index]
        assert "series tree" in title or number == 23, title
    # "ready" only where the tested tree is the one the PR lands in (#23: its stack is the
    # series); below it, "passes with the series", with the way to get its own tree tested.
    assert _first_line(world, 23).startswith("✅ **ready**")
    for number, above in ((21, "#22, #23"), (22, "#23")):
        first = _first_line(world, number)
        assert first.startswith(
            f"☑️ **passes with the series**: as part of the series tree with {above},"
        )
        assert first.endswith("land with the series, or `/stackbot test-alone`")


def test_test_alone_tests_the_prs_own_tree_and_updates_the_same_check_runs(world: World) -> None:
    before = _test_check(world, 21)
    head = world.control.pull(REPO, 21).head_sha
    world.control.comment(REPO, 21, "bob", "/stackbot test-alone")
    world.settle()
    replies = [c.body for c in world.control.comments(REPO, 21) if c.body.startswith("Testing #21")]
    assert len(replies) == 1 and "main + #21" in replies[0]
    # #21's stack run has its own jobs now (or results of an identical tree taken over)
    stack_jobs = [j for j in world.jobs() if j.integration_run_id == _stack_run_of(world, 21)]
    assert stack_jobs and all(j.status == "passed" for j in stack_jobs)
    assert _first_line(world, 21).startswith("✅ **ready**")
    after = _test_check(world, 21)
    assert after["id"] == before["id"]  # the same check run, updated (no second one)
    summary = str(after["output"]["summary"])  # type: ignore[index]
    assert "the stack integration" in summary and "with #21 on main" in summary
    assert missing_required_checks(world, head, REQUIRED) == []
    # the other PRs' results still come from the series tree
    assert _first_line(world, 22).startswith("☑️ **passes with the series**")
