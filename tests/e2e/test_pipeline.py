"""The pipeline end to end on the GitHub stand-in with real integrations and real torchrun jobs:
events → sync → integrations → jobs → comparison with main → sticky comments and check runs;
result reuse; a parent's new head; a push to main; approvals that hold for one commit only.

Each scenario runs on SQLite (embedded worker) and on PostgreSQL (two worker processes), and
after each one
(:meth:`World.settle`) nothing may have been done twice."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.harness import REPO, World, running_world

pytestmark = pytest.mark.torchrun

FEATURE_TEST = (
    "def test_feature():\n    from pkg.feature import feature\n    assert feature() == 'on'\n"
)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> World:
    """SQLite with the embedded worker; PostgreSQL with two `stackbot worker` processes."""
    with running_world(tmp_path_factory.mktemp("e2e"), request.param) as running:
        yield running  # type: ignore[misc]


def _originals(world: World) -> Counter[tuple[str, str]]:
    return Counter(
        (j.tree_sha, j.config_hash) for j in world.jobs() if j.reused_from_job_id is None
    )


def test_a_stack_is_integrated_tested_against_main_and_reported(world: World) -> None:
    c = world.control
    c.open_pull(
        REPO,
        author="alice",
        head="feature",
        title="Add a feature",
        body="Part of #100.",
        number=11,
        files={
            "pkg/feature.py": "def feature():\n    return 'on'\n",
            "tests/test_feature.py": FEATURE_TEST,
        },
    )
    c.open_pull(
        REPO,
        author="carol",
        head="follow-up",
        base="main",
        title="Use the feature",
        number=12,
        body="Depends on #11.\n\nPart of #100.",
        files={
            "pkg/feature.py": "def feature():\n    return 'on'\n",
            "tests/test_feature.py": FEATURE_TEST,
            "pkg/core.py": "def value():\n    return 2\n",
        },
    )
    world.settle()
    # carol is no vetter and not trusted: #12 waits; #11 (alice, trusted) is tested.
    _, body12 = world.sticky(12)
    assert "is not tested until a vetter approves it" in body12
    _, body11 = world.sticky(11)
    assert "quick 1x2" in body11
    assert "3 passed" in body11 and "main: 2 passed" in body11, body11
    assert "not on main" in body11  # test_feature.py is new
    head11 = c.pull(REPO, 11).head_sha
    runs = [r for r in c.check_runs(REPO, head11) if "quick 1x2" in r.name]
    assert runs and all(r.status == "completed" and r.conclusion == "success" for r in runs)

    head12 = c.pull(REPO, 12).head_sha
    c.comment(REPO, 12, "bob", f"/ok to test {head12[:7]}")
    world.settle()
    _, body12 = world.sticky(12)
    assert "approved for testing by @bob" in body12
    assert "3 passed" in body12
    # every tree is tested once: under series-first the series tree (#11 + #12, which is
    # #12's stack tree) is tested and #12's report shows it
    assert max(_originals(world).values()) == 1
    assert "on the series integration" in body12


def test_a_parents_new_head_reintegrates_its_children(world: World) -> None:
    c = world.control
    comment_id, before = world.sticky(12)
    jobs_before = len(world.jobs())
    c.commit(
        REPO,
        "feature",
        {"pkg/feature.py": "def feature():\n    return 'on'  # v2\n"},
        message="Tidy the feature",
        author="alice",
    )
    world.settle()
    after_id, after = world.sticky(12)
    assert after_id == comment_id  # edited in place, never a second comment
    assert after != before
    new_head11 = c.pull(REPO, 11).head_sha
    assert new_head11[:7] in world.sticky(11)[1]
    assert len(world.jobs()) > jobs_before  # #11's and #12's new trees were tested
    assert max(_originals(world).values()) == 1


def test_a_push_to_main_reintegrates_and_tests_the_new_base(world: World) -> None:
    c = world.control
    baselines_before = {j.commit_sha for j in world.jobs() if j.kind == "baseline"}
    main = c.commit(REPO, "main", {"README.md": "# moved\n"}, message="Move main", author="bob")
    world.settle()
    baselines = {j.commit_sha for j in world.jobs() if j.kind == "baseline"}
    assert main in baselines - baselines_before
    assert main[:7] in world.sticky(11)[1]


def test_an_approval_holds_for_one_commit_only(world: World) -> None:
    c = world.control
    old_head = c.pull(REPO, 12).head_sha
    # carol amends her commit message only: a new head with the same tree
    c.commit(REPO, "follow-up", {}, message="Use the feature (reworded)", author="carol")
    world.settle()
    body = world.sticky(12)[1]
    new_head = c.pull(REPO, 12).head_sha
    assert new_head != old_head
    # (the headline may lead with #12's conflict with #11, which the earlier scenario made)
    assert f"waiting for a vetter to comment `/ok to test {new_head[:7]}`" in body, body
    originals = sum(_originals(world).values())
    c.comment(REPO, 12, "bob", f"/ok to test {new_head}")
    world.settle()
    body = world.sticky(12)[1]
    assert "approved for testing by @bob" in body
    assert sum(_originals(world).values()) == originals  # same trees: results reused, not rerun


def _rev(world: World, ref: str) -> str:
    bare = str(world.control.repo(REPO).bare_path)
    done = subprocess.run(["git", "-C", bare, "rev-parse", ref], capture_output=True, text=True)
    return done.stdout.strip()


def _rebase_onto_main(world: World, tmp_path: Path, branch: str, pusher: str) -> str:
    """What the author does locally: rebase the branch onto main, keeping every commit (the
    empty one too), and force-push it."""
    c = world.control
    work = tmp_path / "clone"
    bare = str(c.repo(REPO).bare_path)
    subprocess.run(["git", "clone", "--quiet", bare, str(work)], check=True)
    git = ["git", "-C", str(work), "-c", "user.name=carol", "-c", "user.email=carol@example.com"]
    subprocess.run([*git, "checkout", "--quiet", branch], check=True)
    subprocess.run([*git, "rebase", "--quiet", "--keep-empty", "origin/main"], check=True)
    return str(c.push_from(REPO, work, branch, pusher=pusher))


def test_a_rebase_that_keeps_the_patch_carries_the_approval(world: World, tmp_path: Path) -> None:
    c = world.control
    approved = c.pull(REPO, 12).head_sha
    c.commit(REPO, "main", {"docs/moved.md": "main moved\n"}, message="Move main", author="bob")
    world.settle()
    originals = sum(_originals(world).values())
    head = _rebase_onto_main(world, tmp_path, "follow-up", "carol")
    assert head != approved
    world.settle()
    body = world.sticky(12)[1]
    assert f"approved by @bob — approval of `{approved[:7]}` carried: same patch" in body, body
    assert "waiting for a vetter" not in body
    [check] = [r for r in c.check_runs(REPO, head) if r.name == "stackbot/approval"]
    assert check.conclusion == "success" and "carried: same patch" in (check.title or "")
    # main + #11 + the rebased #12 is the tree already tested after main moved: reused.
    assert sum(_originals(world).values()) == originals


def test_a_rebase_that_changes_the_patch_waits_for_a_vetter(world: World) -> None:
    c = world.control
    approved = c.pull(REPO, 12).head_sha
    main = _rev(world, "refs/heads/main")
    head = c.commit(
        REPO,
        "follow-up",
        {"pkg/core.py": "def value():\n    return 3\n"},
        message="Use the feature",
        author="carol",
        parent=main,
    )
    assert head != approved
    world.settle()
    body = world.sticky(12)[1]
    assert "is not tested until a vetter approves it" in body and "does not carry over" in body, (
        body
    )
