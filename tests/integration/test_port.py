"""``stackbot port`` on real repositories: a port that applies verbatim, one with adaptations
(a file the branch renamed, lines the branch already has, a file it already has, the allowlist
regenerated), one with a conflict, and the trailers read back by ``git interpret-trailers``."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from stackbot.cli.main import main
from tests.integration.megatron import ALLOWLIST, CP, DP, PP, TP, allowlist, entry, module
from tests.integration.repo_builder import RepoBuilder

A, B = "megatron/core/a.py", "megatron/core/b.py"
README, NOTES, OLD, NEW, EXTRA = "README.md", "notes.txt", "docs/old.md", "docs/new.md", "extra.txt"


def numbered(prefix: str, count: int, **changes: str) -> str:
    lines = [f"{prefix} line {i}" for i in range(1, count + 1)]
    for key, text in changes.items():
        lines[int(key.removeprefix("l")) - 1] = text
    return "\n".join(lines) + "\n"


@pytest.fixture
def repo(builder: RepoBuilder) -> RepoBuilder:
    builder.commit(
        "base",
        {
            A: module({"f1": [TP]}),
            B: module({"g": [PP]}),
            ALLOWLIST: allowlist({A: [entry("f1", TP)], B: [entry("g", PP)]}),
            README: numbered("readme", 12),
            NOTES: numbered("note", 20),
            OLD: numbered("doc", 12),
        },
    )
    builder.branch("pr")
    builder.commit(
        "Blockwise FP8 recipe",
        {
            README: numbered("readme", 12, l1="readme: blockwise recipe"),
            A: module({"f1": [TP], "f3": [CP]}),
            ALLOWLIST: allowlist({A: [entry("f1", TP), entry("f3", CP)], B: [entry("g", PP)]}),
            NOTES: numbered("note", 20, l2="note TWO", l15="note FIFTEEN"),
            OLD: numbered("doc", 12, l6="doc: blockwise"),
            EXTRA: "extra\n",
        },
    )
    builder.checkout("main")
    builder.branch("dev")
    builder.commit(
        "dev's own changes",
        {
            README: numbered("readme", 12, l11="readme on dev"),
            B: module({"g": [PP], "g2": [DP]}),
            ALLOWLIST: allowlist({A: [entry("f1", TP)], B: [entry("g", PP), entry("g2", DP)]}),
            NOTES: numbered("note", 20, l2="note TWO"),
            EXTRA: "extra\n",
        },
    )
    builder.rename(OLD, NEW)
    builder.commit("dev moves the docs")
    builder.checkout("main")
    return builder


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def mirror_git(tmp_path: Path, *args: str, stdin: str | None = None) -> str:
    mirror = next((tmp_path / "data" / "mirrors").iterdir())
    return subprocess.run(
        ["git", *args], cwd=mirror, input=stdin, capture_output=True, text=True, check=True
    ).stdout


def test_a_port_with_adaptations_lists_every_file_and_ends_in_trailers(
    repo: RepoBuilder, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run_cli(
        capsys, "port", "--repo", str(repo.path), "--pr", "7523=pr",
        "--upstream-base", "main", "--onto", "dev", "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    outcomes = {f["path"]: (f["outcome"], f["note"]) for f in result["files"]}
    assert outcomes == {
        README: ("verbatim", None),
        A: ("verbatim", None),
        OLD: ("adapted", f"applied to {NEW} (renamed on the branch)"),
        NOTES: (
            "adapted",
            "2 of the 4 lines the PR removes or adds were already so on the branch"
            " (left as they are)",
        ),
        EXTRA: ("already present", None),
        ALLOWLIST: ("regenerated", "total 3 → 4, no stale entries, no new reads"),
    }
    commit = result["commit"]
    assert mirror_git(tmp_path, "rev-parse", "refs/stackbot/port/7523/dev").strip() == commit
    assert mirror_git(tmp_path, "rev-parse", f"{commit}^").strip() == repo.rev("dev")
    # The PR's lines, the branch's own lines, and the allowlist as the checker writes it.
    readme = mirror_git(tmp_path, "show", f"{commit}:{README}")
    assert readme == numbered("readme", 12, l1="readme: blockwise recipe", l11="readme on dev")
    assert "doc: blockwise" in mirror_git(tmp_path, "show", f"{commit}:{NEW}")
    assert json.loads(mirror_git(tmp_path, "show", f"{commit}:{ALLOWLIST}")) == json.loads(
        allowlist({A: [entry("f1", TP), entry("f3", CP)], B: [entry("g", PP), entry("g2", DP)]})
    )
    message = mirror_git(tmp_path, "log", "-1", "--format=%B", commit)
    assert message.startswith("Port #7523 to dev: Blockwise FP8 recipe\n")
    assert f"Applied verbatim (2):\n- {README}\n- {A}\n" in message
    assert f"Adapted (2):\n- {OLD}: applied to {NEW} (renamed on the branch)\n" in message
    assert f"Already on the branch (1):\n- {EXTRA}\n" in message
    assert f"Regenerated (1):\n- {ALLOWLIST}: total 3 → 4" in message
    trailers = mirror_git(tmp_path, "interpret-trailers", "--parse", stdin=message)
    assert trailers == (
        "Upstream-PR: #7523\n"
        f"Upstream-Base: {repo.rev('main')[:7]}\n"
        f"Upstream-Head: {repo.rev('pr')[:7]}\n"
    )
    author = mirror_git(tmp_path, "log", "-1", "--format=%an <%ae>|%cn", commit).strip()
    assert author == "Test Author <author@example.com>|stackbot"
    code, text, _ = run_cli(
        capsys, "port", "--repo", str(repo.path), "--pr", "7523=pr",
        "--upstream-base", "main", "--onto", "dev",
    )  # fmt: skip
    assert code == 0 and f"commit {commit} (refs/stackbot/port/7523/dev)" in text
    assert f"adapted:\n  {OLD}: applied to {NEW}" in text


def test_a_port_onto_an_unchanged_branch_is_verbatim(
    repo: RepoBuilder, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    repo.branch("same", "main")
    repo.checkout("main")
    code, out, err = run_cli(
        capsys, "port", "--repo", str(repo.path), "--pr", "7523=pr",
        "--upstream-base", "main", "--onto", "same", "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert {f["outcome"] for f in result["files"] if f["path"] != ALLOWLIST} == {"verbatim"}
    tree = mirror_git(tmp_path, "rev-parse", f"{result['commit']}^{{tree}}").strip()
    assert tree == mirror_git(tmp_path, "rev-parse", f"{repo.rev('pr')}^{{tree}}").strip()


def test_the_text_output_says_how_to_fetch_the_port(
    repo: RepoBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.branch("same", "main")
    repo.checkout("main")
    code, out, err = run_cli(
        capsys, "port", "--repo", str(repo.path), "--pr", "7523=pr",
        "--upstream-base", "main", "--onto", "same",
    )  # fmt: skip
    assert code == 0, err
    [fetch] = [line for line in out.splitlines() if line.startswith("to fetch it: ")]
    commit = out.split("\ncommit ", 1)[1].split()[0]
    # The line, run in the user's repository, brings the port's commit there.
    subprocess.run(shlex.split(fetch.removeprefix("to fetch it: ")), cwd=repo.path, check=True)
    assert repo.rev("FETCH_HEAD") == commit


def test_a_conflicting_port_writes_nothing_and_names_the_lines(
    repo: RepoBuilder, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    repo.checkout("dev")
    repo.commit("dev rewords line 1", {README: numbered("readme", 12, l1="readme: dev's own")})
    repo.checkout("main")
    code, out, err = run_cli(
        capsys, "port", "--repo", str(repo.path), "--pr", "7523=pr",
        "--upstream-base", "main", "--onto", "dev", "--json",
    )  # fmt: skip
    assert code == 1, err
    result = json.loads(out)
    assert result["status"] == "conflict" and result["commit"] is None
    assert result["conflicts"] == [
        {
            "path": README,
            "type": "contents",
            "hunks": [
                {"line": 1, "branch": ["readme: dev's own"], "pr": ["readme: blockwise recipe"]}
            ],
        }
    ]
    refs = mirror_git(tmp_path, "for-each-ref", "refs/stackbot/port/")
    assert refs == ""
    code, text, _ = run_cli(
        capsys, "port", "--repo", str(repo.path), "--pr", "7523=pr",
        "--upstream-base", "main", "--onto", "dev",
    )  # fmt: skip
    assert code == 1
    assert f"conflicts (no commit written):\n  {README} (contents)\n    at line 1:" in text
    assert "branch| readme: dev's own" in text and "PR    | readme: blockwise recipe" in text


def test_port_bad_input_exits_2(repo: RepoBuilder, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(
        capsys, "port", "--repo", str(repo.path), "--pr", "7523=pr",
        "--upstream-base", "nope", "--onto", "dev",
    )  # fmt: skip
    assert code == 2 and "nope" in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("stackbot port: ")
