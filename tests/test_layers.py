"""The floors of the code are a checked contract (pyproject's ``[tool.importlinter]``):
``lint-imports`` fails when a floor imports one above it, e.g. the domain, the database or the
task framework importing a service. Imports inside functions and under ``TYPE_CHECKING`` count.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over the packages under ``root``, with the repository's contracts."""
    return subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_floors_hold() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "upward"),
    [
        ("stackbot/domain/series.py", "from stackbot.db import github_store"),
        ("stackbot/db/github_store.py", "from stackbot.taskqueue import queue"),
        ("stackbot/taskqueue/registry.py", "from stackbot.services import resources"),
        ("stackbot/services/sync.py", "from stackbot.worker import handlers"),
        ("gpu_jobs/spec.py", "from stackbot.domain import types"),
    ],
)
def test_an_upward_import_breaks_the_contract(tmp_path: Path, module: str, upward: str) -> None:
    """The check can fail: a copy of the code with one upward import (inside a function, as a
    lazy import would be) is refused, naming the importer and the imported floor."""
    for name in ("stackbot", "gpu_jobs"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n\ndef _upward() -> None:\n    {upward}  # noqa\n")
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 broken" in result.stdout, result.stdout
    importer = module.removesuffix(".py").replace("/", ".")
    assert importer in result.stdout, result.stdout
