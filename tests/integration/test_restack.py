"""``stackbot restack`` on real repositories: a child restacked after its parent was
squash-merged (nothing resurrected, ghost commits left out), a child whose own commit conflicts,
and bad input."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from stackbot.cli.main import main
from tests.integration.repo_builder import RepoBuilder

F, G, H, K = "src/f.py", "src/g.py", "src/h.py", "k.txt"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def child_commit(repo: RepoBuilder, message: str, files: dict[str, str | None]) -> str:
    repo.write(files)
    repo.git("commit", "--quiet", "--author=Child Dev <child@example.com>", "-m", message)
    return repo.rev("HEAD")


@pytest.fixture
def squashed(builder: RepoBuilder) -> RepoBuilder:
    """main: F, K. parent: one commit touching F and adding G. child (on parent): deletes F,
    adds H. Then the parent is squash-merged into main, and main moves on (K)."""
    builder.commit("base", {F: "def f():\n    return 1\n", K: "k\n"})
    builder.branch("parent")
    builder.commit("parent: f returns 2, add g", {F: "def f():\n    return 2\n", G: "g = 1\n"})
    builder.branch("child", "parent")
    child_commit(builder, "child: drop f\n\nf is unused now.", {F: None})
    child_commit(builder, "child: add h", {H: "h = 1\n"})
    builder.checkout("main")
    builder.git("merge", "--quiet", "--squash", "parent")
    builder.git("commit", "--quiet", "-m", "parent (#1)")
    builder.commit("main moves on", {K: "k\nk2\n"})
    return builder


def git_in(repo: RepoBuilder, *args: str) -> str:
    return repo.git(*args)


def test_restack_after_squash_merge_resurrects_nothing(
    squashed: RepoBuilder, capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    code, out, err = run_cli(
        capsys, "restack", "--repo", str(squashed.path), "--pr", "2=child",
        "--old-base", "parent", "--onto", "main", "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert result["status"] == "clean"
    assert [c["outcome"] for c in result["commits"]] == ["clean", "clean"]
    assert [c["subject"] for c in result["commits"]] == ["child: drop f", "child: add h"]
    # The parent's original commit is a ghost: its patch is the squash on main.
    assert result["ghost_commits"] == [squashed.rev("parent")]
    new_head = result["new_head"]
    mirror = next((tmp_path / "data" / "mirrors").iterdir())  # type: ignore[operator]

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=mirror, capture_output=True, text=True, check=True
        ).stdout

    files = set(git("ls-tree", "-r", "--name-only", new_head).split())
    assert files == {G, H, K}  # F stays deleted; G from the squash; H the child's
    assert git("show", f"{new_head}:{K}") == "k\nk2\n"
    # One new commit per replayed commit, on main, with the original author and message.
    log = git("log", "--format=%an <%ae>|%B%x00", f"{squashed.rev('main')}..{new_head}")
    entries = [e.strip() for e in log.split("\0") if e.strip()]
    assert entries == [
        "Child Dev <child@example.com>|child: add h",
        "Child Dev <child@example.com>|child: drop f\n\nf is unused now.",
    ]
    assert git("rev-parse", "refs/stackbot/restack/2").strip() == new_head
    # F: the replay deletes it (the child's own commit did); a merge of the branch would have
    # kept it in a modify/delete conflict. Said, not silent.
    assert result["surprises"] == [
        {
            "path": F,
            "change": "deleted",
            "by": result["commits"][0]["original"],
            "merge_conflict": "modify/delete",
        }
    ]
    code, text, _ = run_cli(
        capsys, "restack", "--repo", str(squashed.path), "--pr", "2=child",
        "--old-base", "parent", "--onto", "main",
    )  # fmt: skip
    assert code == 0
    assert "restack of #2" in text and ": clean" in text
    assert (
        f"{F}: deleted by " in text and "a merge would keep it, conflicting (modify/delete)" in text
    )
    assert f"new head {new_head}" in text  # the same replay gives the same commits


def test_the_text_output_says_how_to_fetch_the_restacked_head(
    squashed: RepoBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        capsys, "restack", "--repo", str(squashed.path), "--pr", "2=child",
        "--old-base", "parent", "--onto", "main",
    )  # fmt: skip
    assert code == 0, err
    [fetch] = [line for line in out.splitlines() if line.startswith("to fetch it: ")]
    new_head = out.split("\nnew head ", 1)[1].split()[0]
    subprocess.run(shlex.split(fetch.removeprefix("to fetch it: ")), cwd=squashed.path, check=True)
    assert squashed.rev("FETCH_HEAD") == new_head


def test_restack_reports_the_childs_conflicting_commit(
    squashed: RepoBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    squashed.checkout("child")
    child_commit(squashed, "child: k says child", {K: "k\nchild\n"})
    squashed.checkout("main")
    code, out, err = run_cli(
        capsys, "restack", "--repo", str(squashed.path), "--pr", "2=child",
        "--old-base", "parent", "--onto", "main", "--json",
    )  # fmt: skip
    assert code == 1, err
    result = json.loads(out)
    assert result["status"] == "conflict" and result["new_head"] is None and result["ref"] is None
    assert [c["outcome"] for c in result["commits"]] == ["clean", "clean", "conflict"]
    assert result["commits"][2]["conflicts"] == [{"path": K, "type": "contents"}]
    code, text, _ = run_cli(
        capsys, "restack", "--repo", str(squashed.path), "--pr", "2=child",
        "--old-base", "parent", "--onto", "main",
    )  # fmt: skip
    assert code == 1
    assert "child: k says child  conflict" in text and f"conflicts: {K} (contents)" in text
    assert "nothing written" in text


def test_restack_with_the_wrong_old_base_drops_the_ghost(
    squashed: RepoBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the old main as the old base the parent's commit is replayed too: its change is
    already on main (the squash), so it is left out instead of conflicting."""
    code, out, err = run_cli(
        capsys, "restack", "--repo", str(squashed.path), "--pr", "2=child",
        "--old-base", squashed.rev("main~2"), "--onto", "main", "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert [c["outcome"] for c in result["commits"]] == ["already in base", "clean", "clean"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--pr", "2=nope", "--old-base", "parent", "--onto", "main"], "nope"),
        (["--pr", "2=child", "--old-base", "parent"], "--onto"),
        (["--pr", "two=child", "--old-base", "parent", "--onto", "main"], "--pr must be N=REF"),
    ],
)
def test_restack_bad_input_exits_2_with_one_line(
    squashed: RepoBuilder, argv: list[str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stackbot", "restack", "--repo", str(squashed.path), *argv],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert message in last and last.startswith(("stackbot restack:", "usage:", "stackbot: error"))
