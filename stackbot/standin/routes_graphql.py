"""``POST /graphql``: the part of GitHub's GraphQL API the merge queue needs (it has no REST API).

:data:`SDL` is a subset of GitHub's ``graphql/schema.graphql``, each type and field as GitHub
declares it (``tests/github_standin/test_merge_queue.py`` checks that against the contract
files); queries are parsed, validated and executed by graphql-core against it, so a query
GitHub would refuse is refused here too, in GitHub's shape (HTTP 200 with ``errors``). The
merge queue's rules are in :mod:`.merge_queue`.

Authentication is the REST gate's (an anonymous call gets 401, as on GitHub); the mutations need
write access (an installation: ``contents: write``, what merging needs).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from stackbot.standin import merge_queue
from stackbot.standin.auth import Caller, StandinHTTPError, can_see, require_write
from stackbot.standin.http import JsonBody, caller_of, json_response
from stackbot.standin.pull_bases import Event, send
from stackbot.standin.shapes import node_id
from stackbot.standin.state import Pull, QueueEntry, Repo, StandinState, iso

SDL = """
scalar DateTime
scalar GitObjectID
interface Node { id: ID! }
type Query {
  node(id: ID!): Node
  repository(followRenames: Boolean = true, name: String!, owner: String!): Repository
}
type Mutation {
  dequeuePullRequest(input: DequeuePullRequestInput!): DequeuePullRequestPayload
  enqueuePullRequest(input: EnqueuePullRequestInput!): EnqueuePullRequestPayload
}
input EnqueuePullRequestInput {
  clientMutationId: String
  expectedHeadOid: GitObjectID
  jump: Boolean
  pullRequestId: ID!
}
input DequeuePullRequestInput { clientMutationId: String id: ID! }
type EnqueuePullRequestPayload { clientMutationId: String mergeQueueEntry: MergeQueueEntry }
type DequeuePullRequestPayload { clientMutationId: String mergeQueueEntry: MergeQueueEntry }
type Repository implements Node {
  id: ID!
  mergeQueue(branch: String): MergeQueue
  nameWithOwner: String!
  pullRequest(number: Int!): PullRequest
}
enum PullRequestState { CLOSED MERGED OPEN }
enum PullRequestMergeMethod { MERGE REBASE SQUASH }
type PullRequest implements Node {
  baseRefName: String!
  headRefOid: GitObjectID!
  id: ID!
  isInMergeQueue: Boolean!
  mergeQueueEntry: MergeQueueEntry
  merged: Boolean!
  number: Int!
  state: PullRequestState!
}
type Commit implements Node { id: ID! oid: GitObjectID! }
type MergeQueueConfiguration {
  maximumEntriesToBuild: Int
  maximumEntriesToMerge: Int
  mergeMethod: PullRequestMergeMethod
}
type MergeQueue implements Node {
  configuration: MergeQueueConfiguration
  entries(after: String, before: String, first: Int, last: Int): MergeQueueEntryConnection
  id: ID!
}
type MergeQueueEntryConnection { nodes: [MergeQueueEntry] totalCount: Int! }
enum MergeQueueEntryState { AWAITING_CHECKS LOCKED MERGEABLE QUEUED UNMERGEABLE }
type MergeQueueEntry implements Node {
  baseCommit: Commit
  enqueuedAt: DateTime!
  headCommit: Commit
  id: ID!
  jump: Boolean!
  mergeQueue: MergeQueue
  position: Int!
  pullRequest: PullRequest
  solo: Boolean!
  state: MergeQueueEntryState!
}
"""
MAX_ENTRIES_TO_BUILD = 5


def _decode(node: str) -> tuple[str, int] | None:
    """``(kind, id)`` of a stand-in node id (``base64("0<Kind><id>")``), or None."""
    try:
        text = base64.b64decode(node, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    kind = text[1:].rstrip("0123456789")
    digits = text[1 + len(kind) :]
    return (kind, int(digits)) if text.startswith("0") and digits.isdigit() else None


class _Resolver:
    """Builds the GraphQL objects (dicts whose callables take field arguments) for one request;
    ``events`` collects what a mutation sends once the lock is released."""

    def __init__(self, state: StandinState, caller: Caller) -> None:
        self.state = state
        self.caller = caller
        self.events: list[Event] = []

    # -- lookups ------------------------------------------------------------------------------

    def _visible(self, repo: Repo) -> bool:
        try:
            can_see(self.state, self.caller, repo)
        except StandinHTTPError:
            return False
        return True

    def _pull_by_node(self, node: str) -> tuple[Repo, Pull]:
        decoded = _decode(node)
        if decoded is not None and decoded[0] == "PullRequest":
            for repo in self.state.repos.values():
                for pull in repo.pulls.values():
                    if pull.id == decoded[1] and self._visible(repo):
                        return repo, pull
        raise merge_queue.QueueError(
            f"Could not resolve to a node with the global id of '{node}'", "NOT_FOUND"
        )

    # -- objects ------------------------------------------------------------------------------

    def repository(self, repo: Repo) -> dict[str, Any]:
        def pull_request(info: Any, number: int) -> dict[str, Any] | None:
            pull = repo.pulls.get(number)
            return self.pull(repo, pull) if pull is not None else None

        def merge_queue_of(info: Any, branch: str | None = None) -> dict[str, Any] | None:
            base = branch or repo.default_branch
            return self.queue(repo, base) if base in repo.merge_queues else None

        return {
            "__typename": "Repository",
            "id": node_id("Repository", repo.id),
            "nameWithOwner": repo.full_name,
            "pullRequest": pull_request,
            "mergeQueue": merge_queue_of,
        }

    def pull(self, repo: Repo, pull: Pull) -> dict[str, Any]:
        entry = merge_queue.entry_of(repo, pull.number)
        state = "MERGED" if pull.merged else pull.state.upper()
        return {
            "__typename": "PullRequest",
            "id": node_id("PullRequest", pull.id),
            "number": pull.number,
            "headRefOid": pull.head_sha,
            "baseRefName": pull.base_ref,
            "merged": pull.merged,
            "state": state,
            "isInMergeQueue": entry is not None,
            "mergeQueueEntry": (lambda info: self.entry(repo, entry)) if entry else None,
        }

    def queue(self, repo: Repo, base: str) -> dict[str, Any]:
        def entries(info: Any, **paging: Any) -> dict[str, Any]:
            queued = merge_queue.entries_of(repo, base)
            first, last = paging.get("first"), paging.get("last")
            shown = queued[:first] if first is not None else queued
            shown = shown[-last:] if last else shown
            return {"nodes": [self.entry(repo, e) for e in shown], "totalCount": len(queued)}

        return {
            "__typename": "MergeQueue",
            "id": node_id("MergeQueue", repo.id * 1000 + len(base)),
            "configuration": {
                "mergeMethod": repo.merge_queues[base],
                "maximumEntriesToBuild": MAX_ENTRIES_TO_BUILD,
                "maximumEntriesToMerge": 1,
            },
            "entries": entries,
        }

    def entry(self, repo: Repo, entry: QueueEntry) -> dict[str, Any]:
        position = (
            merge_queue.entries_of(repo, entry.base_ref).index(entry) + 1
            if (entry in repo.queue)
            else 0
        )

        def commit(sha: str | None) -> dict[str, Any] | None:
            return (
                {"__typename": "Commit", "id": node_id("Commit", entry.id), "oid": sha}
                if (sha)
                else None
            )

        return {
            "__typename": "MergeQueueEntry",
            "id": node_id("MergeQueueEntry", entry.id),
            "enqueuedAt": iso(entry.enqueued_at),
            "jump": entry.jump,
            "solo": False,
            "position": position,
            "state": merge_queue.state_of(repo, entry) if position else "LOCKED",
            "baseCommit": commit(entry.group_base_sha),
            "headCommit": commit(entry.group_sha),
            "pullRequest": lambda info: self.pull(repo, repo.pulls[entry.pull_number]),
            "mergeQueue": lambda info: (
                self.queue(repo, entry.base_ref) if entry.base_ref in repo.merge_queues else None
            ),
        }

    # -- root fields ----------------------------------------------------------------------------

    def root(self) -> dict[str, Any]:
        return {
            "repository": self._repository,
            "node": self._node,
            "enqueuePullRequest": self._enqueue,
            "dequeuePullRequest": self._dequeue,
        }

    def _repository(self, info: Any, owner: str, name: str, **_: Any) -> dict[str, Any] | None:
        repo = self.state.repo(f"{owner}/{name}")
        if repo is None or not self._visible(repo):
            raise merge_queue.QueueError(
                f"Could not resolve to a Repository with the name '{owner}/{name}'.", "NOT_FOUND"
            )
        return self.repository(repo)

    def _node(self, info: Any, id: str) -> dict[str, Any] | None:
        repo, pull = self._pull_by_node(id)
        return self.pull(repo, pull)

    def _writable(self, repo: Repo) -> None:
        try:
            require_write(self.state, self.caller, repo, app_permission="contents")
        except StandinHTTPError as refused:
            raise merge_queue.QueueError(refused.message, "FORBIDDEN") from None

    def _enqueue(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        repo, pull = self._pull_by_node(input["pullRequestId"])
        self._writable(repo)
        entry, events = merge_queue.enqueue(
            self.state,
            repo,
            pull,
            enqueuer=self.caller.login or "ghost",
            expected_head=input.get("expectedHeadOid"),
            jump=bool(input.get("jump")),
        )
        self.events += events
        return {
            "clientMutationId": input.get("clientMutationId"),
            "mergeQueueEntry": self.entry(repo, entry),
        }

    def _dequeue(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        repo, pull = self._pull_by_node(input["id"])
        self._writable(repo)
        entry, events = merge_queue.dequeue(self.state, repo, pull)
        self.events += events
        return {
            "clientMutationId": input.get("clientMutationId"),
            "mergeQueueEntry": self.entry(repo, entry),
        }


def register(app: FastAPI, state: StandinState) -> None:
    from graphql import build_schema, graphql_sync

    schema = build_schema(SDL)

    @app.post("/graphql")
    def graphql_route(request: Request, body: JsonBody = None) -> JSONResponse:
        caller = caller_of(request)
        if caller.kind == "anonymous":
            raise StandinHTTPError(401, "This endpoint requires you to be authenticated.")
        query = (body or {}).get("query")
        variables = (body or {}).get("variables")
        if not isinstance(query, str) or not (variables is None or isinstance(variables, dict)):
            return json_response(
                {
                    "errors": [
                        {"message": "A query attribute must be specified and must be a string."}
                    ]
                }
            )
        resolver = _Resolver(state, caller)
        with state.lock:
            result = graphql_sync(
                schema,
                query,
                root_value=resolver.root(),
                variable_values=variables,
                operation_name=(body or {}).get("operationName"),
            )
        send(state, resolver.events)
        answer: dict[str, Any] = {}
        if result.errors:
            answer["errors"] = [_error(e) for e in result.errors]
        if result.data is not None:
            answer["data"] = result.data
        return json_response(answer)


def _error(error: Any) -> dict[str, Any]:
    formatted: dict[str, Any] = dict(error.formatted)
    original = getattr(error, "original_error", None)
    if isinstance(original, merge_queue.QueueError):
        formatted["type"] = original.kind
    return formatted
