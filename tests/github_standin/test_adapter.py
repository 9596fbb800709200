"""``GitHubClient`` against the stand-in: domain records out, one request per call (and per
page of a listing), errors as stackbot's error kinds."""

from __future__ import annotations

import pytest

from stackbot.adapters.github import GitHubClient, GitHubConfigError, GitHubNotFound, NotFound
from stackbot.config import Settings
from stackbot.domain.records import CommentRecord, NativeStack, PrRecord
from stackbot.errors import BadInput, Permanent
from tests.support.standin import StandinWorld


@pytest.fixture
def client(token_settings: Settings) -> GitHubClient:
    return GitHubClient.from_settings(token_settings)


def _requests(world: StandinWorld) -> int:
    return len(world.control.requests())


def _series(world: StandinWorld) -> tuple[int, int]:
    c = world.control
    c.open_pull(
        world.repo,
        author="alice",
        head="amax-group",
        title="Amax group",
        body="Part of #6307",
        files={"megatron/core/fp8.py": "A = 1\n"},
        number=8034,
    )
    c.commit(
        world.repo,
        "amax-group",
        {"megatron/core/fp8.py": "A = 2\n"},
        message="second",
        author="alice",
    )
    c.open_pull(
        world.repo,
        author="carol",
        head="amax-tests",
        base="amax-group",
        title="Tests",
        body="Depends on #8034",
        files={"tests/t.py": "pass\n"},
        number=8035,
        draft=True,
    )
    c.create_stack(world.repo, [8034, 8035])
    return 8034, 8035


def test_get_pull_returns_a_record_with_its_native_stack(
    standin: StandinWorld, client: GitHubClient
) -> None:
    bottom, top = _series(standin)
    before = _requests(standin)
    record = client.get_pull(standin.repo, top)
    assert _requests(standin) == before + 1
    pull = standin.control.pull(standin.repo, top)
    main = standin.control.repo(standin.repo)
    assert record == PrRecord(
        number=top,  # type: ignore[arg-type]
        title="Tests",
        author="carol",
        state="open",
        merged=False,
        draft=True,
        head_ref="amax-tests",
        head_sha=pull.head_sha,
        base_ref="amax-group",
        base_sha=standin.control.pull(standin.repo, bottom).head_sha,
        body="Depends on #8034",
        stack=NativeStack(
            id=main.stacks[1].id,
            number=1,
            size=2,
            position=2,
            base_ref="main",
            base_sha=record.stack.base_sha if record.stack else "",
        ),
        author_association="NONE",
        head_repo=standin.repo,
    )
    assert record.stack is not None and len(record.stack.base_sha) == 40
    assert client.get_pull(standin.repo, bottom).author_association == "MEMBER"


def test_listings(standin: StandinWorld, client: GitHubClient) -> None:
    bottom, top = _series(standin)
    standin.control.open_pull(
        standin.repo, author="carol", head="gone", title="gone", files={"g": "1\n"}, number=9000
    )
    standin.control.close_pull(standin.repo, 9000)
    assert [p.number for p in client.list_open_pulls(standin.repo)] == [bottom, top]
    commits = client.list_pull_commits(standin.repo, bottom)
    assert [c.message for c in commits] == ["Amax group", "second"]
    assert commits[1].parents == (commits[0].sha,)
    assert client.pulls_for_commit(standin.repo, commits[0].sha) == [bottom]
    (stack,) = client.list_stacks(standin.repo)
    assert stack.numbers == (bottom, top) and stack.base_ref == "main" and stack.open
    assert [m.draft for m in stack.members] == [False, True]
    assert client.get_stack(standin.repo, 1) == stack
    assert client.list_stacks(standin.repo, pull_request=9000) == []
    assert client.clone_url(standin.repo).startswith("file://")


def test_long_listings_are_paged(standin: StandinWorld, client: GitHubClient) -> None:
    bottom, _ = _series(standin)
    for i in range(105):
        standin.control.comment(standin.repo, bottom, "carol", f"comment {i}")
    before = _requests(standin)
    comments = client.list_issue_comments(standin.repo, bottom)
    assert _requests(standin) == before + 2  # 100 a page
    assert [c.body for c in comments] == [f"comment {i}" for i in range(105)]
    assert comments[0] == CommentRecord(author="carol", body="comment 0", id=comments[0].id)


def test_comments_are_written_and_edited(standin: StandinWorld, client: GitHubClient) -> None:
    bottom, _ = _series(standin)
    comment_id = client.create_comment(standin.repo, bottom, "<!-- stackbot -->\nreport")
    client.edit_comment(standin.repo, comment_id, "<!-- stackbot -->\nreport v2")
    assert client.get_comment(standin.repo, comment_id) == CommentRecord(
        "bob", "<!-- stackbot -->\nreport v2", comment_id, author_association="COLLABORATOR"
    )
    (stored,) = standin.control.comments(standin.repo, bottom)
    assert (stored.author, stored.body) == ("bob", "<!-- stackbot -->\nreport v2")
    standin.server.state.repos[standin.repo.lower()].comments.clear()
    with pytest.raises(NotFound):
        client.edit_comment(standin.repo, comment_id, "gone")


@pytest.mark.parametrize("role", ["admin", "maintain", "write", "triage", "read"])
def test_collaborator_permission_is_the_fine_grained_role(
    standin: StandinWorld, client: GitHubClient, role: str
) -> None:
    standin.control.set_permission(standin.repo, "carol", role)
    assert client.collaborator_permission(standin.repo, "carol") == role


def test_non_collaborators_have_no_permission(standin: StandinWorld, client: GitHubClient) -> None:
    assert client.collaborator_permission(standin.repo, "carol") == "none"
    assert client.collaborator_permission(standin.repo, "no-such-user") == "none"
    assert client.collaborator_permission(standin.repo, "NVIDIA") == "admin"  # the owner


def test_org_membership(
    standin: StandinWorld, client: GitHubClient, app_settings: Settings
) -> None:
    standin.control.add_org_member("NVIDIA", "dave", public=True)
    # bob is not in NVIDIA: GitHub only shows him the public members (302 → public list).
    assert client.is_org_member("NVIDIA", "dave") is True
    assert client.is_org_member("NVIDIA", "alice") is False
    assert client.is_org_member("NVIDIA", "carol") is False
    assert [r.status for r in standin.control.requests("GET", "/orgs/NVIDIA/members/")] == [
        302,
        302,
        302,
    ]
    app = GitHubClient.from_settings(app_settings)  # an installation with members: read
    assert app.is_org_member("NVIDIA", "alice") is True
    assert app.is_org_member("NVIDIA", "carol") is False


def test_missing_things_are_permanent_errors_naming_the_call(
    standin: StandinWorld, client: GitHubClient
) -> None:
    with pytest.raises(
        GitHubNotFound, match=r"404 to GET /repos/NVIDIA/Megatron-LM/pulls/4"
    ) as raised:
        client.get_pull(standin.repo, 4)
    assert isinstance(raised.value, Permanent) and raised.value.status == 404
    with pytest.raises(GitHubNotFound):
        client.list_pull_commits("NVIDIA/nothing-here", 1)


def test_a_malformed_repository_name_is_bad_input(client: GitHubClient) -> None:
    with pytest.raises(GitHubConfigError, match="owner/name") as raised:
        client.get_pull("not a repo", 1)
    assert isinstance(raised.value, BadInput)


def test_the_landing_calls(app_settings: Settings, standin: StandinWorld) -> None:
    from stackbot.adapters.github import GitHubRejected
    from stackbot.domain.records import MergeRules, ReviewRecord

    client = GitHubClient.from_settings(app_settings)  # the App: check runs, contents: write
    bottom, top = _series(standin)
    c, repo = standin.control, standin.repo
    assert client.merge_rules(repo, "main") == MergeRules()  # unprotected: 404 → nothing
    c.protect_branch(repo, "main", required_checks=["ci"], approvals=1, dismiss_stale_reviews=True)
    assert client.merge_rules(repo, "main") == MergeRules(("ci",), 1, True)
    head = c.pull(repo, bottom).head_sha
    c.approve(repo, bottom, "bob")
    assert client.list_reviews(repo, bottom) == [ReviewRecord("bob", "APPROVED", head)]
    client.create_check_run(repo, head, "ci", status="in_progress", title="t", summary="s")
    client.create_commit_status(repo, head, state="success", context="lint", description="ok")
    assert client.check_outcomes(repo, head) == {"ci": "pending", "lint": "success"}
    with pytest.raises(GitHubRejected) as refused:
        client.merge_pull(repo, bottom, sha=head, method="squash")
    assert refused.value.status == 405 and 'Required status check "ci"' in refused.value.detail
    c.protect_branch(repo, "main")
    with pytest.raises(GitHubRejected) as moved:
        client.merge_pull(repo, bottom, sha=c.pull(repo, top).head_sha, method="squash")
    assert moved.value.status == 409
    tip = client.merge_pull(repo, bottom, sha=head, method="squash")
    assert client.branch_sha(repo, "main") == tip
    assert len(client.commit_tree(repo, tip)) == 40


def test_the_merge_queue_calls(app_settings: Settings, standin: StandinWorld) -> None:
    """enqueuePullRequest (with expectedHeadOid) and dequeuePullRequest through PyGithub's
    requester; GitHub's GraphQL refusals come back as GitHubRejected with its message."""
    from stackbot.adapters.github import GitHubRejected
    from stackbot.adapters.github import client as client_module
    from tests.support import github_contract

    for mutation in (client_module.ENQUEUE_PULL_REQUEST, client_module.DEQUEUE_PULL_REQUEST):
        github_contract.validate_graphql(mutation)
    client = GitHubClient.from_settings(app_settings)
    bottom, top = _series(standin)
    c, repo = standin.control, standin.repo
    head = c.pull(repo, bottom).head_sha
    with pytest.raises(GitHubRejected) as no_queue:
        client.enqueue_pull(repo, bottom, expected_head=head)
    assert "has no merge queue" in no_queue.value.detail
    c.require_merge_queue(repo, "main", method="SQUASH")
    c.protect_branch(repo, "main", required_checks=["ci"])  # the group waits for "ci"
    client.create_commit_status(repo, head, state="success", context="ci", description="ok")
    with pytest.raises(GitHubRejected) as moved:
        client.enqueue_pull(repo, bottom, expected_head=c.pull(repo, top).head_sha)
    assert "head ref has changed" in moved.value.detail
    assert client.enqueue_pull(repo, bottom, expected_head=head) == 1
    assert client.enqueue_pull(repo, bottom, expected_head=head) == 1  # a retry: the same entry
    assert [g.event for g in c.deliveries("merge_group", "checks_requested")] == ["merge_group"]
    client.dequeue_pull(repo, bottom)
    assert len(c.deliveries("merge_group", "destroyed")) == 1
    assert not c.repo(repo).queue
