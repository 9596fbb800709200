"""The pure event layer: typed records from payloads, what is ignored, and what work follows."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stackbot.domain.events import (
    CheckRunEvent,
    FollowUp,
    IssueCommentEvent,
    PingEvent,
    PullRequestEvent,
    PushEvent,
    UnknownEvent,
    ignore_reason,
    parse_event,
    route_event,
)
from stackbot.domain.types import PrNumber, RepoName, Sha
from stackbot.errors import BadInput
from tests.support.signing import example

SHA = Sha("ec26c3e57ca3a959ca5aad62de7213c562f8c821")


def test_pull_request_example_parses_to_its_record() -> None:
    event = parse_event("pull_request", example("pull_request", "synchronize").payload)
    assert event == PullRequestEvent(
        action="synchronize",
        repo=RepoName("Codertocat/Hello-World"),
        number=PrNumber(2),
        head_ref="changes",
        head_sha=SHA,
        base_ref="master",
        base_sha="f95f852bd8fca8fcc58a9a2d6c842781e32a215e",
        state="open",
        draft=False,
        merged=False,
        author="Codertocat",
        head_repo="Codertocat/Hello-World",
    )


def test_examples_that_ask_for_nothing_say_why() -> None:
    ping = parse_event("ping", example("ping", "event").payload)
    comment = parse_event("issue_comment", example("issue_comment", "created").payload)
    tag = parse_event("push", example("push", "event").payload)
    assert isinstance(ping, PingEvent) and ignore_reason(ping) == "ping: nothing to do"
    assert isinstance(comment, IssueCommentEvent) and not comment.is_pull_request
    assert ignore_reason(comment) == "comment on an issue, not on a pull request"
    assert isinstance(tag, PushEvent) and tag.branch is None
    assert ignore_reason(tag) == "push to refs/tags/simple-tag, not to a branch"


def test_unknown_events_and_actions_are_unknown_not_errors() -> None:
    star = parse_event("star", {"action": "created", "repository": {"full_name": "o/r"}})
    assert star == UnknownEvent("star", None, RepoName("o/r"), "stackbot ignores this event")
    labeled = parse_event("pull_request", {"action": "labeled"})
    assert (
        isinstance(labeled, UnknownEvent)
        and labeled.reason == "stackbot ignores pull_request.labeled"
    )


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"action": 3}, "action must be a string, got int"),
        ({"action": "opened", "pull_request": []}, "pull_request must be an object, got list"),
        (
            {
                "action": "opened",
                "repository": {"full_name": "o/r"},
                "pull_request": {"number": 1, "head": {}, "base": {}},
            },
            "pull_request.head.ref is missing",
        ),
    ],
)
def test_bad_fields_are_named(payload: dict[str, object], message: str) -> None:
    with pytest.raises(BadInput, match=message):
        parse_event("pull_request", payload)


def test_routing() -> None:
    pr = parse_event("pull_request", example("pull_request", "opened").payload)
    assert isinstance(pr, PullRequestEvent)
    assert route_event(pr) == [
        FollowUp(
            "sync_pull",
            {"repo": "Codertocat/Hello-World", "number": 2, "action": "opened"},
            "sync_pull:Codertocat/Hello-World:2",
        ),
        FollowUp(
            "check_base",
            {"repo": "Codertocat/Hello-World", "number": 2},
            "check_base:Codertocat/Hello-World:2",
        ),
    ]
    push = PushEvent(
        RepoName("o/r"), "refs/heads/dev", "a", "b", deleted=False, default_branch="main"
    )
    assert route_event(push) == []
    assert [f.kind for f in route_event(push, base_branches=frozenset({"dev"}))] == ["base_moved"]
    check = CheckRunEvent(
        "rerequested", RepoName("o/r"), 9, "n", SHA, None, (PrNumber(1), PrNumber(2))
    )
    keys = [f.dedupe_key for f in route_event(check)]
    assert keys == ["retest:o/r:1:9", "retest:o/r:2:9"]


def test_a_merged_pull_request_asks_for_its_children_to_be_retargeted() -> None:
    pr = parse_event("pull_request", example("pull_request", "opened").payload)
    assert isinstance(pr, PullRequestEvent)
    merged = replace(pr, action="closed", merged=True, state="closed")
    assert [(f.kind, f.dedupe_key) for f in route_event(merged)] == [
        ("sync_pull", "sync_pull:Codertocat/Hello-World:2"),
        ("retarget_children", "retarget_children:Codertocat/Hello-World:2"),
    ]
    closed = replace(pr, action="closed", merged=False, state="closed")
    assert [f.kind for f in route_event(closed)] == ["sync_pull"]
    labeled = replace(pr, action="ready_for_review")
    assert [f.kind for f in route_event(labeled)] == ["sync_pull"]


def test_a_merge_group_asks_for_its_checks_to_be_answered() -> None:
    """GitHub's own merge_group deliveries parse, and lead to one merge_group task per group
    and action (a destroyed group too: the task forgets it, or stops a landing)."""
    from stackbot.domain.events import MergeGroupEvent

    group = parse_event("merge_group", example("merge_group", "checks_requested").payload)
    assert isinstance(group, MergeGroupEvent) and ignore_reason(group) is None
    assert group.head_ref.startswith("refs/heads/gh-readonly-queue/main/pr-104-")
    assert (group.base_ref, group.reason) == ("refs/heads/main", None)
    [task] = route_event(group)
    assert (task.kind, task.dedupe_key) == (
        "merge_group",
        f"merge_group:octo-org/octo-repo:{group.head_sha}:checks_requested",
    )
    assert task.payload["head_ref"] == group.head_ref
    destroyed = parse_event(
        "merge_group",
        {
            **example("merge_group", "checks_requested").payload,
            "action": "destroyed",
            "reason": "dequeued",
        },
    )
    assert isinstance(destroyed, MergeGroupEvent) and destroyed.reason == "dequeued"
    assert [f.payload["reason"] for f in route_event(destroyed)] == ["dequeued"]
    odd = parse_event("merge_group", {"action": "frobnicated"})
    assert isinstance(odd, UnknownEvent)
