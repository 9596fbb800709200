"""The pure command parser and the `/ok to test <sha>` decision matrix."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_jobs.testsets import own_test_set_pr
from stackbot.domain.commands import (
    OkToTest,
    Retest,
    Status,
    Unknown,
    parse_command,
    retest_reply,
)
from stackbot.domain.vetting import Reason, decide_ok_to_test, is_trusted_author

HEAD = "be10fd5c0ffee0000000000000000000000000aa"
OLD_HEAD = "1dd9473aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
OTHER_PR_HEAD = "8034abcd11111111111111111111111111111111"
UNDER_HEAD = "77aa00bb22222222222222222222222222222222"  # an older commit still in the PR


# -- parsing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("/ok to test 1dd9473", OkToTest("1dd9473")),
        ("/OK to Test  1DD9473  ", OkToTest("1DD9473")),
        ("Thanks!\n\n/ok to test be10fd5\n", OkToTest("be10fd5")),
        ("   /ok to test be10fd5", OkToTest("be10fd5")),
        ("/ok to test", OkToTest("")),
        ("/ok to test be10fd5 please", OkToTest("be10fd5")),
        ("/stackbot retest", Retest(None)),
        ("/stackbot retest amax-group", Retest("amax-group")),
        ("/stackbot retest own:8035", Retest("own:8035")),
        ("/stackbot status", Status()),
        ("/Stackbot STATUS", Status()),
        ("/stackbot frobnicate", Unknown("/stackbot frobnicate")),
        ("/stackbot retest a b", Unknown("/stackbot retest a b")),
        ("/stackbot", Unknown("/stackbot")),
        # the first command wins
        ("/stackbot status\n/ok to test be10fd5", Status()),
    ],
)
def test_commands_are_recognised(body: str, expected: object) -> None:
    assert parse_command(body) == expected


@pytest.mark.parametrize(
    "body",
    [
        "",
        "LGTM, I'll run the tests later",
        "please /ok to test be10fd5",  # not at the start of a line
        "> /ok to test 1dd9473\n\nthat SHA is stale",  # a quoted reply
        ">/ok to test 1dd9473",
        "```\n/ok to test be10fd5\n```",  # a fenced code block
        "~~~text\n/stackbot status\n~~~",
        "    /ok to test be10fd5",  # indented code
        "\t/ok to test be10fd5",
        "`/ok to test be10fd5`",  # inline code
        "/ok to testing be10fd5",
        "/stackbotx status",
        "/ok test be10fd5",
    ],
)
def test_non_commands_are_ignored(body: str) -> None:
    assert parse_command(body) is None


def test_a_command_after_a_closed_fence_counts() -> None:
    body = "```\n/stackbot status\n```\n/ok to test be10fd5"
    assert parse_command(body) == OkToTest("be10fd5")


def test_an_unclosed_fence_hides_the_rest() -> None:
    assert parse_command("```\n/ok to test be10fd5") is None


# -- the /ok to test decision ----------------------------------------------------------------


def decide(sha_text: str, **overrides: object):  # type: ignore[no-untyped-def]
    arguments: dict[str, object] = {
        "command": OkToTest(sha_text),
        "pr_head_sha": HEAD,
        "commenter": "phlip",
        "commenter_is_vetter": True,
        "is_pull_request": True,
        "edited": False,
        "previous_heads": [OLD_HEAD],
        "other_pr_heads": {8034: OTHER_PR_HEAD},
        "pr_commits": [UNDER_HEAD, HEAD],
    }
    arguments.update(overrides)
    return decide_ok_to_test(**arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize("given_sha", [HEAD, HEAD[:7], HEAD[:12], HEAD[:7].upper()])
def test_a_vetter_approves_the_head_by_full_sha_or_prefix(given_sha: str) -> None:
    decision = decide(given_sha)
    assert decision.accepted
    assert decision.sha == HEAD
    assert decision.reason_code is Reason.ACCEPTED
    assert decision.reply is None


def test_a_non_vetter_is_refused_before_the_sha_is_looked_at() -> None:
    for given_sha in (HEAD, OLD_HEAD[:7], "zzz"):
        decision = decide(given_sha, commenter_is_vetter=False, commenter="drive-by")
        assert not decision.accepted
        assert decision.reason_code is Reason.NOT_A_VETTER
        assert decision.reply is not None
        assert decision.reply.startswith("@drive-by, only vetters")


def test_a_stale_sha_names_the_current_head() -> None:
    decision = decide(OLD_HEAD[:7])
    assert decision.reason_code is Reason.STALE
    assert decision.reply == (
        "`1dd9473` is not the head of this PR (head is `be10fd5`); "
        "comment `/ok to test be10fd5` to test the current head."
    )


def test_an_older_commit_of_the_pr_is_not_its_head() -> None:
    assert decide(UNDER_HEAD[:9]).reason_code is Reason.STALE


def test_a_six_digit_prefix_is_too_short_even_when_it_matches() -> None:
    decision = decide(HEAD[:6])
    assert decision.reason_code is Reason.TOO_SHORT
    assert decision.reply is not None
    assert "at least 7 hex digits" in decision.reply


def test_an_ambiguous_prefix_is_refused() -> None:
    twin = HEAD[:8] + "f" * 32  # another PR's head sharing the first 8 digits
    decision = decide(HEAD[:8], other_pr_heads={8040: twin})
    assert decision.reason_code is Reason.AMBIGUOUS
    assert decision.reply is not None
    assert "matches more than one commit" in decision.reply
    assert f"`/ok to test {HEAD}`" in decision.reply
    # one more digit tells them apart
    assert decide(HEAD[:9], other_pr_heads={8040: twin}).accepted


def test_a_prefix_shared_with_an_earlier_head_is_ambiguous() -> None:
    old = HEAD[:7] + "0" * 33
    assert decide(HEAD[:7], previous_heads=[old]).reason_code is Reason.AMBIGUOUS


def test_another_prs_head_names_that_pr() -> None:
    decision = decide(OTHER_PR_HEAD[:7])
    assert decision.reason_code is Reason.OTHER_PR
    assert decision.reply == (
        "`8034abc` is the head of #8034, not of this PR (head is `be10fd5`); "
        "comment `/ok to test be10fd5` to test the current head."
    )


def test_an_unknown_sha() -> None:
    decision = decide("deadbeef")
    assert decision.reason_code is Reason.UNKNOWN
    assert decision.reply is not None
    assert decision.reply.startswith("`deadbeef` is not a commit of this PR")


@pytest.mark.parametrize(
    ("given_sha", "reason"),
    [
        ("", Reason.MISSING_SHA),
        ("be10fd5x", Reason.NOT_A_SHA),
        ("g" * 7, Reason.NOT_A_SHA),
        ("a" * 41, Reason.NOT_A_SHA),
    ],
)
def test_malformed_shas(given_sha: str, reason: Reason) -> None:
    decision = decide(given_sha)
    assert decision.reason_code is reason
    assert decision.reply is not None
    assert "/ok to test be10fd5" in decision.reply


def test_a_comment_on_an_issue() -> None:
    decision = decide(HEAD, is_pull_request=False)
    assert decision.reason_code is Reason.NOT_A_PULL_REQUEST
    assert decision.reply == "`/ok to test` works on pull requests only; this is an issue."


def test_an_edit_naming_the_head_approves_it() -> None:
    decision = decide(HEAD[:7], edited=True)
    assert decision.accepted
    assert decision.sha == HEAD


@pytest.mark.parametrize("overrides", [{}, {"commenter_is_vetter": False}])
def test_a_refused_edit_gets_no_reply(overrides: dict[str, object]) -> None:
    decision = decide(OLD_HEAD[:7], edited=True, **overrides)
    assert not decision.accepted
    assert decision.reason_code in (Reason.STALE, Reason.NOT_A_VETTER)
    assert decision.reply is None


@given(
    length=st.integers(min_value=7, max_value=40),
    head=st.text("0123456789abcdef", min_size=40, max_size=40),
)
def test_every_long_enough_prefix_of_a_lone_head_is_accepted(length: int, head: str) -> None:
    decision = decide(
        head[:length], pr_head_sha=head, previous_heads=[], other_pr_heads={}, pr_commits=[head]
    )
    assert decision.accepted
    assert decision.sha == head


def test_replies_never_carry_more_than_the_commenter_and_shas() -> None:
    decision = decide(OLD_HEAD[:7], commenter_is_vetter=False, commenter="someone")
    assert decision.reply is not None
    assert len(decision.reply) < 200


# -- trusted authors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("author", "trusted", "org_member", "commit_authors", "expected"),
    [
        ("connor", ["Connor"], False, ["connor", "CONNOR"], True),
        ("connor", [], True, ["connor"], True),
        ("connor", ["connor"], False, ["connor", "someone-else"], False),
        ("connor", ["connor"], False, ["connor", None], False),  # a commit tied to no account
        ("connor", [], False, ["connor"], False),
        ("connor", ["connor"], False, [], False),
    ],
)
def test_trusted_authors(
    author: str,
    trusted: list[str],
    org_member: bool,
    commit_authors: list[str | None],
    expected: bool,
) -> None:
    assert (
        is_trusted_author(
            author, trusted_authors=trusted, org_member=org_member, commit_authors=commit_authors
        )
        is expected
    )


def test_restack_and_port_commands_parse_strictly() -> None:
    from stackbot.domain.commands import Port, Restack, Unknown

    assert parse_command("/stackbot restack") == Restack(push=False)
    assert parse_command("/stackbot restack --push") == Restack(push=True)
    assert parse_command("/stackbot port dev") == Port("dev")
    assert parse_command("/stackbot port release/1.0") == Port("release/1.0")
    for bad in ("/stackbot port", "/stackbot port ../x", "/stackbot port -x", "/stackbot port a b",
                "/stackbot restack now"):  # fmt: skip
        assert isinstance(parse_command(bad), Unknown), bad


def test_a_retest_reply_names_the_sets_and_the_prs_own_files() -> None:
    files = [f"tests/unit_tests/test_{n}.py" for n in range(12)] + ["tests/`x`.py"]
    reply = retest_reply(8035, test_sets=["amax-group"], own=True, own_files=files)
    assert reply.startswith(
        "Retesting `amax-group` and `own:8035` (#8035's own test files: "
        "`tests/unit_tests/test_0.py`, "
    )
    # at most ten paths, the rest (and any path a code span could not hold) counted
    assert "`tests/unit_tests/test_9.py`, 3 more files) on #8035's current tree" in reply
    assert "test_10" not in reply and "`x`" not in reply
    assert retest_reply(8035, test_sets=[], own=True, integrated=False) == (
        "#8035's current head is not integrated yet: `own:8035` (#8035's own test files) "
        "will be tested on its tree once it is."
    )


def test_own_test_set_names_take_ascii_digits_only() -> None:
    assert own_test_set_pr("own:8035") == 8035
    for name in ("own:²", "own:٣", "own:", "own:-1", "amax-group", "OWN:1"):
        assert own_test_set_pr(name) is None, name


def test_test_alone_parses_without_arguments_only() -> None:
    from stackbot.domain.commands import USAGE, TestAlone

    assert parse_command("/stackbot test-alone") == TestAlone()
    assert parse_command("/Stackbot TEST-ALONE  ") == TestAlone()
    assert isinstance(parse_command("/stackbot test-alone #8034"), Unknown)
    assert "`/stackbot test-alone`" in USAGE


def test_land_commands_parse_strictly() -> None:
    from stackbot.domain.commands import Land, Unknown

    assert parse_command("/stackbot land") == Land()
    assert parse_command("/stackbot land #8035") == Land(up_to=8035)
    assert parse_command("/stackbot land 8035") == Land(up_to=8035)
    assert parse_command("/stackbot land cancel") == Land(cancel=True)
    assert parse_command("/stackbot LAND Cancel") == Land(cancel=True)
    for bad in ("/stackbot land #0", "/stackbot land #1 #2", "/stackbot land now",
                f"/stackbot land #{2**31}"):  # fmt: skip
        assert isinstance(parse_command(bad), Unknown), bad
