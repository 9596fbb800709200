"""From delivery to work: deliveries posted to the endpoint, then a worker's process_delivery
routes each to its follow-up task (recorded here by small test handlers)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import Session, col, select

from stackbot.config import Settings
from stackbot.db.models import PullRequest, Repository, WebhookDelivery
from stackbot.taskqueue import TaskRegistry, queue
from stackbot.taskqueue.inbox import record_delivery
from stackbot.worker.runner import Worker
from tests.support import signing

FOLLOW_UP_KINDS = (
    "sync_pull",
    "pr_command",
    "base_moved",
    "retest",
    "check_base",
    "retarget_children",
)
SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"


@pytest.fixture
def ran() -> dict[str, list[dict[str, Any]]]:
    return {kind: [] for kind in FOLLOW_UP_KINDS}


@pytest.fixture
def worker(engine: Engine, settings: Settings, ran: dict[str, list[dict[str, Any]]]) -> Worker:
    registry = TaskRegistry()
    registry.load(["stackbot.services.deliveries"])
    for kind in FOLLOW_UP_KINDS:
        registry.add(kind, lambda ctx, kind=kind: ran[kind].append(ctx.payload))  # type: ignore[misc]
    return Worker(engine, settings, registry)


def deliver(client: TestClient, event: str, payload: dict[str, Any]) -> str:
    body = signing.encode(payload)
    response = client.post("/webhooks/github", content=body, headers=signing.headers(event, body))
    assert response.status_code == 202, response.text
    return str(response.json()["status"])


def statuses(engine: Engine) -> list[tuple[str, str]]:
    with Session(engine) as session:
        rows = session.exec(select(WebhookDelivery).order_by(col(WebhookDelivery.id)))
        return [(row.event, row.status) for row in rows]


def test_a_burst_of_pull_request_events_syncs_the_pull_once(
    client: TestClient, engine: Engine, worker: Worker, ran: dict[str, list[dict[str, Any]]]
) -> None:
    deliver(client, "pull_request", signing.example("pull_request", "opened").payload)
    deliver(client, "pull_request", signing.example("pull_request", "synchronize").payload)
    # two deliveries, one collapsed sync_pull and one collapsed check_base (issue 15)
    assert worker.run_until_idle() == 4
    assert ran["sync_pull"] == [
        {"repo": "Codertocat/Hello-World", "number": 2, "action": "synchronize"}
    ]
    assert statuses(engine) == [("pull_request", "processed"), ("pull_request", "processed")]
    assert queue.stats(engine) == {"pending": 0, "running": 0, "done": 4, "dead": 0}


def test_a_comment_on_a_pull_request_becomes_a_pr_command(
    client: TestClient, engine: Engine, worker: Worker, ran: dict[str, list[dict[str, Any]]]
) -> None:
    payload = copy.deepcopy(signing.example("issue_comment", "created").payload)
    payload["issue"]["pull_request"] = {"url": "https://api.github.com/repos/o/r/pulls/1"}
    payload["comment"]["body"] = f"/ok to test {SHA[:7]}"
    assert deliver(client, "issue_comment", payload) == "recorded"
    worker.run_until_idle()
    [command] = ran["pr_command"]
    assert command["body"] == f"/ok to test {SHA[:7]}"
    assert (command["number"], command["author"], command["comment_id"]) == (
        1,
        "Codertocat",
        492700400,
    )


def _push(ref: str) -> dict[str, Any]:
    payload = copy.deepcopy(signing.example("push", "event").payload)
    payload.update(ref=ref, deleted=False, after=SHA)
    return payload


def test_push_to_a_base_branch_moves_the_base(
    client: TestClient, engine: Engine, worker: Worker, ran: dict[str, list[dict[str, Any]]]
) -> None:
    with Session(engine) as session:
        repo = Repository(
            full_name="Codertocat/Hello-World", clone_url="x", default_branch="master"
        )
        session.add(repo)
        session.flush()
        assert repo.id is not None
        session.add(PullRequest(repo_id=repo.id, number=5, base_ref="release", state="open"))
        session.add(PullRequest(repo_id=repo.id, number=6, base_ref="old", state="closed"))
        session.commit()
    for ref in ("refs/heads/master", "refs/heads/release", "refs/heads/old", "refs/heads/topic"):
        assert deliver(client, "push", _push(ref)) == "recorded"
    worker.run_until_idle()
    assert sorted(p["branch"] for p in ran["base_moved"]) == ["master", "release"]
    assert ran["base_moved"][0]["sha"] == SHA
    assert [status for _, status in statuses(engine)] == [
        "processed",
        "processed",
        "ignored",
        "ignored",
    ]


def test_check_run_rerequested_retests_each_pull(
    client: TestClient, worker: Worker, ran: dict[str, list[dict[str, Any]]]
) -> None:
    payload = {
        "action": "rerequested",
        "check_run": {
            "id": 128,
            "name": "stackbot / amax-group 1x4",
            "head_sha": SHA,
            "external_id": "job-7",
            "pull_requests": [{"number": 2}, {"number": 3}],
        },
        "repository": {"full_name": "o/r"},
        "sender": {"login": "vetter"},
    }
    assert deliver(client, "check_run", payload) == "recorded"
    assert deliver(client, "check_run", payload | {"action": "completed"}) == "ignored"
    worker.run_until_idle()
    assert [(r["number"], r["external_id"]) for r in ran["retest"]] == [(2, "job-7"), (3, "job-7")]


def test_installation_is_recorded_on_known_repositories(
    client: TestClient, engine: Engine, worker: Worker
) -> None:
    with Session(engine) as session:
        session.add(Repository(full_name="o/known", clone_url="x"))
        session.commit()

    def installation(action: str) -> dict[str, Any]:
        return {
            "action": action,
            "installation": {"id": 4242, "account": {"login": "o"}},
            "repositories": [{"full_name": "o/known"}, {"full_name": "o/unknown"}],
            "sender": {"login": "o"},
        }

    def installed() -> int | None:
        with Session(engine) as session:
            return session.exec(select(Repository.installation_id)).one()

    deliver(client, "installation", installation("created"))
    worker.run_until_idle()
    assert installed() == 4242
    deliver(client, "installation", installation("deleted"))
    worker.run_until_idle()
    assert installed() is None
    assert statuses(engine) == [("installation", "processed"), ("installation", "processed")]


def test_a_stored_body_that_no_longer_parses_is_marked_failed(
    engine: Engine, worker: Worker
) -> None:
    recorded = record_delivery(
        engine,
        delivery_id="d1",
        event="pull_request",
        action=None,
        repo=None,
        body=b"{oops",
        ignored_because=None,
    )
    assert recorded.task_id is not None
    worker.run_until_idle()
    with Session(engine) as session:
        row = session.get(WebhookDelivery, recorded.row_id)
    assert row is not None and row.status == "failed" and "cannot parse" in (row.error or "")
    assert queue.stats(engine)["done"] == 1
