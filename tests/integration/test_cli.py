"""``stackbot integrate`` and ``stackbot allowlist`` on real repositories."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stackbot.adapters.git import GitRepository
from stackbot.cli.main import main
from stackbot.config import load_settings
from stackbot.services.scan_cache import SharedScanCache
from stackbot.services.tree_allowlist import ScanTools, TreeAllowlist
from tests.integration.megatron import ALLOWLIST, CP, DP, PP, TP, allowlist, entry, module
from tests.integration.repo_builder import RepoBuilder

A, B = "megatron/core/a.py", "megatron/core/b.py"
GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture
def repo(builder: RepoBuilder) -> RepoBuilder:
    builder.commit(
        "base",
        {
            A: module({"f1": [TP, TP], "f2": [DP]}),
            B: module({"g": [PP]}),
            "notes.txt": "1\n2\n3\n",
            ALLOWLIST: allowlist(
                {A: [entry("f1", TP), entry("f1", TP), entry("f2", DP)], B: [entry("g", PP)]}
            ),
        },
    )
    builder.pr_branch(
        "add-f3",
        {
            A: module({"f1": [TP, TP], "f2": [DP], "f3": [CP]}),
            ALLOWLIST: allowlist(
                {A: [entry("f1", TP)] * 2 + [entry("f2", DP), entry("f3", CP)], B: [entry("g", PP)]}
            ),
        },
    )
    builder.pr_branch(
        "drop-g",
        {
            B: module({"g": []}),
            ALLOWLIST: allowlist({A: [entry("f1", TP)] * 2 + [entry("f2", DP)]}),
        },
    )
    builder.pr_branch("notes-one", {"notes.txt": "1\nONE\n3\n"})
    builder.pr_branch("notes-two", {"notes.txt": "1\nTWO\n3\n"})
    builder.branch("on-two", "notes-two")
    builder.commit("on two", {"more.txt": "m\n"})
    builder.checkout("main")
    return builder


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_integrate_resolves_the_allowlist_and_exits_0(
    repo: RepoBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        capsys,
        "integrate",
        "--repo",
        str(repo.path),
        "--base",
        "main",
        "--pr",
        "11=add-f3",
        "--pr",
        "#12=drop-g",
    )
    assert code == 0, err
    assert "stack run main (refs/stackbot/stack/main/head): resolved" in out
    assert (
        "#12" in out
        and "resolution: tools/process_group_usage_allowlist.json conflicted with #11" in out
    )
    assert f"allowlist {ALLOWLIST} (scope): total 4, +0 from the base's 4; ok" in out
    assert "[2/2] #12" in err and "fetching" in err
    code, out, _ = run_cli(
        capsys,
        "integrate",
        "--repo",
        str(repo.path),
        "--base",
        "main",
        "--pr",
        "11=add-f3",
        "--pr",
        "12=drop-g",
        "--json",
    )
    document = json.loads(out)
    assert code == 0 and document["status"] == "resolved"
    assert [s["outcome"] for s in document["steps"]] == ["clean", "resolved"]
    assert document["allowlist"]["total"] == 4 and document["allowlist"]["delta"] == 0


def test_integrate_series_with_dependents_exits_1(
    repo: RepoBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(
        capsys,
        "integrate", "--repo", str(repo.path), "--base", "main", "--series",
        "--pr", "1=notes-one", "--pr", "2=notes-two", "--pr", "3=on-two", "--pr", "4=add-f3",
        "--depends", "3=2", "--json",
    )  # fmt: skip
    assert code == 1
    document = json.loads(out)
    assert [s["outcome"] for s in document["steps"]] == ["clean", "conflict", "skipped", "clean"]
    assert document["steps"][1]["conflicts_with"] == [1]
    assert document["steps"][2]["skipped_reason"] == "depends on #2, which conflicts"
    assert document["merged"] == [1, 4]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--pr", "1=no-such-branch"], "no-such-branch"),
        (["--pr", "1=add-f3", "--series", "--depends", "1=9"], "#9, which no --pr gives"),
        (["--pr", "1=add-f3", "--depends", "1=1"], "only means something with --series"),
        ([], "at least one --pr"),
    ],
)
def test_integrate_bad_input_exits_2(
    repo: RepoBuilder, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run_cli(capsys, "integrate", "--repo", str(repo.path), "--base", "main", *argv)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_integrate_on_a_path_that_is_not_a_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "plain").mkdir()
    code, _, err = run_cli(
        capsys, "integrate", "--repo", str(tmp_path / "plain"), "--base", "main", "--pr", "1=x"
    )
    assert code == 2 and "is not a git repository" in err


def test_integrate_pushes_with_a_lease(
    repo: RepoBuilder,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    argv = ["integrate", "--repo", str(repo.path), "--base", "main", "--pr", "11=add-f3", "--push"]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and "STACKBOT_PUSH_REMOTE" in err
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    monkeypatch.setenv("STACKBOT_PUSH_REMOTE", str(remote))
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert f"pushed to {remote} stackbot/main" in out
    code, _, err = run_cli(capsys, *argv[:-1], "--pr", "12=drop-g", "--push")
    assert code == 0, err
    # Someone else pushes to the branch; the next run must not overwrite it.
    repo.checkout("notes-one")
    subprocess.run(
        [
            "git",
            "-C",
            str(repo.path),
            "push",
            "--quiet",
            "--force",
            str(remote),
            "HEAD:stackbot/main",
        ],
        check=True,
    )
    code, _, err = run_cli(capsys, *argv)
    assert code == 1
    assert "not pushed" in err and "someone else pushed" in err
    remote_head = subprocess.run(
        ["git", "-C", str(remote), "rev-parse", "stackbot/main"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert remote_head == repo.rev("notes-one")


def test_allowlist_regen_prints_the_checker_file(
    repo: RepoBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.checkout("drop-g")
    # A hand merge left the total wrong and g's entry behind.
    repo.commit(
        "stale",
        {
            ALLOWLIST: allowlist(
                {A: [entry("f1", TP)] * 2 + [entry("f2", DP)], B: [entry("g", PP)]}, total=9
            )
        },
    )
    code, out, err = run_cli(
        capsys, "allowlist", "regen", "--repo", str(repo.path), "--rev", "HEAD"
    )
    assert code == 0, err
    assert out == allowlist({A: [entry("f1", TP)] * 2 + [entry("f2", DP)]})
    assert f"stale entry dropped: {B}: g:accessor:parallel_state.{PP}" in err

    code, out, err = run_cli(
        capsys, "allowlist", "check", "--repo", str(repo.path), "--rev", "HEAD"
    )
    assert code == 1
    assert "total 9 does not match its 4 entries" in out
    assert f"stale entry: {B}: g:accessor:parallel_state.{PP}" in out
    code, out, _ = run_cli(
        capsys, "allowlist", "check", "--repo", str(repo.path), "--rev", "HEAD", "--json"
    )
    document = json.loads(out)
    assert document["ok"] is False and document["total_mismatch"] is True
    assert document["stale"] == [
        {
            "file": B,
            "key": "g",
            "kind": "accessor",
            "detail": f"parallel_state.{PP}",
            "count": 1,
            "lines": [],
        }
    ]
    code, out, _ = run_cli(capsys, "allowlist", "check", "--repo", str(repo.path), "--rev", "main")
    assert code == 0 and "(scope): ok; total 4, 4 entries" in out


def test_allowlist_check_reports_new_reads_by_scope(
    repo: RepoBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.checkout("main")
    repo.commit("unlisted read", {B: module({"g": [PP], "h": [TP]})})
    code, out, _ = run_cli(capsys, "allowlist", "check", "--repo", str(repo.path), "--rev", "HEAD")
    assert code == 1
    assert f"new read: {B}: h:accessor:parallel_state.{TP} (line 7)" in out
    code, out, err = run_cli(
        capsys, "allowlist", "regen", "--repo", str(repo.path), "--rev", "HEAD"
    )
    assert code == 1  # the new read is not added: it needs a human
    assert "h:accessor" not in out and "needs a human" in err


def test_allowlist_format_applies_only_when_the_file_does_not_tell(
    builder: RepoBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    builder.commit("base", {A: module({"f": [TP]}), ALLOWLIST: allowlist({})})
    code, out, _ = run_cli(
        capsys,
        "allowlist",
        "regen",
        "--repo",
        str(builder.path),
        "--rev",
        "main",
        "--format",
        "line",
    )
    assert code == 1  # every read is new: nobody listed it
    assert f'"{A}": [\n      "4:accessor:parallel_state.{TP}"' in out
    builder.commit("listed", {ALLOWLIST: allowlist({A: [entry("f", TP)]})})
    code, out, _ = run_cli(
        capsys,
        "allowlist",
        "regen",
        "--repo",
        str(builder.path),
        "--rev",
        "main",
        "--format",
        "line",
    )
    assert code == 0 and "f:accessor" in out  # the file's scope KEYs win over --format


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rev", "nope"], "nope"),
        (["--rev", "main~5"], "main~5"),
    ],
)
def test_allowlist_bad_input_exits_2(
    repo: RepoBuilder, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run_cli(capsys, "allowlist", "check", "--repo", str(repo.path), *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_allowlist_without_a_file_or_a_repository(
    builder: RepoBuilder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    builder.commit("no allowlist", {"x.txt": "x\n"})
    code, _, err = run_cli(
        capsys, "allowlist", "check", "--repo", str(builder.path), "--rev", "main"
    )
    assert code == 2 and f"has no {ALLOWLIST}" in err
    code, _, err = run_cli(
        capsys, "allowlist", "check", "--repo", str(tmp_path / "nowhere"), "--rev", "main"
    )
    assert code == 2 and "no such directory" in err


def test_console_script_exit_codes(repo: RepoBuilder, tmp_path: Path) -> None:
    env_cmd = [
        sys.executable,
        "-m",
        "stackbot",
        "integrate",
        "--repo",
        str(repo.path),
        "--base",
        "main",
    ]
    done = subprocess.run(
        [*env_cmd, "--pr", "1=add-f3", "--pr", "2=nope"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "nope" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run(
        [*env_cmd, "--pr", "one=add-f3"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and "--pr must be N=REF" in done.stderr


def test_scan_outcomes_are_kept_between_runs(
    repo: RepoBuilder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = run_cli(capsys, "allowlist", "check", "--repo", str(repo.path), "--rev", "main")
    assert code == 0
    stored = tmp_path / "data" / "scan-cache.sqlite3"
    # The next run (another process would do the same) finds a.py and b.py, the scanned files
    # of main, in the data directory's store and parses nothing.
    cache = SharedScanCache(stored)
    tree = GitRepository.open(repo.path)
    scan = TreeAllowlist(
        tree, cache=cache, scanner=ScanTools.from_settings(load_settings()).scanner
    )
    scan.check_tree(tree.tree_of(tree.rev_parse("main")))
    assert (cache.hits, cache.misses) == (2, 0)
    cache.close()
    tree.close()
    # A broken store only costs speed.
    stored.write_bytes(b"not a database")
    broken = SharedScanCache(stored)
    assert broken.get_many(["k"]) == {}
    code, _, _ = run_cli(capsys, "allowlist", "check", "--repo", str(repo.path), "--rev", "main")
    assert code == 0


def test_integrate_accepts_a_url(
    repo: RepoBuilder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = repo.path.resolve().as_uri()  # file:///...: fetched like any remote
    code, out, err = run_cli(
        capsys, "integrate", "--repo", url, "--base", "main", "--pr", "11=add-f3", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["steps"][0]["outcome"] == "clean"
    assert f"fetching {url}" in err
    assert any((tmp_path / "data" / "mirrors").glob("work-*.git"))


def _console(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "stackbot", *argv],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _error_line(stderr: str, command: str) -> str:
    """The one line the command wrote about the error (progress lines aside)."""
    assert "Traceback" not in stderr, stderr
    [line] = [line for line in stderr.splitlines() if line.startswith(f"stackbot {command}:")]
    return line


def test_integrate_an_unreachable_repository_exits_2_not_1(tmp_path: Path) -> None:
    done = _console(
        "integrate", "--repo", "https://127.0.0.1:9/nowhere.git", "--base", "main", "--pr", "1=x"
    )
    assert done.returncode == 2, done.stderr
    assert "check the URL and network access" in _error_line(done.stderr, "integrate")


def test_integrate_with_an_unwritable_data_dir_exits_2(repo: RepoBuilder, tmp_path: Path) -> None:
    # Tests run as root, where chmod stops no write: a directory under a regular file does.
    (tmp_path / "a-file").write_text("x")
    data_dir = tmp_path / "a-file" / "data"
    done = _console(
        "integrate",
        "--repo",
        str(repo.path),
        "--base",
        "main",
        "--pr",
        "1=add-f3",
        env={"STACKBOT_DATA_DIR": str(data_dir)},
    )
    assert done.returncode == 2, done.stderr
    line = _error_line(done.stderr, "integrate")
    assert str(data_dir) in line and "STACKBOT_DATA_DIR" in line
