"""The git adapter against real repositories: mirrors, refs, merge-tree, objects, push."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackbot.adapters.git import (
    GitError,
    GitMirror,
    GitRepository,
    GitUnavailable,
    NotARepository,
    PushRejected,
    PushUpdate,
    UnknownRef,
)
from stackbot.domain.integration import Conflict
from stackbot.domain.types import Sha
from stackbot.errors import BadInput, RetryLater
from tests.integration.conftest import MirrorOf
from tests.integration.repo_builder import RepoBuilder


def _base(builder: RepoBuilder) -> str:
    return builder.commit(
        "base",
        {
            "f.txt": "a\nb\nc\n",
            "gone.txt": "keep\n",
            "old.txt": "moving\n",
            "pkg/deep/x.py": "x = 1\n",
            "tools/list.json": "{}\n",
        },
    )


def test_mirror_fetches_branches_and_pull_heads(builder: RepoBuilder, mirror_of: MirrorOf) -> None:
    _base(builder)
    head = builder.pr_branch("feature", {"f.txt": "a\nB\nc\n"})
    builder.set_pull_head(7, "feature")
    mirror = mirror_of(builder)
    assert mirror.git_dir.parent.name == "mirrors"
    assert mirror.rev_parse("feature") == head
    assert mirror.rev_parse("refs/pull/7/head") == head
    assert mirror.rev_parse(head[:10]) == head
    # A second open reuses the mirror and a fetch sees new commits.
    newer = builder.commit("more on main", {"n.txt": "n\n"})
    again = GitMirror.open_or_clone(str(builder.path), mirror.git_dir.parent, timeout=60)
    assert again.git_dir == mirror.git_dir
    again.fetch()
    assert again.rev_parse("main") == newer


def test_unknown_ref_is_bad_input_naming_the_ref(builder: RepoBuilder, mirror_of: MirrorOf) -> None:
    _base(builder)
    mirror = mirror_of(builder)
    with pytest.raises(UnknownRef) as caught:
        mirror.rev_parse("no-such-branch")
    assert isinstance(caught.value, BadInput)
    assert "no-such-branch" in str(caught.value)
    with pytest.raises(UnknownRef):
        mirror.rev_parse("--all")


def test_path_that_is_not_a_repository(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(NotARepository) as caught:
        GitRepository.open(plain)
    assert isinstance(caught.value, BadInput)
    assert str(plain) in str(caught.value)
    with pytest.raises(NotARepository, match="does not exist"):
        GitMirror.open_or_clone(str(tmp_path / "missing"), tmp_path / "mirrors")


def test_merge_tree_clean_and_conflict_types(builder: RepoBuilder, mirror_of: MirrorOf) -> None:
    _base(builder)
    builder.branch("one")
    builder.write({"f.txt": "a\nONE\nc\n", "gone.txt": None, "tools/list.json": '{"a": 1}\n'})
    builder.rename("old.txt", "moved.txt")
    builder.commit("one")
    builder.checkout("main")
    builder.pr_branch(
        "two",
        {
            "f.txt": "a\nTWO\nc\n",
            "gone.txt": "changed\n",
            "old.txt": None,
            "tools/list.json": '{"b": 2}\n',
        },
    )
    builder.pr_branch("three", {"pkg/deep/y.py": "y = 2\n"})
    mirror = mirror_of(builder)
    one, two, three = (mirror.rev_parse(b) for b in ("one", "two", "three"))

    clean = mirror.merge_tree(one, three)
    assert clean.clean and clean.conflicts == ()
    assert mirror.blob_at(clean.tree, "pkg/deep/y.py") is not None

    result = mirror.merge_tree(one, two)
    assert not result.clean
    assert set(result.conflicts) == {
        Conflict("f.txt", "contents"),
        Conflict("gone.txt", "modify/delete"),
        Conflict("moved.txt", "rename/delete"),
        Conflict("tools/list.json", "contents"),
    }
    assert any("Merge conflict in f.txt" in m for m in result.messages)
    # The tree git wrote still carries conflict markers: stackbot never commits it as is.
    assert b"<<<<<<<" in mirror.read_blob(mirror.blob_at(result.tree, "f.txt") or "")


def test_commit_tree_is_reproducible(builder: RepoBuilder, mirror_of: MirrorOf) -> None:
    _base(builder)
    builder.pr_branch("p", {"f.txt": "a\nb\nc\nd\n"})
    mirror = mirror_of(builder)
    base = mirror.rev_parse("main")
    head = mirror.rev_parse("p")
    merged = mirror.merge_tree(base, head)
    first = mirror.commit_tree(merged.tree, [base, head], "Merge p\n")
    second = mirror.commit_tree(merged.tree, [base, head], "Merge p\n")
    assert first == second
    # Written in-process, yet the very commit git itself writes for the same input.
    when = f"@{mirror.commit_time(first)} +0000"
    env_git = subprocess.run(
        ["git", "--git-dir", str(mirror.git_dir), "commit-tree", merged.tree, "-p", base, "-p", head, "-F", "-"],
        input="Merge p\n", capture_output=True, text=True, check=True,
        env={**os.environ, "GIT_AUTHOR_NAME": "stackbot", "GIT_AUTHOR_EMAIL": "stackbot@users.noreply.localhost",
             "GIT_COMMITTER_NAME": "stackbot", "GIT_COMMITTER_EMAIL": "stackbot@users.noreply.localhost",
             "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when},
    )  # fmt: skip
    assert env_git.stdout.strip() == first
    fsck = subprocess.run(
        ["git", "--git-dir", str(mirror.git_dir), "fsck", "--strict"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    assert mirror.tree_of(first) == merged.tree
    fresh = GitRepository(mirror.git_dir)  # reads the commit object, not what commit_tree noted
    assert fresh.commit_time(first) == max(fresh.commit_time(base), fresh.commit_time(head))
    fresh.close()


def test_tree_reads_and_writes_match_git(builder: RepoBuilder, mirror_of: MirrorOf) -> None:
    _base(builder)
    builder.commit("exec", {"pkg/run.sh": "#!/bin/sh\n"})
    builder.git("update-index", "--chmod=+x", "pkg/run.sh")
    builder.commit("chmod")
    mirror = mirror_of(builder)
    tree = mirror.tree_of(mirror.rev_parse("main"))
    listed = builder.git("ls-tree", "-r", "main")
    expected = {line.split("\t")[1]: line.split()[2] for line in listed.splitlines()}
    assert mirror.ls_tree(tree) == expected
    assert mirror.ls_tree(tree, "pkg") == {
        k: v for k, v in expected.items() if k.startswith("pkg/")
    }
    assert mirror.ls_tree(tree, "nope") == {}

    new_tree = mirror.replace_paths(
        tree, {"tools/list.json": b'{"x": 1}\n', "pkg/deep/x.py": None, "new/dir/z.txt": b"z\n"}
    )
    builder.commit(
        "same edit by hand",
        {"tools/list.json": '{"x": 1}\n', "pkg/deep/x.py": None, "new/dir/z.txt": "z\n"},
    )
    assert new_tree == builder.rev("HEAD^{tree}")
    assert mirror.changed_paths(tree, new_tree) == {
        "tools/list.json",
        "pkg/deep/x.py",
        "new/dir/z.txt",
    }
    diff = builder.git("diff-tree", "-r", "--name-only", "HEAD~1", "HEAD")
    assert mirror.changed_paths(tree, new_tree) == set(diff.splitlines())


def test_push_is_lease_protected(builder: RepoBuilder, mirror_of: MirrorOf, tmp_path: Path) -> None:
    _base(builder)
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    mirror = mirror_of(builder)
    main = mirror.rev_parse("main")
    mirror.update_refs({"refs/stackbot/series/s/head": main})
    mirror.push(str(remote), [PushUpdate("refs/stackbot/series/s/head", "stackbot/s", None)])
    assert _remote_head(remote, "stackbot/s") == main

    # Someone else moves the branch; a push that expected the old value must not clobber it.
    other = Sha(builder.commit("someone else's", {"other.txt": "o\n"}))
    subprocess.run(
        ["git", "-C", str(builder.path), "push", "--quiet", str(remote), "main:stackbot/s"],
        check=True,
    )
    mirror.fetch()
    ours = mirror.commit_tree(mirror.tree_of(main), [main], "our next integration\n")
    mirror.update_refs({"refs/stackbot/series/s/head": ours})
    with pytest.raises(PushRejected) as caught:
        mirror.push(str(remote), [PushUpdate("refs/stackbot/series/s/head", "stackbot/s", main)])
    assert "someone else pushed" in str(caught.value)
    assert "nothing was overwritten" in str(caught.value)
    assert _remote_head(remote, "stackbot/s") == other
    # With the right expectation it goes through.
    mirror.push(str(remote), [PushUpdate("refs/stackbot/series/s/head", "stackbot/s", other)])
    assert _remote_head(remote, "stackbot/s") == ours


def _remote_head(remote: Path, branch: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(remote), "rev-parse", f"refs/heads/{branch}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP server that accepts connections and never answers: a hung git daemon."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def test_fetch_timeout_is_retry_later(silent_server: int, tmp_path: Path) -> None:
    mirror = GitMirror.open_or_clone(
        f"git://127.0.0.1:{silent_server}/repo.git", tmp_path / "m", timeout=1.5
    )
    with pytest.raises(GitUnavailable) as caught:
        mirror.fetch()
    assert isinstance(caught.value, RetryLater)
    assert "timed out" in str(caught.value)
    assert "fetch" in str(caught.value)


def test_sparse_worktree_holds_only_the_asked_directories(
    builder: RepoBuilder, mirror_of: MirrorOf
) -> None:
    _base(builder)
    builder.commit("docs", {"docs/big.md": "lots\n"})
    mirror = mirror_of(builder)
    with mirror.sparse_worktree(mirror.rev_parse("main"), ["pkg", "tools"]) as path:
        assert (path / "pkg/deep/x.py").read_text() == "x = 1\n"
        assert (path / "tools/list.json").is_file()
        assert not (path / "docs").exists()
        assert not (path / "old.txt").exists()
        kept = path
    assert not kept.exists()
    # The mirror is still a bare repository its reader can open afresh.
    mirror.close()
    assert mirror.rev_parse("main") == builder.rev("main")
    assert "bare = true" in (mirror.git_dir / "config").read_text()
    assert "stackbot-worktree" not in builder.git("-C", str(mirror.git_dir), "worktree", "list")


def test_a_run_fetches_only_its_refs_and_names_a_broken_one(
    builder: RepoBuilder, tmp_path: Path
) -> None:
    """One old PR ref with an unreadable object (as found in a real Megatron-LM mirror) stops a
    fetch of everything, but not a fetch of the refs a run merges."""
    _base(builder)
    good = builder.pr_branch("good", {"f.txt": "a\nB\nc\n"})
    builder.set_pull_head(1, "good")
    builder.checkout("main")
    broken = builder.pr_branch("broken", {"lost.txt": "this blob goes missing\n"})
    builder.set_pull_head(2, "broken")
    builder.checkout("main")
    blob = builder.git("rev-parse", f"{broken}:lost.txt").strip()
    builder.git("branch", "-D", "broken")
    (builder.path / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    mirror = GitMirror.open_or_clone(str(builder.path), tmp_path / "mirrors", timeout=60)
    with pytest.raises(GitError):
        mirror.fetch()  # everything: the broken ref's object cannot be sent
    mirror.fetch(["refs/heads/main", "refs/pull/1/head"])
    assert mirror.rev_parse("refs/pull/1/head") == good
    assert mirror.try_rev_parse("refs/pull/2/head") is None  # nothing else came along
    with pytest.raises(GitError) as failed:
        mirror.fetch(["refs/heads/main", "refs/pull/2/head"])
    # Named alone: main was fetched fine on its own.
    assert str(failed.value).endswith(
        f". refs/pull/2/head could not be fetched from {mirror.source}"
    )
    with pytest.raises(BadInput, match="full ref name"):
        mirror.fetch(["main"])
    mirror.close()
