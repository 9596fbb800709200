"""The repository's copy of GitHub's contract files (tests/data/github) is what the vendoring
script makes from the originals: compared file by file where ``../shared/github`` is present,
and otherwise checked for provenance (cut from the very file SOURCE.json describes) and
completeness (every operation the tests use, every reference resolvable)."""

from __future__ import annotations

import filecmp
import json
from pathlib import Path
from typing import Any

from tests.support import vendor_github

SHARED = Path(__file__).resolve().parents[3] / "shared" / "github"


def test_the_vendored_copy_is_complete_and_from_the_recorded_source() -> None:
    root = vendor_github.VENDORED
    document = json.loads((root / "rest-api" / "api.github.com.json").read_text())
    source = json.loads((root / "rest-api" / "SOURCE.json").read_text())
    assert document["info"]["x-stackbot-source-sha256"] == source["sha256"]
    needed = json.loads((root / "rest-api" / "needed-operations.json").read_text())
    ids = {
        spec["operationId"]
        for item in document["paths"].values()
        for spec in item.values()
        if isinstance(spec, dict)
    }
    wanted = {e.get("octokit_operationId", e["operationId"]) for e in needed["operations"]}
    assert wanted | set(vendor_github.EXTRA_OPERATIONS) <= ids
    for ref in vendor_github._refs(document) + list(vendor_github.EXTRA_COMPONENTS):
        _, _, section, name = ref.split("/", 3)
        assert name in document["components"][section], f"{ref} does not resolve"
    assert (root / "examples" / "pull_request" / "opened.json").is_file()
    assert (root / "webhook-schemas" / "pull_request" / "synchronize.schema.json").is_file()


def test_the_vendored_copy_matches_the_originals_when_they_are_here(tmp_path: Path) -> None:
    if not (SHARED / "rest-api" / "api.github.com.json").is_file():
        # A clone elsewhere: the test above checked the copy's provenance and completeness.
        assert vendor_github.VENDORED.is_dir()
        return
    vendor_github.build(SHARED, tmp_path / "github")
    comparison = filecmp.dircmp(tmp_path / "github", vendor_github.VENDORED)
    assert _differences(comparison) == [], "run: python -m tests.support.vendor_github"


def _differences(comparison: filecmp.dircmp[Any]) -> list[str]:
    found = [*comparison.left_only, *comparison.right_only, *comparison.diff_files]
    for sub in comparison.subdirs.values():
        found.extend(_differences(sub))
    return found
