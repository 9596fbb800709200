"""The repository's copy of GitHub's contract files is exactly what the vendoring script makes
from the shared originals (checked wherever the originals are present)."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest

from tests.support import vendor_github

SHARED = Path(__file__).resolve().parents[3] / "shared" / "github"


def test_the_vendored_copy_exists_and_has_every_needed_operation() -> None:
    root = vendor_github.VENDORED
    assert (root / "rest-api" / "api.github.com.json").is_file()
    assert (root / "examples" / "pull_request" / "opened.json").is_file()
    assert (root / "webhook-schemas" / "pull_request" / "synchronize.schema.json").is_file()


def test_the_vendored_copy_matches_the_shared_originals(tmp_path: Path) -> None:
    if not (SHARED / "rest-api" / "api.github.com.json").is_file():
        # A clone elsewhere has no originals to compare with: say so (a skip, not a pass).
        pytest.skip(f"GitHub's shared contract files are not beside this checkout ({SHARED})")
    vendor_github.build(SHARED, tmp_path / "github")
    comparison = filecmp.dircmp(tmp_path / "github", vendor_github.VENDORED)
    assert _differences(comparison) == [], "run: python -m tests.support.vendor_github"


def _differences(comparison: filecmp.dircmp[str]) -> list[str]:
    found = [*comparison.left_only, *comparison.right_only, *comparison.diff_files]
    for sub in comparison.subdirs.values():
        found.extend(_differences(sub))
    return found
