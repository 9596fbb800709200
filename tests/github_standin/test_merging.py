"""Merging as GitHub does: each method's commits, the ``sha`` check, branch protection's checks
and reviews, ``closed`` with ``merged: true``, and a deleted head branch closing the PRs based
on it (what the landing must retarget before)."""

from __future__ import annotations

import httpx
import pytest

from stackbot.standin import deliveries, hosting
from tests.github_standin.scene import Scene, build_scene
from tests.support import github_contract
from tests.support.standin import StandinWorld


@pytest.fixture
def scene(standin: StandinWorld) -> Scene:
    return build_scene(standin)


def _merge(s: Scene, number: int, **body: object) -> httpx.Response:
    return s.bot.put(f"{s.repo_path}/pulls/{number}/merge", json=body)


def _second_commit(s: Scene, branch: str) -> None:
    s.world.control.commit(
        s.world.repo, branch, {f"{branch}-2.txt": "2\n"}, message="second", author="alice"
    )


@pytest.mark.parametrize("method", ["merge", "squash", "rebase"])
def test_each_method_writes_the_commits_github_would(scene: Scene, method: str) -> None:
    world, control = scene.world, scene.world.control
    _second_commit(scene, "amax-group")
    pull = control.pull(world.repo, scene.bottom)
    bare = control.repo(world.repo).bare_path
    main_before = hosting.resolve(bare, "refs/heads/main")
    assert main_before is not None
    answer = _merge(scene, scene.bottom, sha=pull.head_sha, merge_method=method)
    assert answer.status_code == 200, answer.text
    tip = answer.json()["sha"]
    assert hosting.resolve(bare, "refs/heads/main") == tip
    info = hosting.commit_info(bare, tip)
    head_tree = hosting.commit_info(bare, pull.head_sha).tree
    assert info.tree == head_tree  # main had nothing else: every method lands the head's tree
    if method == "merge":
        assert info.parents == (main_before, pull.head_sha)
        assert info.message.startswith(f"Merge pull request #{scene.bottom} from ")
    elif method == "squash":
        assert info.parents == (main_before,)
        assert info.message.startswith("Amax reduction over tp_dp_cp (#8034)")
        assert info.author.email.startswith("alice")
    else:
        replayed = hosting.commits_between(bare, main_before, tip)
        assert [c.message.strip() for c in replayed][-1] == "second"
        assert len(replayed) == 2 and pull.head_sha not in {c.sha for c in replayed}
    merged = control.pull(world.repo, scene.bottom)
    assert merged.merged and merged.state == "closed" and merged.merge_commit_sha == tip
    closed = [
        deliveries.payload_of(d)
        for d in control.deliveries("pull_request", "closed")
        if deliveries.payload_of(d)["number"] == scene.bottom
    ]
    assert closed and closed[-1]["pull_request"]["merged"] is True
    github_contract.validate_delivery("pull_request", closed[-1])


def test_a_moved_head_is_refused_with_409_and_nothing_merges(scene: Scene) -> None:
    control, repo = scene.world.control, scene.world.repo
    tested = control.pull(repo, scene.bottom).head_sha
    _second_commit(scene, "amax-group")
    answer = _merge(scene, scene.bottom, sha=tested)
    assert answer.status_code == 409
    assert answer.json()["message"] == "Head branch was modified. Review and try the merge again."
    assert control.pull(repo, scene.bottom).state == "open"


def test_protection_needs_the_required_check_and_an_approval(scene: Scene) -> None:
    control, repo = scene.world.control, scene.world.repo
    control.protect_branch(repo, "main", required_checks=["stackbot/integration"], approvals=1)
    head = control.pull(repo, scene.bottom).head_sha
    refused = _merge(scene, scene.bottom, sha=head)
    assert refused.status_code == 405
    assert 'Required status check "stackbot/integration" is expected.' in refused.json()["message"]
    assert "At least 1 approving review is required" in refused.json()["message"]
    scene.bot.post(
        f"{scene.repo_path}/check-runs",
        json={"name": "stackbot/integration", "head_sha": head, "conclusion": "success"},
    ).raise_for_status()
    review = scene.user.post(
        f"{scene.repo_path}/pulls/{scene.bottom}/reviews", json={"event": "APPROVE"}
    )
    assert review.status_code == 200 and review.json()["state"] == "APPROVED"
    submitted = deliveries.payload_of(control.deliveries("pull_request_review", "submitted")[-1])
    # The review whole; its pull_request is the stand-in's usual shape, whose base.repo lacks
    # has_discussions, which the description's x-webhooks requires and GitHub's examples lack.
    github_contract.validate_component("webhooks_review", submitted["review"])
    assert submitted["pull_request"]["number"] == scene.bottom
    assert _merge(scene, scene.bottom, sha=head).status_code == 200


def test_a_deleted_head_closes_the_child_unless_it_was_retargeted(scene: Scene) -> None:
    control, repo = scene.world.control, scene.world.repo
    control.set_merge_settings(repo, delete_branch_on_merge=True)
    assert _merge(scene, scene.bottom, merge_method="squash").status_code == 200
    child = control.pull(repo, scene.top)
    assert child.state == "closed" and not child.merged  # GitHub closed it with its base

    # A second series, its child retargeted onto main before the parent merges.
    parent = control.open_pull(repo, author="carol", head="p1", title="p1", files={"p1": "1\n"})
    child = control.open_pull(
        repo, author="carol", head="c1", base="p1", title="c1", files={"c1": "1\n"}
    )
    scene.bot.patch(f"{scene.repo_path}/pulls/{child.number}", json={"base": "main"})
    assert _merge(scene, parent.number, merge_method="squash").status_code == 200
    assert control.pull(repo, child.number).state == "open"
    assert _merge(scene, child.number, merge_method="squash").status_code == 200
