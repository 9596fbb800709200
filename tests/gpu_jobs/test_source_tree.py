"""``python -m gpu_jobs run`` from a source tree that is not installed (issue 29 point 6): the
ranks import the runner's own pytest plugin, and a node check that fails says why in its cause.

The runner runs under a virtual environment that sees the machine's site-packages (torch,
pytest) as a plain path, so their ``.pth`` files, the editable install of stackbot among them,
are not processed: only the copy of ``gpu_jobs`` in the working directory can be imported, as
on a GPU node where the repository is checked out and not installed. Real torchrun, CPU, gloo.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import gpu_jobs
from tests.gpu_jobs.throwaway import result_of


@pytest.fixture
def node(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(a python without gpu_jobs installed, a source tree holding gpu_jobs, a tree to test)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = list(venv.glob("lib/python*/site-packages"))
    (site / "machine.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    source = tmp_path / "clone"
    shutil.copytree(
        Path(gpu_jobs.__file__).parent,
        source / "gpu_jobs",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    python = venv / "bin" / "python"
    probe = subprocess.run(
        [str(python), "-c", "import gpu_jobs"],
        cwd=tree, env=without_python_path(), capture_output=True, check=False,
    )  # fmt: skip
    assert probe.returncode != 0, "gpu_jobs must not be importable outside the source tree"
    return python, source, tree


def without_python_path() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def run_from_source(
    python: Path, source: Path, tree: Path, out: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "gpu_jobs", "run", "--out", str(out), "--checkout", str(tree),
         "--target", "test_ok.py", "--shape", "1x1", "--device", "cpu", "--timeout", "240",
         *extra],
        cwd=source, env=without_python_path(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_the_ranks_import_the_runner_s_plugin_from_a_source_tree(
    node: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    python, source, tree = node
    done = run_from_source(python, source, tree, tmp_path / "out")
    result = result_of(tmp_path / "out")
    assert (done.returncode, result.status) == (0, "passed"), (result.message, done.stderr)
    assert result.counts.passed == 1


def test_a_failed_node_check_names_the_rank_s_error(
    node: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    python, source, tree = node
    out = tmp_path / "out"
    done = run_from_source(python, source, tree, out, "--env", "PYTEST_ADDOPTS=-p no_such_plugin")
    result = result_of(out)
    assert done.returncode == 1 and result.status == "infra", result.message
    assert "node check" in result.message and "no_such_plugin" in result.message
    assert result.cause.startswith("rank 0:") and "no_such_plugin" in result.cause, result.cause
