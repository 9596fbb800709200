"""The `/ok to test <sha>` matrix end to end: users act on the GitHub stand-in, deliveries go
through the real webhook intake and worker, the handlers talk to the stand-in through the real
adapter.

People (see tests.support.standin and tests.sync.pipeline): alice is an NVIDIA member (trusted
org: a vetter and a trusted author), bob has write access, carol is an outsider, dave is a
configured vetter without repository access, erin a configured trusted author.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from tests.sync.pipeline import Pipeline, open_pr, push


def integrate_payloads(pipeline: Pipeline) -> list[dict[str, object]]:
    return [task.payload for task in pipeline.tasks("integrate")]


def test_an_outsiders_pr_waits_for_a_vetter(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    assert pipeline.approvals(number) == []
    assert pipeline.replies(number) == []


def test_a_vetter_with_write_access_approves_the_head_by_prefix(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    before = len(pipeline.tasks("integrate"))
    head = pipeline.head(number)
    pipeline.control.comment(pipeline.repo, number, "bob", f"Looks fine.\n\n/ok to test {head[:7]}")
    pipeline.deliver()
    [approval] = pipeline.approvals(number)
    assert (approval.sha, approval.vetter, approval.kind) == (head, "bob", "ok_to_test")
    assert approval.comment_id is not None
    assert pipeline.replies(number) == []  # an accepted approval needs no reply
    payloads = integrate_payloads(pipeline)
    assert len(payloads) >= max(before, 1)
    assert any(p["number"] == number and "approved" in str(p["reason"]) for p in payloads)


def test_a_configured_vetter_approves(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    head = pipeline.head(number)
    pipeline.control.comment(pipeline.repo, number, "dave", f"/ok to test {head}")
    pipeline.deliver()
    assert [(a.sha, a.vetter) for a in pipeline.approvals(number)] == [(head, "dave")]


def test_a_non_vetter_gets_one_reply_and_changes_nothing(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    head = pipeline.head(number)
    pipeline.control.comment(pipeline.repo, number, "carol", f"/ok to test {head[:7]}")
    pipeline.deliver()
    assert pipeline.approvals(number) == []
    [reply] = pipeline.replies(number)
    assert reply.body.startswith("@carol, only vetters")
    assert head[:7] not in reply.body  # nothing about the PR's commits for a non-vetter


def test_a_trusted_org_member_is_tested_without_a_comment(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="alice", branch="alice/amax", title="Amax group")
    pipeline.deliver()
    [approval] = pipeline.approvals(number)
    assert (approval.sha, approval.vetter, approval.kind) == (
        pipeline.head(number),
        "alice",
        "trusted",
    )
    assert any(
        p["number"] == number and "trusted" in str(p["reason"])
        for p in integrate_payloads(pipeline)
    )


def test_a_configured_trusted_author_is_tested_without_a_comment(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="erin", branch="erin/amax", title="Amax group")
    pipeline.deliver()
    assert [(a.vetter, a.kind) for a in pipeline.approvals(number)] == [("erin", "trusted")]


def test_a_trusted_author_with_someone_elses_commit_waits(pipeline: Pipeline) -> None:
    number = open_pr(
        pipeline,
        author="alice",
        branch="alice/mixed",
        title="Mixed",
        commit_authors=("carol", "alice"),
    )
    pipeline.deliver()
    assert pipeline.approvals(number) == []


def test_an_approval_holds_for_one_commit_and_a_stale_sha_is_refused(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    first = pipeline.head(number)
    pipeline.control.comment(pipeline.repo, number, "bob", f"/ok to test {first[:7]}")
    pipeline.deliver()
    second = push(pipeline, number, author="carol")
    pipeline.deliver()
    pipeline.control.comment(pipeline.repo, number, "bob", f"/ok to test {first[:7]}")
    pipeline.deliver()
    assert [a.sha for a in pipeline.approvals(number)] == [first]  # the push needs a new one
    [reply] = pipeline.replies(number)
    assert reply.body == (
        f"`{first[:7]}` is not the head of this PR (head is `{second[:7]}`); "
        f"comment `/ok to test {second[:7]}` to test the current head."
    )
    pipeline.control.comment(pipeline.repo, number, "bob", f"/ok to test {second[:7]}")
    pipeline.deliver()
    assert [a.sha for a in pipeline.approvals(number)] == [first, second]


def test_a_six_digit_prefix_is_too_short(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    head = pipeline.head(number)
    pipeline.control.comment(pipeline.repo, number, "bob", f"/ok to test {head[:6]}")
    pipeline.deliver()
    assert pipeline.approvals(number) == []
    [reply] = pipeline.replies(number)
    assert "too short" in reply.body and f"/ok to test {head[:7]}" in reply.body


def test_another_prs_sha_is_named(pipeline: Pipeline) -> None:
    mine = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    other = open_pr(pipeline, author="carol", branch="carol/other", title="Other")
    pipeline.deliver()
    pipeline.control.comment(pipeline.repo, mine, "bob", f"/ok to test {pipeline.head(other)[:10]}")
    pipeline.deliver()
    assert pipeline.approvals(mine) == []
    [reply] = pipeline.replies(mine)
    assert f"is the head of #{other}, not of this PR" in reply.body


def test_an_unknown_sha(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    pipeline.control.comment(pipeline.repo, number, "bob", "/ok to test 0123456789")
    pipeline.deliver()
    [reply] = pipeline.replies(number)
    assert reply.body.startswith("`0123456789` is not a commit of this PR")


def test_a_command_on_an_issue_gets_one_reply_and_changes_nothing(pipeline: Pipeline) -> None:
    issue = pipeline.control.open_issue(pipeline.repo, author="carol", title="Question").number
    pipeline.control.comment(pipeline.repo, issue, "bob", "/ok to test 0123456")
    pipeline.deliver()
    assert pipeline.approvals(issue) == []
    [reply] = pipeline.replies(issue)
    assert "pull requests only" in reply.body


def test_other_comments_on_an_issue_are_ignored_silently(pipeline: Pipeline) -> None:
    issue = pipeline.control.open_issue(pipeline.repo, author="carol", title="Question").number
    pipeline.control.comment(pipeline.repo, issue, "bob", "How do I run the tests?")
    pipeline.deliver()
    assert pipeline.replies(issue) == []
    assert pipeline.tasks("pr_command", status="done") == []


def test_an_edited_comment_naming_the_head_approves_and_a_refused_edit_is_silent(
    pipeline: Pipeline,
) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    head = pipeline.head(number)
    comment = pipeline.control.comment(pipeline.repo, number, "bob", "/ok to test 0123456")
    pipeline.deliver()
    assert len(pipeline.replies(number)) == 1  # the typo is refused once
    pipeline.control.edit_comment(pipeline.repo, comment.id, "/ok to test 7654321")
    pipeline.deliver()
    assert len(pipeline.replies(number)) == 1  # a refused edit draws no second reply
    pipeline.control.edit_comment(pipeline.repo, comment.id, f"/ok to test {head[:8]}")
    pipeline.deliver()
    assert [(a.sha, a.comment_id) for a in pipeline.approvals(number)] == [(head, comment.id)]
    assert len(pipeline.replies(number)) == 1


def test_comments_without_a_command_are_ignored(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    head = pipeline.head(number)
    pipeline.control.comment(
        pipeline.repo,
        number,
        "bob",
        f"> /ok to test {head[:7]}\n\nQuoting the bot is not a command.",
    )
    pipeline.control.comment(pipeline.repo, number, "bob", "Thanks, I will run /ok to test later")
    pipeline.deliver()
    assert pipeline.approvals(number) == []
    assert pipeline.replies(number) == []


def test_an_ambiguous_prefix_is_refused(pipeline: Pipeline) -> None:
    """Two real commits whose SHAs share 7 hex digits (found by the birthday bound, ~20k
    candidate commit objects), each the head of a PR."""
    first, second = colliding_commits(pipeline)
    mine = open_branch_pr(pipeline, "carol/one", first)
    other = open_branch_pr(pipeline, "carol/two", second)
    pipeline.deliver()
    assert first[:7] == second[:7] and first != second
    pipeline.control.comment(pipeline.repo, mine, "bob", f"/ok to test {first[:7]}")
    pipeline.deliver()
    assert pipeline.approvals(mine) == []
    [reply] = pipeline.replies(mine)
    assert "matches more than one commit" in reply.body and first in reply.body
    unique = next(n for n in range(8, 41) if first[:n] != second[:n])
    pipeline.control.comment(pipeline.repo, mine, "bob", f"/ok to test {first[:unique]}")
    pipeline.deliver()
    assert [a.sha for a in pipeline.approvals(mine)] == [first]
    assert pipeline.approvals(other) == []


def colliding_commits(pipeline: Pipeline) -> tuple[str, str]:
    bare = pipeline.control.repo(pipeline.repo).bare_path
    parent = git(bare, "rev-parse", "refs/heads/main")
    tree = git(bare, "rev-parse", "refs/heads/main^{tree}")
    person = "carol <carol@users.noreply.github.com> 1700000000 +0000"
    seen: dict[str, bytes] = {}
    for nonce in range(2_000_000):
        content = f"tree {tree}\nparent {parent}\nauthor {person}\ncommitter {person}\n\nFix, try {nonce}\n".encode()
        sha = hashlib.sha1(b"commit %d\0" % len(content) + content).hexdigest()
        earlier = seen.setdefault(sha[:7], content)
        if earlier is not content:
            return write_commit(bare, earlier), write_commit(bare, content)
    raise AssertionError("no two commits shared 7 hex digits in 2M tries")


def write_commit(bare: Path, content: bytes) -> str:
    done = subprocess.run(
        ["git", "-C", str(bare), "hash-object", "-w", "-t", "commit", "--stdin"],
        input=content,
        capture_output=True,
        check=True,
    )
    return done.stdout.decode().strip()


def git(bare: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(bare), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def open_branch_pr(pipeline: Pipeline, branch: str, sha: str) -> int:
    pipeline.control.set_branch(pipeline.repo, branch, sha, pusher="carol")
    return int(
        pipeline.control.open_pull(pipeline.repo, author="carol", head=branch, title=branch).number
    )
