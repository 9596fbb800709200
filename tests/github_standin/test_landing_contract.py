"""What the landing work validates against is in GitHub's contract files (and so in the
vendored copy): the merge operations, the ``merge_group`` and ``pull_request_review`` webhooks
with GitHub's own example deliveries, and the GraphQL merge queue."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support import github_contract, vendor_github

MERGE_GROUP_EXAMPLES = ("checks_requested.json", "checks_requested-2.json")
REVIEW_EXAMPLES = ("submitted-1.json", "submitted-3.json", "submitted-4.json", "dismissed-2.json")

ENQUEUE = """
mutation Enqueue($pr: ID!, $head: GitObjectID) {
  enqueuePullRequest(input: {pullRequestId: $pr, expectedHeadOid: $head}) {
    mergeQueueEntry { id position state enqueuedAt headCommit { oid } pullRequest { number } }
  }
}
"""
QUEUE = """
query Queue($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) { id headRefOid mergeQueueEntry { position state } }
    mergeQueue(branch: "main") {
      configuration { mergeMethod maximumEntriesToBuild }
      entries(first: 50) { nodes { position state pullRequest { number headRefOid } } }
    }
  }
}
"""
DEQUEUE = "mutation($id: ID!) { dequeuePullRequest(input: {id: $id}) { clientMutationId } }"


@pytest.mark.parametrize("operation_id", vendor_github.LANDING_OPERATIONS)
def test_the_merge_operations_are_described(operation_id: str) -> None:
    assert github_contract.operation(operation_id).spec["responses"]


@pytest.mark.parametrize("example", MERGE_GROUP_EXAMPLES)
def test_githubs_merge_group_deliveries_match_the_webhook_schema(example: str) -> None:
    payload = _example("merge_group", example)
    github_contract.validate_webhook(f"merge-group-{payload['action'].replace('_', '-')}", payload)


@pytest.mark.parametrize("example", REVIEW_EXAMPLES)
def test_githubs_review_deliveries_carry_a_review_as_described(example: str) -> None:
    # These examples are older than the description: their pull_request and repository lack
    # fields it now requires (draft, has_discussions), so the review is what is checked here;
    # a payload the stand-in sends is checked whole (validate_webhook).
    payload = _example("pull_request_review", example)
    assert f"pull-request-review-{payload['action']}" in vendor_github.LANDING_WEBHOOKS
    github_contract.validate_component("webhooks_review", payload["review"])


def _example(event: str, name: str) -> Any:
    return json.loads((github_contract.github_dir() / "examples" / event / name).read_text())


def test_the_validators_reject_a_wrong_delivery_and_a_wrong_query() -> None:
    payload = _example("merge_group", "checks_requested.json")
    del payload["merge_group"]["head_sha"]
    with pytest.raises(github_contract.ContractViolation, match="head_sha"):
        github_contract.validate_webhook("merge-group-checks-requested", payload)
    with pytest.raises(github_contract.ContractViolation, match="nope"):
        github_contract.validate_graphql('{ repository(owner: "a", name: "b") { nope } }')


@pytest.mark.parametrize("document", [ENQUEUE, QUEUE, DEQUEUE], ids=["enqueue", "queue", "dequeue"])
def test_the_merge_queue_queries_match_githubs_graphql_schema(document: str) -> None:
    github_contract.validate_graphql(document)
