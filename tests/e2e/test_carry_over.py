"""Nothing re-run that was already tested (issue 24 point 4): a series #21 → #22 → #23 is
tested (its series tree); #21 then lands by a squash merge into main (a push to main, the PR
closed merged), main otherwise unchanged. The series of #22 and #23 on the new main has the tree
that was tested: their results are carried, with no new GPU job for them, on both databases.
Every PR's own test files run in one job on the series tree; after the landing #22's own file
is a part of it, taken, not run again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.harness import REPO, World, running_world

pytestmark = pytest.mark.torchrun

TEST_A = "def test_a():\n    from pkg.a import a\n    assert a() == 1\n"
TEST_B = "def test_b():\n    from pkg.b import b\n    assert b() == 2\n"
TEST_SETS_WITH_OWN = """
schema_version = "1.0"

[own_tests]
roots = ["tests"]
default_shapes = ["1x2"]
timeout_s = 300

[test_sets.quick]
shapes = ["1x2"]
timeout_s = 300
megatron_targets = ["tests/test_quick.py"]
"""


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    workdir = tmp_path_factory.mktemp("carry")
    (workdir / "sets.toml").write_text(TEST_SETS_WITH_OWN)
    with running_world(workdir, request.param, test_sets_file=workdir / "sets.toml") as running:
        yield running


def _open_series(world: World) -> None:
    c = world.control
    a = {"pkg/a.py": "def a():\n    return 1\n", "tests/test_a.py": TEST_A}
    b = {"pkg/b.py": "def b():\n    return 2\n", "tests/test_b.py": TEST_B}
    c.open_pull(REPO, author="alice", head="a", title="A", body="Part of #100.", number=21, files=a)
    head_a = c.pull(REPO, 21).head_sha
    # #22 is stacked on #21's branch (its commits are on top of #21's), as Megatron's are.
    c.commit(REPO, "b", b, message="B", author="alice", parent=head_a)
    c.open_pull(
        REPO,
        author="alice",
        head="b",
        title="B",
        body="Depends on #21.\n\nPart of #100.",
        number=22,
    )
    head_b = c.pull(REPO, 22).head_sha
    c.commit(REPO, "c", {"pkg/c.py": "C = 3\n"}, message="C", author="alice", parent=head_b)
    c.open_pull(
        REPO,
        author="alice",
        head="c",
        title="C",
        body="Depends on #22.\n\nPart of #100.",
        number=23,
    )


def test_a_squash_merged_parent_leaves_its_childrens_tested_tree_untested_again(
    world: World,
) -> None:
    _open_series(world)
    world.settle(timeout_s=900)  # a loaded machine runs ~10 torchrun jobs here
    before = {j.id for j in world.jobs()}
    originals = [j for j in world.jobs() if j.reused_from_job_id is None]
    assert originals and all(j.status == "passed" for j in originals), [
        (j.test_set, j.status, j.error) for j in originals
    ]
    # The node reported what it ran the tests with: part of each result's key.
    assert all(j.runner_env and "torch" in j.runner_env and j.result_key for j in originals)
    series_tree = {j.tree_sha for j in originals if j.kind == "integration"}
    # The own test files of every PR in the series tree ran in one job (issue 24 point 6).
    own = [
        (j.shape, j.targets) for j in originals if j.kind == "integration" and j.test_set == "own"
    ]
    assert ("1x2", ["tests/test_a.py", "tests/test_b.py"]) in own, own
    assert "`tests/test_b.py` (1x2): new file: 1 passed" in world.sticky(22)[1]

    merged = world.control.merge_pull(REPO, 21, merger="bob", squash=True)
    world.settle(timeout_s=900)  # a loaded machine runs ~10 torchrun jobs here
    new = [j for j in world.jobs() if j.id not in before]
    for_children = [j for j in new if j.kind == "integration"]
    ran = [j for j in for_children if j.reused_from_job_id is None]
    assert ran == [], [(j.test_set, j.shape, j.tree_sha[:7], j.purpose) for j in ran]
    # The children's new series tree on main + #21 is the tree tested before: carried.
    assert for_children, "the children's new integration got no results at all"
    assert {j.tree_sha for j in for_children} <= series_tree
    assert all(j.status == "passed" for j in for_children)
    # #22's own file: its part of the job that ran #21's and #22's files on that tree.
    own_copies = [j for j in for_children if j.test_set == "own"]
    assert own_copies and all(j.targets == ["tests/test_b.py"] for j in own_copies), own_copies
    for number in (22, 23):
        body = world.sticky(number)[1]
        assert merged[:7] in body, body  # reported against the new main
        assert "1 passed" in body or "passed" in body, body
