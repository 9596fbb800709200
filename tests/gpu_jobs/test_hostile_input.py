"""Hostile input to ``python -m gpu_jobs run`` and ``stackbot integrate`` (issue 29 point 5):
every bad spec ends in a ``result.json`` saying what is wrong and exit 2, never a traceback; the
command line is checked as the spec is; a job always has a deadline; PR numbers stay in range."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gpu_jobs.throwaway import result_of, run_cli, spec_file


def test_a_deeply_nested_spec_gets_a_result_and_exit_2(tmp_path: Path) -> None:
    spec = tmp_path / "deep.json"
    spec.write_text("[" * 100_000 + "]" * 100_000)
    out = tmp_path / "out"
    done = run_cli("run", str(spec), "--out", str(out))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr, done.stderr
    result = result_of(out)
    assert (result.job_id, result.status) == ("invalid-spec", "error")
    assert "nests arrays or objects too deeply" in result.message


@pytest.mark.parametrize("timeout", ["Infinity", "-Infinity", "NaN", "-5"])
def test_a_spec_without_a_real_deadline_is_refused(tmp_path: Path, timeout: str) -> None:
    spec = spec_file(tmp_path / "s.json", job_id="j", targets=["t.py"], checkout=".")
    spec.write_text(spec.read_text().replace("}", f', "timeout_s": {timeout}}}'))
    out = tmp_path / "out"
    done = run_cli("run", str(spec), "--out", str(out))
    assert done.returncode == 2, done.stderr
    assert "timeout_s" in done.stderr and "Traceback" not in done.stderr, done.stderr
    result = result_of(out)
    assert result.status == "error" and "timeout_s" in result.message


def test_the_command_line_master_port_is_checked_like_the_spec_one(tmp_path: Path) -> None:
    spec = spec_file(tmp_path / "s.json", job_id="j", targets=["t.py"], checkout=".")
    out = tmp_path / "out"
    done = run_cli("run", str(spec), "--out", str(out), "--master-port", "99999")
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert "--master-port" in line and "99999" in line and "TCP port" in line
    assert "master_port" in result_of(out).message or "master-port" in result_of(out).message
    adhoc = run_cli(
        "run", "--out", str(tmp_path / "o2"), "--reference", "--target", "t.py",
        "--shape", "1x1", "--master-port", "0",
    )  # fmt: skip
    assert adhoc.returncode == 2 and "--master-port" in adhoc.stderr, adhoc.stderr
    timeless = run_cli(
        "run", "--out", str(tmp_path / "o3"), "--reference", "--target", "t.py",
        "--shape", "1x1", "--timeout", "inf",
    )  # fmt: skip
    assert timeless.returncode == 2 and "--timeout" in timeless.stderr, timeless.stderr


@pytest.mark.parametrize(
    "pr", ["9223372036854775808=x", "2147483648=x", "0=x", "-1=x", "#²=x", "1=x"]
)
def test_integrate_refuses_a_pr_number_outside_github_s_range(tmp_path: Path, pr: str) -> None:
    repo = tmp_path / "nowhere"
    done = subprocess.run(
        [sys.executable, "-m", "stackbot", "integrate", "--repo", str(repo), "--base", "main",
         f"--pr={pr}"],
        capture_output=True, text=True, check=False,
        env={**os.environ, "STACKBOT_DATA_DIR": str(tmp_path / "data")},
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    if pr == "1=x":  # in range: refused later, for the repository that is not there
        assert "--pr must be" not in done.stderr
        return
    [line] = [line for line in done.stderr.splitlines() if "error:" in line]
    assert "--pr must be N=REF with N a PR number (1 .. 2147483647)" in line
