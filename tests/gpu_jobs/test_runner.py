"""``python -m gpu_jobs run`` with real torchrun (gloo, CPU) on throwaway suites."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from gpu_jobs import checkout
from gpu_jobs.spec import JobSpec, Shape
from tests.gpu_jobs.throwaway import (
    marked_env,
    processes_with,
    result_of,
    run_cli,
    spec_file,
    write_suites,
)

CPU = {"device": "cpu"}


def test_bad_input_exits_2_naming_the_field(tmp_path: Path) -> None:
    out = str(tmp_path / "o")
    cases = [
        (["--out", out, "--checkout", ".", "--target", "t.py", "--shape", "2y4"], "shape"),
        (
            ["--out", out, "--reference", "--test-set", "amax-groups", "--shape", "1x4"],
            "amax-groups",
        ),
        (["--out", out, "--checkout", ".", "--shape", "1x4"], "targets"),
        (
            [str(spec_file(tmp_path / "s.json", job_id="j", targets=["t.py"])), "--out", out],
            "repo_url",
        ),
        (
            [
                str(
                    spec_file(
                        tmp_path / "c.json",
                        job_id="j",
                        targets=["t.py"],
                        checkout=".",
                        timeout_s=-1,
                    )
                ),
                "--out",
                out,
            ],
            "timeout_s",
        ),
        ([str(tmp_path / "absent.json"), "--out", out], "spec"),
    ]
    for args, named in cases:
        done = run_cli("run", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert named in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.torchrun
def test_failing_test_makes_the_job_failed_with_every_rank_reporting(tmp_path: Path) -> None:
    suites = write_suites(tmp_path / "tree")
    out = tmp_path / "out"
    done = run_cli(
        "run",
        "--checkout",
        str(suites),
        "--target",
        "test_failing.py",
        "--target",
        "gone.py",
        "--shape",
        "1x4",
        "--device",
        "cpu",
        "--no-node-check",
        "--out",
        str(out),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ranks started" in done.stdout and "result: failed" in done.stdout  # progress shown
    result = result_of(out)
    assert result.status == "failed"
    assert result.failed_ranks == (1,) and result.crashed_ranks == ()
    assert (result.counts.passed, result.counts.failed) == (1, 1)
    failing = next(t for t in result.tests if t.outcome == "failed")
    assert failing.nodeid == "test_failing.py::test_rank_one_fails"
    assert failing.ranks == {0: "passed", 1: "failed", 2: "passed", 3: "passed"}
    assert "rank 1 fails on purpose" in failing.message
    assert result.missing_targets == ("gone.py",)
    for rank in range(4):
        assert (out / result.logs[f"junit-rank{rank}"]).is_file()
    assert (out / result.logs["runner-node0"]).read_text().count("result: failed") == 1


@pytest.mark.torchrun
def test_a_crashed_rank_makes_the_job_an_error_naming_it(tmp_path: Path) -> None:
    suites = write_suites(tmp_path / "tree")
    spec = spec_file(
        tmp_path / "spec.json",
        job_id="crash",
        targets=["test_crash.py"],
        checkout=str(suites),
        node_check=False,
        launcher=CPU,
    )
    done = run_cli("run", str(spec), "--out", str(tmp_path / "out"))
    result = result_of(tmp_path / "out")
    assert done.returncode == 1
    assert result.status == "error", result.message
    assert result.crashed_ranks == (2,)
    assert "rank 2 crashed (exit code 3)" in result.message


@pytest.mark.torchrun
def test_a_rank_lost_mid_test_makes_the_job_infra_and_counts_nothing(tmp_path: Path) -> None:
    """Issue 13: a rank killed from outside (SIGKILL, as the OOM killer or a failing node does)
    after tests already ran is infra; what the other ranks reported is not a test result."""
    suites = write_suites(tmp_path / "tree")
    spec = spec_file(
        tmp_path / "spec.json",
        job_id="lost",
        targets=["test_lost.py"],
        checkout=str(suites),
        node_check=False,
        launcher=CPU,
    )
    done = run_cli("run", str(spec), "--out", str(tmp_path / "out"))
    result = result_of(tmp_path / "out")
    assert done.returncode == 1
    assert (result.status, result.error_of) == ("infra", "node"), result.message
    assert "rank 2 was lost (killed by SIGKILL) after 1 test result" in result.message
    assert "ranks 0-1, 3 were stopped by torchrun after that" in result.message
    assert "are counted" in result.message and "none of the" in result.message
    # Tests had run on every rank (test_before), yet none of them counts.
    progress = (tmp_path / "out" / "tests" / "progress" / "rank-0.jsonl").read_text()
    assert "test_lost.py::test_before" in progress
    assert result.tests == () and result.counts.total == 0 and result.failed_ranks == ()


@pytest.mark.torchrun
def test_a_rank_crashing_on_its_own_signal_is_the_trees_error_not_infra(tmp_path: Path) -> None:
    """SIGSEGV is what a crashing interpreter raises on itself: the tree's code, not the node."""
    suites = write_suites(tmp_path / "tree")
    spec = spec_file(
        tmp_path / "spec.json",
        job_id="segfault",
        targets=["test_segfault.py"],
        checkout=str(suites),
        node_check=False,
        launcher=CPU,
    )
    run_cli("run", str(spec), "--out", str(tmp_path / "out"))
    result = result_of(tmp_path / "out")
    assert (result.status, result.error_of) == ("error", "tree"), result.message
    assert result.crashed_ranks == (2,)
    assert "Segmentation fault" in result.message and "exit code -11" in result.message


@pytest.mark.torchrun
def test_a_hang_times_out_and_leaves_no_process_behind(tmp_path: Path) -> None:
    suites = write_suites(tmp_path / "tree")
    env = marked_env()
    spec = spec_file(
        tmp_path / "spec.json",
        job_id="hang",
        targets=["test_hang_all.py"],
        checkout=str(suites),
        node_check=False,
        launcher=CPU,
        timeout_s=8,
        env=env,
    )
    done = run_cli("run", str(spec), "--out", str(tmp_path / "out"))
    result = result_of(tmp_path / "out")
    assert done.returncode == 1
    assert result.status == "timeout", result.message
    assert result.hung_ranks == (0, 1, 2, 3)
    assert processes_with(env) == []


@pytest.mark.torchrun
def test_one_hung_rank_is_killed_and_named(tmp_path: Path) -> None:
    suites = write_suites(tmp_path / "tree")
    env = marked_env()
    spec = spec_file(
        tmp_path / "spec.json",
        job_id="hang-one",
        targets=["test_hang_one.py"],
        checkout=str(suites),
        node_check=False,
        timeout_s=120,
        env=env,
        launcher={"device": "cpu", "hang_grace_s": 8},
    )
    run_cli("run", str(spec), "--out", str(tmp_path / "out"))
    result = result_of(tmp_path / "out")
    assert result.status == "error", result.message
    assert result.hung_ranks == (1,) and "hung" in result.message
    assert processes_with(env) == []


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


@pytest.mark.torchrun
def test_a_commit_is_fetched_into_the_cache_and_a_missing_one_is_an_error(tmp_path: Path) -> None:
    repo = write_suites(tmp_path / "repo")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "suites")
    sha = _git(repo, "rev-parse", "HEAD").strip()
    cache = tmp_path / "cache"
    common = {"job_id": "fetch", "repo_url": str(repo), "node_check": False, "launcher": CPU}
    good = spec_file(tmp_path / "good.json", commit=sha, targets=["test_passing.py"], **common)
    done = run_cli("run", str(good), "--out", str(tmp_path / "out1"), "--cache-dir", str(cache))
    result = result_of(tmp_path / "out1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (result.status, result.commit, result.counts.passed) == ("passed", sha, 2)
    assert (cache / "trees" / sha / "test_passing.py").is_file()

    missing = spec_file(
        tmp_path / "bad.json", commit="0" * 40, targets=["test_passing.py"], **common
    )
    done = run_cli("run", str(missing), "--out", str(tmp_path / "out2"), "--cache-dir", str(cache))
    result = result_of(tmp_path / "out2")
    assert done.returncode == 1
    assert result.status == "error"
    assert result.message.startswith("commit: 0000000") and "does not exist" in result.message


@pytest.mark.torchrun
def test_no_existing_target_is_an_error_before_anything_launches(tmp_path: Path) -> None:
    suites = write_suites(tmp_path / "tree")
    done = run_cli(
        "run",
        "--checkout",
        str(suites),
        "--target",
        "tests/unit_tests/test_amax_reduction_group.py",
        "--shape",
        "1x4",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "out"),
    )
    result = result_of(tmp_path / "out")
    assert done.returncode == 1
    assert result.status == "error" and "none of the targets exist" in result.message
    assert result.missing_targets == ("tests/unit_tests/test_amax_reduction_group.py",)
    # The tree's fault, and the cause names the target that is missing.
    assert result.error_of == "tree"
    assert result.cause == (
        "none of the targets exist in the tree: tests/unit_tests/test_amax_reduction_group.py"
    )


def test_merge_collects_a_job_whose_runners_died_before_reporting(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    spec_file(out / "spec.json", job_id="died", targets=["t.py"], checkout=".", shape="2x4")
    done = run_cli("merge", "--out", str(out))
    assert done.returncode == 1
    result = result_of(out)
    # Its nodes were lost: infra (issue 13), retried on another node, never a test result.
    assert (result.status, result.error_of) == ("infra", "node"), result.message
    assert "node(s) 0-1 wrote no report" in result.message
    assert run_cli("merge", "--out", str(tmp_path / "nothing")).returncode == 2


def test_a_spec_that_cannot_run_still_gets_a_result_naming_the_field(tmp_path: Path) -> None:
    dashed = spec_file(
        tmp_path / "dashed.json", job_id="dash", targets=["t.py"], repo_url="-u", commit="abc1234"
    )
    garbled = tmp_path / "garbled.json"
    garbled.write_bytes(b'{"job_id": "\xff\xfe"}')
    for spec, named, job_id in [(dashed, "repo_url", "dash"), (garbled, "UTF-8", "invalid-spec")]:
        out = tmp_path / f"out-{spec.stem}"
        done = run_cli("run", str(spec), "--out", str(out))
        assert done.returncode == 2, done.stderr
        assert named in done.stderr and "Traceback" not in done.stderr, done.stderr
        result = result_of(out)
        assert (result.job_id, result.status) == (job_id, "error")
        assert named in result.message


def test_a_half_made_cache_mirror_is_made_again_not_used(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_x.py").write_text("def test_x():\n    pass\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "x")
    sha = _git(repo, "rev-parse", "HEAD").strip()
    cache = tmp_path / "cache"
    key = hashlib.sha256(str(repo).encode()).hexdigest()[:16]
    # What a runner killed between `git init` and `git remote add` leaves behind.
    half = cache / "repos" / f"{key}.git"
    half.mkdir(parents=True)
    _git(half, "init", "-q", "--bare")
    spec = JobSpec(
        job_id="cache", test_set="t", targets=("test_x.py",), shape=Shape(1, 1),
        repo_url=str(repo), commit=sha,
    )  # fmt: skip
    tree = checkout.prepare_tree(spec, cache, lambda line: None)
    assert (tree.commit, (tree.root / "test_x.py").is_file()) == (sha, True)
    assert _git(half, "config", "--get", "remote.origin.url").strip() == str(repo)


def test_a_timeout_before_any_test_ran_is_infra(tmp_path: Path) -> None:
    """Out of time in the node's setup: no test ran, so the node is at fault (issue 13: infra is
    retried on another node and never counted as a test result)."""
    suites = write_suites(tmp_path / "tree")
    spec = spec_file(
        tmp_path / "spec.json",
        job_id="slow-setup",
        targets=["test_passing.py"],
        checkout=str(suites),
        node_check=False,
        launcher=CPU,
        setup_commands=["sleep 60"],
        timeout_s=3,
    )
    run_cli("run", str(spec), "--out", str(tmp_path / "out"))
    result = result_of(tmp_path / "out")
    assert result.status == "infra", result.message
    assert "no test ran" in result.message
