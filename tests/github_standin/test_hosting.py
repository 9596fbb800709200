"""The stand-in hosts real git repositories: PR heads under refs/pull/N/head, real merges,
imports from local repositories, and a file:// clone URL any git can fetch from."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from stackbot.standin import StandinError, hosting
from tests.support.standin import StandinWorld


def _git(cwd: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return result.stdout.strip()


def _local_repo(path: Path) -> Path:
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "dev@example.com")
    _git(path, "config", "user.name", "Dev")
    (path / "a.txt").write_text("one\n")
    _git(path, "add", "a.txt")
    _git(path, "commit", "-q", "-m", "first")
    return path


def test_pr_heads_are_fetchable_from_the_clone_url(standin: StandinWorld, tmp_path: Path) -> None:
    c = standin.control
    pull = c.open_pull(
        standin.repo, author="alice", head="feat", title="feat", files={"f.py": "x = 1\n"}
    )
    clone = tmp_path / "clone"
    _git(tmp_path, "init", "-q", "--bare", str(clone))
    url = c.repo(standin.repo).clone_url
    assert url.startswith("file://")
    _git(
        clone,
        "fetch",
        "-q",
        url,
        "+refs/pull/*/head:refs/remotes/pr/*",
        "+refs/heads/*:refs/remotes/origin/*",
    )
    assert _git(clone, "rev-parse", f"refs/remotes/pr/{pull.number}") == pull.head_sha
    assert _git(clone, "show", f"{pull.head_sha}:f.py") == "x = 1"
    assert (
        _git(clone, "log", "-1", "--format=%an <%ae>", pull.head_sha)
        == "alice <alice@users.noreply.github.com>"
    )


def test_a_push_moves_the_pr_head_and_its_pull_ref(standin: StandinWorld) -> None:
    c = standin.control
    pull = c.open_pull(
        standin.repo, author="alice", head="feat", title="feat", files={"f.py": "1\n"}
    )
    first = pull.head_sha
    second = c.commit(
        standin.repo, "feat", {"f.py": "2\n", "g.py": "3\n"}, message="more", author="alice"
    )
    bare = c.repo(standin.repo).bare_path
    assert c.pull(standin.repo, pull.number).head_sha == second
    assert hosting.resolve(bare, f"refs/pull/{pull.number}/head") == second
    assert hosting.commit_info(bare, second).parents == (first,)
    files = {f.filename: f.status for f in hosting.changed_files(bare, first, second)}
    assert files == {"f.py": "modified", "g.py": "added"}


def test_merging_makes_a_real_merge_commit(standin: StandinWorld) -> None:
    c = standin.control
    pull = c.open_pull(
        standin.repo, author="alice", head="feat", title="feat", files={"f.py": "1\n"}
    )
    main_before = c.commit(
        standin.repo, "main", {"other.txt": "main moved\n"}, message="main moves", author="bob"
    )
    merged = c.merge_pull(standin.repo, pull.number, merger="bob")
    bare = c.repo(standin.repo).bare_path
    info = hosting.commit_info(bare, merged)
    assert info.parents == (main_before, pull.head_sha)
    assert hosting.resolve(bare, "refs/heads/main") == merged
    tree = hosting.git(bare, "ls-tree", "-r", "--name-only", merged).stdout.decode().split()
    assert {"f.py", "other.txt", "README.md"} <= set(tree)
    state = c.pull(standin.repo, pull.number)
    assert (state.state, state.merged, state.merge_commit_sha, state.merged_by) == (
        "closed",
        True,
        merged,
        "bob",
    )


def test_a_conflicting_merge_is_refused_naming_the_files(standin: StandinWorld) -> None:
    c = standin.control
    pull = c.open_pull(
        standin.repo, author="alice", head="feat", title="feat", files={"README.md": "theirs\n"}
    )
    c.commit(standin.repo, "main", {"README.md": "ours\n"}, message="ours", author="bob")
    with pytest.raises(StandinError, match=r"does not merge cleanly: README\.md"):
        c.merge_pull(standin.repo, pull.number, merger="bob")
    assert c.pull(standin.repo, pull.number).state == "open"


def test_repositories_and_branches_come_from_local_repos(
    standin: StandinWorld, tmp_path: Path
) -> None:
    local = _local_repo(tmp_path / "local")
    c = standin.control
    repo = c.create_repo("NVIDIA/imported", source=local)
    assert hosting.resolve(repo.bare_path, "refs/heads/main") == _git(local, "rev-parse", "HEAD")
    _git(local, "checkout", "-q", "-b", "topic")
    (local / "b.txt").write_text("two\n")
    _git(local, "add", "b.txt")
    _git(local, "commit", "-q", "-m", "topic")
    sha = c.push_from("NVIDIA/imported", local, "topic", pusher="alice")
    pull = c.open_pull("NVIDIA/imported", author="alice", head="topic", title="topic")
    assert pull.head_sha == sha == _git(local, "rev-parse", "HEAD")
    (local / "b.txt").write_text("three\n")
    _git(local, "commit", "-q", "-am", "again")
    c.push_from("NVIDIA/imported", local, "topic", pusher="alice")
    assert c.pull("NVIDIA/imported", pull.number).head_sha == _git(local, "rev-parse", "HEAD")
    assert [d.action for d in c.deliveries("pull_request")][-1] == "synchronize"


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (lambda c, r: c.create_repo("no-slash"), "owner/name"),
        (lambda c, r: c.create_repo(r), "already exists"),
        (lambda c, r: c.open_pull(r, author="a", head="missing", title="t"), "no branch 'missing'"),
        (
            lambda c, r: c.open_pull(r, author="a", head="x", base="nope", title="t", files={}),
            "no base branch",
        ),
        (lambda c, r: c.comment(r, 77, "a", "hi"), "no issue or pull request #77"),
        (lambda c, r: c.pull("NVIDIA/other", 1), "no repository NVIDIA/other"),
        (lambda c, r: c.merge_pull(r, 5, merger="bob"), "no pull request #5"),
    ],
)
def test_bad_control_calls_say_what_is_wrong(
    standin: StandinWorld, action: object, message: str
) -> None:
    with pytest.raises((StandinError, ValueError), match=message):
        action(standin.control, standin.repo)  # type: ignore[operator]


def test_stacks_follow_githubs_rules(standin: StandinWorld) -> None:
    c = standin.control
    a = c.open_pull(standin.repo, author="alice", head="a", title="a", files={"a": "1\n"})
    b = c.open_pull(standin.repo, author="alice", head="b", base="a", title="b", files={"b": "1\n"})
    d = c.open_pull(standin.repo, author="alice", head="d", title="d", files={"d": "1\n"})
    with pytest.raises(StandinError, match=f"#{d.number} is based on 'main', not on #{b.number}"):
        c.create_stack(standin.repo, [a.number, b.number, d.number])
    stack = c.create_stack(standin.repo, [a.number, b.number])
    assert (stack.base_ref, stack.pulls) == ("main", [a.number, b.number])
    with pytest.raises(StandinError, match="already in a stack"):
        c.create_stack(standin.repo, [a.number, b.number])
