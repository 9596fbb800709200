"""``/stackbot land`` end to end on the GitHub stand-in, real integrations and real torchrun
jobs: a maintainer lands #8034 → #8035 → #8748 bottom-up with the tested heads, children
retargeted before their parent merges (the repository deletes merged branches, so a child left
on its parent's branch would be closed by GitHub), main ending on the tree that was tested; then
a series whose PR is pushed and whose main moves while its landing waits lands the new heads on
the new main, tested first; and a series whose main moves and whose top PR is pushed half-way
through its merges (after its first PR merged) lands too: the landing goes back to waiting, the
rest is integrated and tested on the moved main with the new head, then merges, and main ends on
a tree that was tested (never the untested mix of the old tested tree and the moved main).

Each scenario runs on SQLite (embedded worker) and on PostgreSQL (two worker processes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlmodel import Session, select

from stackbot.db.models import IntegrationRun, Landing
from stackbot.domain.landing_text import LANDING_MARKER
from stackbot.standin import deliveries, hosting, merging
from tests.e2e.harness import REPO, World, running_world

pytestmark = pytest.mark.torchrun


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    with running_world(
        tmp_path_factory.mktemp("landing"), request.param, landing={"recheck_s": 1.0}
    ) as running:
        running.control.set_merge_settings(REPO, delete_branch_on_merge=True)
        yield running


def _series(world: World, numbers: tuple[int, int, int], prefix: str) -> None:
    c = world.control
    base = "main"
    for position, number in enumerate(numbers):
        c.open_pull(
            REPO,
            author="alice",
            head=f"{prefix}-{position}",
            base=base,
            title=f"{prefix} part {position + 1}",
            number=number,
            files={f"pkg/{prefix}_{position}.py": f"VALUE = {position}\n"},
        )
        base = f"{prefix}-{position}"


def _landing_comment(world: World, number: int) -> str:
    found = [
        c.body for c in world.control.comments(REPO, number) if c.body.startswith(LANDING_MARKER)
    ]
    assert len(found) == 1, f"#{number} has {len(found)} landing comments"
    return found[0]


def _main(world: World) -> tuple[str, str]:
    bare = world.control.repo(REPO).bare_path
    sha = hosting.resolve(bare, "refs/heads/main")
    assert sha is not None
    return sha, hosting.commit_info(bare, sha).tree


def _tested_tree(world: World, landing_id: int) -> str | None:
    with Session(world.engine) as session:
        landing = session.get(Landing, landing_id)
        assert landing is not None and landing.tested_run_id is not None
        run = session.get(IntegrationRun, landing.tested_run_id)
        assert run is not None
        return run.final_tree


def _landing(world: World, requested_on: int) -> Landing:
    with Session(world.engine) as session:
        rows = session.exec(select(Landing).where(Landing.requested_on == requested_on)).all()
        assert len(rows) == 1
        return rows[0]


def test_a_maintainer_lands_the_series_bottom_up_with_the_tested_heads(world: World) -> None:
    c = world.control
    _series(world, (8034, 8035, 8748), "amax")
    world.settle()
    heads = {n: c.pull(REPO, n).head_sha for n in (8034, 8035, 8748)}
    c.comment(REPO, 8748, "carol", "/stackbot land")  # read access only: refused
    world.settle()
    refusal = [x.body for x in c.comments(REPO, 8748) if "only vetters" in x.body]
    assert refusal and "/stackbot land" not in refusal[0]
    assert all(c.pull(REPO, n).state == "open" for n in heads)

    c.comment(REPO, 8748, "bob", "/stackbot land")
    world.settle()
    for number in heads:
        pull = c.pull(REPO, number)
        assert pull.merged, f"#{number} did not land:\n{_landing_comment(world, number)}"
        body = _landing_comment(world, number)
        assert "**Landed** on `main`: #8034 → #8035 → #8748." in body
        assert f"#{number} (tested head `{heads[number][:10]}`) merged into `main`" in body
    # bottom-up, each merged at the tested head, none closed by GitHub for a deleted base
    merged_events = [
        deliveries.payload_of(d)
        for d in c.deliveries("pull_request", "closed")
        if deliveries.payload_of(d)["number"] in heads
    ]
    assert [e["number"] for e in merged_events] == [8034, 8035, 8748]
    assert all(e["pull_request"]["merged"] for e in merged_events)
    assert [e["pull_request"]["head"]["sha"] for e in merged_events] == list(heads.values())
    landing = _landing(world, 8748)
    assert landing.state == "landed"
    _, tree = _main(world)
    assert (
        tree == landing.tested_tree == _tested_tree(world, landing.id or 0) == landing.landed_tree
    )
    assert "`main` now holds the tree that was tested" in _landing_comment(world, 8034)


def test_a_push_and_a_moving_main_while_waiting_land_the_new_heads_tested(world: World) -> None:
    c = world.control
    _series(world, (8050, 8051, 8052), "fp8")
    world.settle()
    c.comment(REPO, 8052, "bob", "/stackbot land")
    # Before the worker gets to it: main moves and the top PR gets a new commit.
    c.commit(REPO, "main", {"README.md": "# moved\n"}, message="Move main", author="bob")
    c.commit(REPO, "fp8-2", {"pkg/fp8_2.py": "VALUE = 22\n"}, message="v2", author="alice")
    world.settle()
    new_head = c.pull(REPO, 8052).head_sha
    assert all(c.pull(REPO, n).merged for n in (8050, 8051, 8052)), _landing_comment(world, 8052)
    landing = _landing(world, 8052)
    entries = {e["number"]: e for e in landing.entries}
    assert entries[8052]["head_sha"] == new_head  # the new head, tested, not the one asked on
    bare = c.repo(REPO).bare_path
    main_sha, tree = _main(world)
    assert hosting.resolve(bare, "refs/heads/main") == main_sha
    assert tree == landing.tested_tree == landing.landed_tree
    files = hosting.changed_files(bare, landing.main_sha or "", main_sha)
    assert "pkg/fp8_2.py" in {f.filename for f in files}
    assert hosting.git(bare, "show", f"{main_sha}:pkg/fp8_2.py").stdout.decode() == "VALUE = 22\n"


def test_main_moving_and_a_push_mid_landing_land_the_rest_tested_on_the_new_main(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = world.control
    numbers = (8060, 8061, 8062)
    _series(world, numbers, "mid")
    world.settle()
    asked = {n: c.pull(REPO, n).head_sha for n in numbers}
    real_merge = merging.merge_pull
    moved: dict[str, str] = {}

    def merge_then_move(*args: Any, **kwargs: Any) -> Any:
        """GitHub's merge of the first PR, then, before the landing merges the next one,
        someone else's commit lands on main and the top PR's author pushes."""
        done = real_merge(*args, **kwargs)
        if args[2].number == numbers[0] and not moved:
            moved["main"] = c.commit(
                REPO, "main", {"NOTES.md": "moved\n"}, message="Move main", author="bob"
            )
            moved["head"] = c.commit(
                REPO, "mid-2", {"pkg/mid_2.py": "VALUE = 22\n"}, message="v2", author="alice"
            )
        return done

    monkeypatch.setattr(merging, "merge_pull", merge_then_move)
    c.comment(REPO, numbers[-1], "bob", "/stackbot land")
    world.settle()
    assert moved, "the first PR never merged"
    for number in numbers:
        assert c.pull(REPO, number).merged, _landing_comment(world, number)
    landing = _landing(world, numbers[-1])
    assert landing.state == "landed", landing.reason
    entries = {e["number"]: e for e in landing.entries}
    assert entries[numbers[0]]["head_sha"] == asked[numbers[0]]
    assert entries[numbers[-1]]["head_sha"] == moved["head"] != asked[numbers[-1]]
    # bottom-up, none closed by GitHub for a deleted base
    closed = [
        deliveries.payload_of(d)
        for d in c.deliveries("pull_request", "closed")
        if deliveries.payload_of(d)["number"] in numbers
    ]
    assert [e["number"] for e in closed] == list(numbers)
    assert all(e["pull_request"]["merged"] for e in closed)
    # the rest was tested on the moved main, and main holds exactly that tested tree
    assert landing.main_sha is not None
    bare = c.repo(REPO).bare_path
    ancestry = ("merge-base", "--is-ancestor", moved["main"], landing.main_sha)
    assert hosting.git(bare, *ancestry, ok_codes=(0, 1)).returncode == 0
    main_sha, tree = _main(world)
    assert (
        tree == landing.tested_tree == _tested_tree(world, landing.id or 0) == landing.landed_tree
    )
    assert hosting.git(bare, "show", f"{main_sha}:NOTES.md").stdout.decode() == "moved\n"
    assert hosting.git(bare, "show", f"{main_sha}:pkg/mid_2.py").stdout.decode() == "VALUE = 22\n"
    assert "`main` now holds the tree that was tested" in _landing_comment(world, numbers[0])
