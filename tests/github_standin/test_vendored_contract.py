"""The repository's copy of GitHub's contract files (tests/data/github) is what the vendoring
script makes from the originals: compared file by file where ``../shared/github`` is present,
and, in every checkout, for provenance (cut from the very file SOURCE.json describes) and
completeness (every operation the stand-in serves and the tests use, every reference
resolvable, the GraphQL merge queue)."""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from graphql import assert_valid_schema, build_schema

from tests.github_standin import test_rest_contract
from tests.support import github_contract, vendor_github

CHECKOUT = Path(__file__).resolve().parents[2]
SHARED = CHECKOUT.parent / "shared" / "github"


def test_the_vendored_copy_is_from_the_recorded_source_and_resolves() -> None:
    root = vendor_github.VENDORED
    document = _vendored()
    source = json.loads((root / "rest-api" / "SOURCE.json").read_text())
    assert document["info"]["x-stackbot-source-sha256"] == source["sha256"]
    for ref in vendor_github._refs(document) + list(vendor_github.EXTRA_COMPONENTS):
        _, _, section, name = ref.split("/", 3)
        assert name in document["components"][section], f"{ref} does not resolve"
    assert (root / "examples" / "pull_request" / "opened.json").is_file()
    assert (root / "examples" / "merge_group" / "checks_requested.json").is_file()
    assert (root / "webhook-schemas" / "pull_request" / "synchronize.schema.json").is_file()
    assert set(vendor_github.LANDING_WEBHOOKS) <= set(document["x-webhooks"])


def test_the_vendored_copy_holds_every_operation_the_tests_use() -> None:
    """Checked on the copy itself, whichever contract files this run validates against: what
    the stand-in serves (its route table), the contract tests' scenarios, stackbot's needed
    operations and the landing work's."""
    document = _vendored()
    served = github_contract.operation_ids_at(document, github_contract.standin_routes())
    assert [route for route, op in served.items() if op is None] == [], (
        "run: python -m tests.support.vendor_github"
    )
    described = {
        spec["operationId"]
        for item in document["paths"].values()
        for spec in item.values()
        if isinstance(spec, dict)
    }
    needed = json.loads(
        (vendor_github.VENDORED / "rest-api" / "needed-operations.json").read_text()
    )
    octokit = {
        e["operationId"]: e.get("octokit_operationId", e["operationId"])
        for e in needed["operations"]
    }
    used = {*test_rest_contract.SCENARIOS, *test_rest_contract.ERROR_SCENARIOS}
    used |= {*octokit, *vendor_github.LANDING_OPERATIONS}
    assert {octokit.get(name, name) for name in used} - described == set(), (
        "run: python -m tests.support.vendor_github"
    )


def test_the_vendored_graphql_schema_holds_the_merge_queue() -> None:
    text = (vendor_github.VENDORED / "graphql" / "schema.graphql").read_text()
    schema = build_schema(text)
    assert_valid_schema(schema)
    mutation = schema.mutation_type
    assert mutation is not None
    assert {"enqueuePullRequest", "dequeuePullRequest"} <= set(mutation.fields)
    assert "MergeQueueEntry" in schema.type_map


def test_the_vendored_copy_matches_the_originals_when_they_are_here(tmp_path: Path) -> None:
    if not (SHARED / "rest-api" / "api.github.com.json").is_file():
        # A clone elsewhere: the test above checked the copy's provenance and completeness.
        assert vendor_github.VENDORED.is_dir()
        return
    vendor_github.build(SHARED, tmp_path / "github")
    comparison = filecmp.dircmp(tmp_path / "github", vendor_github.VENDORED)
    assert _differences(comparison) == [], "run: python -m tests.support.vendor_github"


# The tests whose outcome depends on the cut parts of the copy (the REST description and the
# GraphQL schema); examples/ and webhook-schemas/ are copied whole, compared file by file above.
ON_THE_COPY = (
    "tests/github_standin/test_rest_contract.py",
    "tests/github_standin/test_landing_contract.py",
)


def test_the_contract_tests_pass_against_the_vendored_copy_alone() -> None:
    """What a fresh clone with no ../shared beside it runs: the contract tests validating
    against tests/data/github only (a copy missing an operation the stand-in serves failed
    there while passing here, issue 30)."""
    if github_contract.github_dir().resolve() == vendor_github.VENDORED:
        pytest.skip("this run validates against the vendored copy already")
    env = {**os.environ, "STACKBOT_TEST_GITHUB_DIR": str(vendor_github.VENDORED)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CHECKOUT), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *ON_THE_COPY],
        cwd=CHECKOUT,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout.splitlines()[-1], done.stdout[-2000:]


def _vendored() -> dict[str, Any]:
    text = (vendor_github.VENDORED / "rest-api" / "api.github.com.json").read_text()
    document: dict[str, Any] = json.loads(text)
    return document


def _differences(comparison: filecmp.dircmp[Any]) -> list[str]:
    found = [*comparison.left_only, *comparison.right_only, *comparison.diff_files]
    for sub in comparison.subdirs.values():
        found.extend(_differences(sub))
    return found
