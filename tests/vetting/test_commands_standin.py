"""`/stackbot status`, `/stackbot retest [TEST_SET]` and unknown commands, end to end."""

from __future__ import annotations

from stackbot.domain.report import MARKER
from tests.sync.pipeline import Pipeline, open_pr


def test_status_replies_with_the_stored_state(pipeline: Pipeline) -> None:
    parent = open_pr(pipeline, author="carol", branch="carol/base", title="Base")
    child = open_pr(pipeline, author="carol", branch="carol/top", title="Top", base="carol/base")
    pipeline.deliver()
    head = pipeline.head(child)
    pipeline.control.comment(pipeline.repo, child, "carol", "/stackbot status")
    pipeline.deliver()
    [reply] = pipeline.replies(child)
    assert reply.body.startswith(f"**stackbot status** · #{child} at `{head[:7]}`")
    assert f"waiting for a vetter to comment `/ok to test {head[:7]}`" in reply.body
    assert f"depends on: #{parent} (open)" in reply.body
    assert MARKER not in reply.body


def test_a_vetter_asks_for_a_retest(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    pipeline.control.comment(pipeline.repo, number, "bob", "/stackbot retest amax-group")
    pipeline.control.comment(pipeline.repo, number, "dave", "/stackbot retest")
    pipeline.deliver()
    payloads = [task.payload for task in pipeline.tasks("retest")]
    assert {"repo": pipeline.repo, "number": number, "test_set": "amax-group"} in payloads
    assert {"repo": pipeline.repo, "number": number, "test_set": None} in payloads
    assert pipeline.replies(number) == []


def test_a_retest_is_refused_to_non_vetters_and_for_unknown_test_sets(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    pipeline.control.comment(pipeline.repo, number, "carol", "/stackbot retest")
    pipeline.deliver()
    pipeline.control.comment(pipeline.repo, number, "bob", "/stackbot retest no-such-set")
    pipeline.deliver()
    assert pipeline.tasks("retest") == []
    replies = [c.body for c in pipeline.replies(number)]
    assert (
        replies[0]
        == "@carol, only vetters (write access, or listed as vetters in stackbot's configuration) can ask for a retest."
    )
    assert replies[1].startswith("There is no test set `no-such-set`; known: ")
    assert "`amax-group`" in replies[1]


def test_an_unknown_stackbot_command_gets_the_usage(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    pipeline.control.comment(pipeline.repo, number, "carol", "/stackbot please merge")
    pipeline.deliver()
    [reply] = pipeline.replies(number)
    assert reply.body.startswith(
        "stackbot does not know `/stackbot please merge`. Commands: `/ok to test <sha>`"
    )


def test_commands_from_bots_are_ignored(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    pipeline.control.comment(pipeline.repo, number, "stackbot[bot]", "/stackbot status")
    pipeline.control.comment(
        pipeline.repo, number, "copy-pr-bot[bot]", f"/ok to test {pipeline.head(number)}"
    )
    pipeline.deliver()
    assert pipeline.replies(number) == []
    assert pipeline.approvals(number) == []
