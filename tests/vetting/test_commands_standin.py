"""`/stackbot status`, `/stackbot retest [TEST_SET | own:N]` and unknown commands, end to end."""

from __future__ import annotations

from stackbot.db import github_store as store
from stackbot.db.engine import session_scope
from stackbot.db.models import IntegrationRun, IntegrationStep
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
    # the verdict and its next action first (issue 12), then the status of this commit
    first = reply.body.splitlines()[0]
    assert first.startswith("✋ **needs approval**") and f"/ok to test {head[:7]}" in first
    assert f"stackbot status · #{child} at `{head[:7]}`" in reply.body
    assert f"a vetter must comment `/ok to test {head[:7]}`" in reply.body
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
    # Each is answered, naming what is retested (not integrated yet: once it is).
    replies = sorted(c.body for c in pipeline.replies(number))
    assert replies == [
        f"#{number}'s current head is not integrated yet: `amax-group` will be tested on its "
        "tree once it is.",
        f"#{number}'s current head is not integrated yet: `amax-group`, `blockwise-recipe` and "
        f"`own:{number}` (#{number}'s own test files) will be tested on its tree once it is.",
    ]


def _integrated(pipeline: Pipeline, number: int, own_files: list[str]) -> None:
    """A stack run of the PR's current head as integrate stores it, with its own test files."""
    head = pipeline.head(number)
    with session_scope(pipeline.engine) as session:
        repository = store.get_repository(session, full_name=pipeline.repo)
        assert repository is not None and repository.id is not None
        run = IntegrationRun(
            repo_id=repository.id,
            kind="stack",
            name=f"pr-{number}",
            target_pr=number,
            base_ref="main",
            base_sha="b" * 40,
            status="clean",
            heads={str(number): head},
            final_tree="t" * 40,
            final_commit="c" * 40,
        )
        session.add(run)
        session.flush()
        assert run.id is not None
        files = [{"path": path, "status": "added", "on_main": False} for path in own_files]
        step = IntegrationStep(
            run_id=run.id,
            position=1,
            pr_number=number,
            head_sha=head,
            outcome="clean",
            tree="t" * 40,
            commit="c" * 40,
            own_test_files=files,
        )
        session.add(step)


def test_a_vetter_retests_the_prs_own_test_files_as_own_n(pipeline: Pipeline) -> None:
    """Issue 13: ``own:N`` (the PR's own test files) is a set a retest can name, and the reply
    says what runs: the set and its files (a hostile file name is counted, never shown)."""
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    hostile = "tests/unit_tests/test_`@NVIDIA/everyone`.py"
    _integrated(pipeline, number, ["tests/unit_tests/test_ctx.py", hostile])
    pipeline.control.comment(pipeline.repo, number, "bob", f"/stackbot retest own:{number}")
    pipeline.deliver()
    [task] = pipeline.tasks("retest")
    assert task.payload == {"repo": pipeline.repo, "number": number, "test_set": f"own:{number}"}
    [reply] = pipeline.replies(number)
    assert reply.body == (
        f"Retesting `own:{number}` (#{number}'s own test files: "
        "`tests/unit_tests/test_ctx.py`, 1 more file) "
        f"on #{number}'s current tree: new jobs, no earlier result reused."
    )
    # Every set: the configured defaults and the PR's own files, all named.
    pipeline.control.comment(pipeline.repo, number, "dave", "/stackbot retest")
    pipeline.deliver()
    assert len(pipeline.tasks("retest")) == 2
    every = [c.body for c in pipeline.replies(number)][-1]
    assert every.startswith(
        f"Retesting `amax-group`, `blockwise-recipe` and `own:{number}` (#{number}'s own test "
        "files: `tests/unit_tests/test_ctx.py`, 1 more file) on"
    ), every
    assert "NVIDIA/everyone" not in every


def test_own_n_is_refused_for_another_pr_and_where_there_is_nothing_to_run(
    pipeline: Pipeline,
) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    other = open_pr(pipeline, author="carol", branch="carol/more", title="More")
    pipeline.deliver()
    _integrated(pipeline, number, [])  # adds or modifies no test file
    pipeline.control.comment(pipeline.repo, number, "bob", f"/stackbot retest own:{other}")
    pipeline.deliver()
    pipeline.control.comment(pipeline.repo, number, "bob", f"/stackbot retest own:{number}")
    pipeline.deliver()
    pipeline.control.comment(pipeline.repo, number, "bob", "/stackbot retest own:²")
    pipeline.deliver()
    assert pipeline.tasks("retest") == []
    foreign, empty, odd = (c.body for c in pipeline.replies(number))
    assert foreign == (
        f"`own:{other}` is #{other}'s own test files; on #{number}, "
        f"`/stackbot retest own:{number}` retests this PR's own test files."
    )
    assert empty == (
        f"#{number} adds or modifies no test file under `tests/unit_tests` on its current "
        f"head: `own:{number}` has nothing to retest."
    )
    # Not an own:N name (ASCII digits only), so an unknown test set; never echoed.
    assert odd.startswith("There is no such test set; known: ") and "²" not in odd
    assert odd.endswith(f", and `own:{number}` for this PR's own test files.")


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
    assert replies[1].startswith("There is no such test set; known: ")
    assert "`amax-group`" in replies[1]


def test_an_unknown_stackbot_command_gets_the_usage(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    pipeline.control.comment(pipeline.repo, number, "carol", "/stackbot please merge")
    pipeline.deliver()
    [reply] = pipeline.replies(number)
    assert reply.body.startswith(
        "stackbot does not know that command. Commands: `/ok to test <sha>`"
    )
    assert "please merge" not in reply.body


HOSTILE = "`@NVIDIA/everyone` ![pic](https://evil.example/p.png) `"


def test_replies_never_render_what_the_commenter_wrote(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    for body in (
        f"/stackbot {HOSTILE}",
        f"/ok to test {HOSTILE}",
        "/ok to test `@NVIDIA/everyone`![pic](https://evil.example/p.png)",
        "/stackbot retest ![pic](https://evil.example/p.png)",
        "/stackbot retest `@NVIDIA/everyone`",
    ):
        pipeline.control.comment(pipeline.repo, number, "bob", body)
    pipeline.control.comment(pipeline.repo, number, "carol", f"/stackbot hi {HOSTILE}")
    pipeline.deliver()
    replies = [c.body for c in pipeline.replies(number)]
    assert len(replies) == 6
    for body in replies:
        assert "NVIDIA/everyone" not in body and "evil.example" not in body and "![" not in body
        assert body.count("`") % 2 == 0  # every code span is closed
    assert pipeline.tasks("retest") == []


def test_a_non_vetter_gets_at_most_one_reply_per_pr(pipeline: Pipeline) -> None:
    first = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    second = open_pr(pipeline, author="carol", branch="carol/more", title="More")
    pipeline.deliver()
    pipeline.control.comment(pipeline.repo, first, "carol", "/stackbot please merge")
    pipeline.deliver()
    pipeline.control.comment(pipeline.repo, first, "carol", "/stackbot merge now")
    pipeline.control.comment(pipeline.repo, first, "carol", "/stackbot retest")
    pipeline.control.comment(pipeline.repo, first, "carol", f"/ok to test {pipeline.head(first)}")
    pipeline.deliver()
    [reply] = pipeline.replies(first)
    assert reply.body.startswith("stackbot does not know that command.")
    assert pipeline.approvals(first) == [] and pipeline.tasks("retest") == []
    # Another PR: one reply there too.
    pipeline.control.comment(pipeline.repo, second, "carol", "/stackbot retest")
    pipeline.control.comment(pipeline.repo, second, "carol", "/stackbot retest")
    pipeline.deliver()
    [other] = pipeline.replies(second)
    assert other.body.startswith("@carol, only vetters")
    # A vetter on the same PR is answered every time (within the per-user limit).
    pipeline.control.comment(pipeline.repo, first, "bob", "/stackbot what")
    pipeline.control.comment(pipeline.repo, first, "bob", "/stackbot why")
    pipeline.deliver()
    assert len(pipeline.replies(first)) == 3


def test_replies_to_one_user_are_limited_per_hour(pipeline: Pipeline) -> None:
    limit = pipeline.settings.command_replies_per_hour
    first = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    second = open_pr(pipeline, author="carol", branch="carol/more", title="More")
    pipeline.deliver()
    for n in range(limit + 2):
        pipeline.control.comment(pipeline.repo, (first, second)[n % 2], "bob", "/stackbot x")
    pipeline.deliver()
    assert len(pipeline.replies(first)) + len(pipeline.replies(second)) == limit
    # The limit is per user: another vetter is still answered, and commands still act.
    pipeline.control.comment(pipeline.repo, first, "dave", "/stackbot x")
    pipeline.control.comment(pipeline.repo, first, "bob", "/stackbot retest")
    pipeline.deliver()
    assert len(pipeline.replies(first)) + len(pipeline.replies(second)) == limit + 1
    assert len(pipeline.tasks("retest")) == 1


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


def test_test_alone_is_for_vetters_and_names_the_prs_own_tree(pipeline: Pipeline) -> None:
    """Issue 24: `/stackbot test-alone` tests main + the PR's stack, by the rule of `/ok to
    test` (vetters only); the reply names the tree, or why it cannot be tested yet."""
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    pipeline.control.comment(pipeline.repo, number, "carol", "/stackbot test-alone")
    pipeline.deliver()
    pipeline.control.comment(pipeline.repo, number, "bob", "/stackbot test-alone")
    pipeline.deliver()
    _integrated(pipeline, number, [])
    pipeline.control.comment(pipeline.repo, number, "dave", "/stackbot test-alone")
    pipeline.deliver()
    assert pipeline.tasks("test_alone") == []  # refused, not integrated, not approved
    refused, early, waiting = (c.body for c in pipeline.replies(number))
    assert refused == (
        "@carol, only vetters (write access, or listed as vetters in stackbot's "
        "configuration) can ask for a test of this PR's own tree."
    )
    assert early.startswith(f"#{number}'s current head is not integrated yet")
    assert waiting.startswith(f"#{number}'s own tree, main + #{number}, cannot be tested yet: ")
    assert "not approved" in waiting
    with session_scope(pipeline.engine) as session:
        repository = store.get_repository(session, full_name=pipeline.repo)
        assert repository is not None and repository.id is not None
        store.add_approval(
            session,
            repo_id=repository.id,
            pr_number=number,
            sha=pipeline.head(number),
            vetter="bob",
            kind="ok_to_test",
        )
    pipeline.control.comment(pipeline.repo, number, "bob", "/stackbot test-alone")
    pipeline.deliver()
    [task] = pipeline.tasks("test_alone")
    assert task.payload == {"repo": pipeline.repo, "number": number}
    reply = [c.body for c in pipeline.replies(number)][-1]
    assert reply.startswith(f"Testing #{number}'s own tree, main + #{number} (`ccccccc`)")
