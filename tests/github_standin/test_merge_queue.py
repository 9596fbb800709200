"""GitHub's merge queue in the stand-in: ``POST /graphql`` (``enqueuePullRequest`` with
``expectedHeadOid``, ``dequeuePullRequest``, ``MergeQueue``), merge groups on
``gh-readonly-queue/<base>/pr-<N>-<head>``, ``merge_group`` ``checks_requested`` and
``destroyed`` (validated against GitHub's webhook schemas), merging when the required checks
pass on the group and taking a PR out when one fails (the groups behind rebuilt), and
``pulls/merge`` refused on a branch that requires the queue."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from graphql import build_schema, parse, validate

from stackbot.standin import deliveries, hosting, merging, routes_graphql
from tests.github_standin.scene import Scene, build_scene
from tests.support import github_contract
from tests.support.standin import StandinWorld

CHECK = "stackbot/tests: unit"
ENQUEUE = """
mutation Enqueue($pr: ID!, $head: GitObjectID) {
  enqueuePullRequest(input: {pullRequestId: $pr, expectedHeadOid: $head}) {
    mergeQueueEntry { id position state headCommit { oid } pullRequest { number } }
  }
}
"""
DEQUEUE = "mutation($id: ID!) { dequeuePullRequest(input: {id: $id}) { clientMutationId } }"
QUEUE = """
query Queue($owner: String!, $name: String!) {
  repository(owner: $owner, name: $name) {
    mergeQueue(branch: "main") {
      configuration { mergeMethod }
      entries(first: 50) { totalCount nodes { position state pullRequest { number } } }
    }
  }
}
"""


@pytest.fixture
def scene(standin: StandinWorld) -> Scene:
    built = build_scene(standin)
    control, repo = standin.control, standin.repo
    control.protect_branch(repo, "main", required_checks=[CHECK])
    control.require_merge_queue(repo, "main", method="MERGE")
    control.set_merge_settings(repo, delete_branch_on_merge=True)
    return built


def _gql(client: httpx.Client, query: str, **variables: Any) -> dict[str, Any]:
    github_contract.validate_graphql(query)
    answer = client.post("/graphql", json={"query": query, "variables": variables})
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


def _node(scene: Scene, number: int) -> str:
    pull = scene.bot.get(f"{scene.repo_path}/pulls/{number}").json()
    return str(pull["node_id"])


def _pass(scene: Scene, sha: str, conclusion: str = "success") -> None:
    scene.bot.post(
        f"{scene.repo_path}/check-runs",
        json={"name": CHECK, "head_sha": sha, "conclusion": conclusion},
    ).raise_for_status()


def _series(scene: Scene, count: int) -> list[int]:
    """``count`` PRs onto main, each with the required check green on its head."""
    control, repo = scene.world.control, scene.world.repo
    numbers = []
    for i in range(count):
        pull = control.open_pull(
            repo, author="alice", head=f"q{i}", title=f"q{i}", files={f"q{i}.txt": f"{i}\n"}
        )
        _pass(scene, pull.head_sha)
        numbers.append(pull.number)
    return numbers


def _groups(scene: Scene, action: str) -> list[dict[str, Any]]:
    found = [deliveries.payload_of(d) for d in scene.world.control.deliveries("merge_group")]
    return [p for p in found if p["action"] == action]


def test_the_standin_schema_is_a_subset_of_githubs() -> None:
    ours = build_schema(routes_graphql.SDL)
    github = github_contract.graphql_schema()
    for name, kind in ours.type_map.items():
        if name.startswith("__"):
            continue
        theirs = github.get_type(name)
        assert theirs is not None, f"GitHub's schema has no {name}"
        for field, spec in getattr(kind, "fields", {}).items():
            their_fields = getattr(theirs, "fields", {})
            assert field in their_fields, f"GitHub's {name} has no {field}"
            assert str(spec.type) == str(their_fields[field].type), f"{name}.{field}"
            for arg, arg_spec in getattr(spec, "args", {}).items():
                assert str(arg_spec.type) == str(their_fields[field].args[arg].type)
        values = getattr(kind, "values", None)
        if values is not None:
            assert set(values) <= set(theirs.values), name  # type: ignore[attr-defined]
    for query in (ENQUEUE, DEQUEUE, QUEUE):
        assert validate(ours, parse(query)) == []


def test_a_queued_pr_merges_through_its_group_when_the_required_check_passes(
    scene: Scene,
) -> None:
    control, repo = scene.world.control, scene.world.repo
    first, second = _series(scene, 2)
    bare = control.repo(repo).bare_path
    main = hosting.resolve(bare, "refs/heads/main")
    heads = {n: control.pull(repo, n).head_sha for n in (first, second)}

    refused = scene.bot.put(f"{scene.repo_path}/pulls/{first}/merge", json={"sha": heads[first]})
    assert refused.status_code == 405
    assert refused.json()["message"] == merging.ONLY_THROUGH_QUEUE

    one = _gql(scene.bot, ENQUEUE, pr=_node(scene, first), head=heads[first])
    two = _gql(scene.bot, ENQUEUE, pr=_node(scene, second), head=heads[second])
    entry = one["data"]["enqueuePullRequest"]["mergeQueueEntry"]
    assert (entry["position"], entry["state"]) == (1, "AWAITING_CHECKS")
    assert two["data"]["enqueuePullRequest"]["mergeQueueEntry"]["position"] == 2
    requested = _groups(scene, "checks_requested")
    assert [g["merge_group"]["head_ref"] for g in requested] == [
        f"refs/heads/gh-readonly-queue/main/pr-{n}-{heads[n]}" for n in (first, second)
    ]
    for payload in requested:
        github_contract.validate_webhook("merge-group-checks-requested", payload)
    group_one, group_two = (g["merge_group"] for g in requested)
    assert group_one["base_sha"] == main and group_two["base_sha"] == group_one["head_sha"]
    # The second group holds main, the first PR and the second: both files.
    files = hosting.git(bare, "ls-tree", "--name-only", group_two["head_sha"]).stdout.decode()
    assert {"q0.txt", "q1.txt"} <= set(files.split())
    owner, name = repo.split("/")
    queue = _gql(scene.bot, QUEUE, owner=owner, name=name)
    listed = queue["data"]["repository"]["mergeQueue"]
    assert listed["configuration"]["mergeMethod"] == "MERGE"
    assert [n["pullRequest"]["number"] for n in listed["entries"]["nodes"]] == [first, second]

    _pass(scene, group_one["head_sha"])
    assert hosting.resolve(bare, "refs/heads/main") == group_one["head_sha"]
    merged = control.pull(repo, first)
    assert merged.merged and merged.merge_commit_sha == group_one["head_sha"]
    assert control.pull(repo, second).state == "open"
    _pass(scene, group_two["head_sha"])
    assert hosting.resolve(bare, "refs/heads/main") == group_two["head_sha"]
    assert control.pull(repo, second).merged
    closed = [
        deliveries.payload_of(d)
        for d in control.deliveries("pull_request", "closed")
        if deliveries.payload_of(d)["number"] in (first, second)
    ]
    assert [c["number"] for c in closed] == [first, second]
    assert all(c["pull_request"]["merged"] for c in closed)
    github_contract.validate_delivery("pull_request", closed[-1])
    destroyed = _groups(scene, "destroyed")
    assert [(d["reason"], d["merge_group"]["head_sha"]) for d in destroyed] == [
        ("merged", group_one["head_sha"]),
        ("merged", group_two["head_sha"]),
    ]
    for payload in destroyed:
        github_contract.validate_webhook("merge-group-destroyed", payload)
    # the queue's branches and the merged heads (delete_branch_on_merge) are gone
    assert hosting.list_refs(bare, "refs/heads/gh-readonly-queue/") == {}
    assert hosting.resolve(bare, "refs/heads/q0") is None


def test_a_failing_group_takes_its_pr_out_and_rebuilds_the_groups_behind(scene: Scene) -> None:
    control, repo = scene.world.control, scene.world.repo
    first, second = _series(scene, 2)
    bare = control.repo(repo).bare_path
    main = hosting.resolve(bare, "refs/heads/main")
    for number in (first, second):
        _gql(scene.bot, ENQUEUE, pr=_node(scene, number), head=control.pull(repo, number).head_sha)
    group_one, group_two = (g["merge_group"] for g in _groups(scene, "checks_requested"))
    _pass(scene, group_one["head_sha"], "failure")
    assert control.pull(repo, first).state == "open" and not control.pull(repo, first).merged
    destroyed = [(d["reason"], d["merge_group"]["head_sha"]) for d in _groups(scene, "destroyed")]
    assert destroyed == [
        ("dequeued", group_one["head_sha"]),
        ("invalidated", group_two["head_sha"]),
    ]
    rebuilt = _groups(scene, "checks_requested")[-1]["merge_group"]
    assert rebuilt["base_sha"] == main and rebuilt["head_sha"] != group_two["head_sha"]
    files = hosting.git(bare, "ls-tree", "--name-only", rebuilt["head_sha"]).stdout.decode()
    assert "q1.txt" in files.split() and "q0.txt" not in files.split()
    assert hosting.resolve(bare, "refs/heads/main") == main


def test_enqueue_refuses_a_moved_head_and_dequeue_takes_it_out(scene: Scene) -> None:
    control, repo = scene.world.control, scene.world.repo
    (number,) = _series(scene, 1)
    tested = control.pull(repo, number).head_sha
    control.commit(repo, "q0", {"q0.txt": "new\n"}, message="v2", author="alice")
    moved = _gql(scene.bot, ENQUEUE, pr=_node(scene, number), head=tested)
    assert moved["data"]["enqueuePullRequest"] is None
    assert "head ref has changed" in moved["errors"][0]["message"]
    assert _groups(scene, "checks_requested") == []
    head = control.pull(repo, number).head_sha
    _pass(scene, head)
    _gql(scene.bot, ENQUEUE, pr=_node(scene, number), head=head)
    assert len(_groups(scene, "checks_requested")) == 1
    _gql(scene.bot, DEQUEUE, id=_node(scene, number))
    assert [d["reason"] for d in _groups(scene, "destroyed")] == ["dequeued"]
    anonymous = httpx.post(f"{scene.world.url}/graphql", json={"query": QUEUE})
    assert anonymous.status_code == 401


def test_a_passing_group_merges_the_prs_ahead_of_it_too(scene: Scene) -> None:
    """The last group holds every PR ahead of it: when its checks pass, they all merge."""
    control, repo = scene.world.control, scene.world.repo
    numbers = _series(scene, 3)
    bare = control.repo(repo).bare_path
    for number in numbers:
        _gql(scene.bot, ENQUEUE, pr=_node(scene, number), head=control.pull(repo, number).head_sha)
    groups = [g["merge_group"] for g in _groups(scene, "checks_requested")]
    _pass(scene, groups[-1]["head_sha"])
    assert hosting.resolve(bare, "refs/heads/main") == groups[-1]["head_sha"]
    assert all(control.pull(repo, n).merged for n in numbers)
    assert [d["reason"] for d in _groups(scene, "destroyed")] == ["merged"] * 3
    pushes = [
        deliveries.payload_of(d)
        for d in control.deliveries("push")
        if deliveries.payload_of(d)["ref"] == "refs/heads/main"
    ]
    assert pushes[-1]["after"] == groups[-1]["head_sha"]
    github_contract.validate_delivery("push", pushes[-1])
