"""Hostile but correctly signed deliveries (issue 29, point 4): ids of 2⁶³ or −1, NUL and lone
surrogates in titles, logins, bodies and refs. The intake accepts them (202); then the real
handlers run (GitHub is the stand-in) until the queue is idle, and each delivery must end
processed, ignored or failed with its reason recorded and logged, no task may have failed (none
left to be retried until dead), and no page that shows them may answer 500. On SQLite and
PostgreSQL."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import Session, col, select

from stackbot.config import Settings, load_settings
from stackbot.db.models import PullRequest, Task, WebhookDelivery
from stackbot.domain.payload_fields import PayloadFields
from stackbot.errors import BadInput
from stackbot.taskqueue import inbox
from stackbot.web.app import create_app
from stackbot.worker.handlers import service_registry
from stackbot.worker.runner import Worker
from tests.support import signing
from tests.support.standin import REPO, StandinWorld, app_key, standin

__all__ = ["app_key", "standin"]

BIG = 2**63
NUL = "a\x00b"
LONE = "a\ud800b"
SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"


@pytest.fixture
def settings(standin: StandinWorld, database_url: str, tmp_path: Path) -> Settings:
    return load_settings(
        dev=False,
        webhook_secret=signing.TEST_SECRET,
        data_dir=tmp_path / "data",
        database_url=database_url,
        github_api_url=standin.url,
        github_token=standin.bob_token,
        repo=REPO,
        default_test_sets=[],
    )


@pytest.fixture
def client(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    with TestClient(create_app(settings, engine=engine), raise_server_exceptions=False) as c:
        yield c


def _pull_request(
    number: Any, *, title: str = "t", login: str = "alice", ref: str = "feature"
) -> dict[str, Any]:
    payload = copy.deepcopy(signing.example("pull_request", "opened").payload)
    payload["repository"]["full_name"] = REPO
    pr = payload["pull_request"]
    pr.update(number=number, title=title, body=title)
    pr["user"]["login"] = login
    pr["head"]["ref"] = ref
    return payload


def _comment(number: Any, comment_id: Any, body: str, login: str = "bob") -> dict[str, Any]:
    payload = copy.deepcopy(signing.example("issue_comment", "created").payload)
    payload["repository"]["full_name"] = REPO
    payload["issue"]["number"] = number
    payload["issue"]["pull_request"] = {"url": "https://api.github.com/x"}
    payload["comment"].update(id=comment_id, body=body)
    payload["comment"]["user"]["login"] = login
    return payload


def _check_run(run_id: Any, number: Any, name: str = "stackbot/tests: quick 1x2") -> dict[str, Any]:
    return {
        "action": "rerequested",
        "repository": {"full_name": REPO},
        "check_run": {
            "id": run_id,
            "name": name,
            "head_sha": SHA,
            "external_id": name,
            "pull_requests": [{"number": number}],
        },
        "sender": {"login": "bob"},
    }


def _push(ref: str, after: str = SHA) -> dict[str, Any]:
    payload = copy.deepcopy(signing.example("push", "event").payload)
    payload["repository"]["full_name"] = REPO
    payload["repository"]["default_branch"] = "main"
    payload.update(ref=ref, after=after, deleted=False)
    return payload


def _installation(installation_id: Any, login: str = "NVIDIA") -> dict[str, Any]:
    return {
        "action": "created",
        "installation": {"id": installation_id, "account": {"login": login}},
        "repositories": [{"full_name": REPO}],
        "sender": {"login": login},
    }


HOSTILE: list[tuple[str, dict[str, Any]]] = [
    *[("pull_request", _pull_request(n)) for n in (BIG, -1, 0, 2**31)],
    *[("pull_request", _pull_request(1, title=t)) for t in (NUL, LONE)],
    *[("pull_request", _pull_request(1, login=t)) for t in (NUL, LONE)],
    *[("pull_request", _pull_request(1, ref=t)) for t in (NUL, LONE)],
    *[("issue_comment", _comment(n, 5, "/stackbot status")) for n in (BIG, -1)],
    *[("issue_comment", _comment(1, i, "/stackbot status")) for i in (BIG, -1)],
    *[("issue_comment", _comment(1, 7, f"/ok to test {SHA[:7]} {t}")) for t in (NUL, LONE)],
    *[("issue_comment", _comment(1, 8, "/stackbot status", login=t)) for t in (NUL, LONE)],
    *[("issue_comment", _comment(1, 9, t)) for t in (NUL, LONE)],
    *[("check_run", _check_run(i, 1)) for i in (BIG, -1)],
    *[("check_run", _check_run(3, n)) for n in (BIG, -1)],
    *[("check_run", _check_run(4, 1, name=t)) for t in (NUL, LONE)],
    *[("push", _push(f"refs/heads/{t}")) for t in (NUL, LONE)],
    ("push", _push("refs/heads/main", after=LONE)),
    *[("installation", _installation(i)) for i in (BIG, -1)],
    *[("installation", _installation(7, login=t)) for t in (NUL, LONE)],
    ("ping", {"zen": NUL, "hook_id": BIG, "repository": {"full_name": REPO}}),
]


def _post(client: TestClient, event: str, payload: dict[str, Any]) -> tuple[int, str]:
    body = json.dumps(payload).encode()  # "\u0000" and "\ud800" stay escapes, as GitHub sends
    response = client.post("/webhooks/github", content=body, headers=signing.headers(event, body))
    return response.status_code, response.text


def test_hostile_signed_deliveries_end_processed_or_refused_with_a_reason(
    standin: StandinWorld,
    settings: Settings,
    engine: Engine,
    client: TestClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = standin.control
    c.open_pull(
        REPO, author="alice", head="feature", title="A feature", number=1, files={"f.py": "x\n"}
    )
    # A title and body with a NUL, as GitHub's API answers them to the sync (GitHub's JSON
    # cannot carry a lone surrogate: the stand-in refuses to send one).
    c.open_pull(
        REPO,
        author="alice",
        head="hostile",
        title=f"title {NUL}",
        body=f"body {NUL}",
        number=2,
        files={"g.py": "y\n"},
        message="hostile title",
    )
    with caplog.at_level(logging.INFO):
        answers = [(event, *_post(client, event, payload)) for event, payload in HOSTILE]
        # Every one is accepted (202, as GitHub's signed deliveries should be): handled by the
        # worker, or recorded as ignored at once with the field named in the answer, on the
        # row and in the log.
        assert all(status == 202 for _, status, _ in answers), answers
        refused_at_intake = [json.loads(text) for _, _, text in answers]
        refused_at_intake = [a for a in refused_at_intake if a["status"] == "ignored"]
        assert refused_at_intake, "no hostile value was refused at the intake"
        for answer in refused_at_intake:
            assert f"not acted on: {answer['reason']}" in caplog.text, answer
        # The same bodies recorded without the intake's checks (by an earlier version): the
        # worker refuses what it cannot use, with the reason on the row and in the log.
        for n, (event, payload) in enumerate(HOSTILE):
            inbox.record_delivery(
                engine,
                delivery_id=f"stored-{n}",
                event=event,
                action=None,
                repo=REPO,
                body=json.dumps(payload).encode(),
                ignored_because=None,
            )
        assert _post(client, "pull_request", _pull_request(1))[0] == 202
        assert _post(client, "pull_request", _pull_request(2))[0] == 202
        worker = Worker(engine, settings, service_registry(settings))
        worker.run_until_idle()

    with Session(engine) as session:
        deliveries = list(session.exec(select(WebhookDelivery).order_by(col(WebhookDelivery.id))))
        tasks = list(session.exec(select(Task).order_by(col(Task.id))))
        numbers = [p.number for p in session.exec(select(PullRequest))]
    assert len(deliveries) == sum(status == 202 for _, status, _ in answers) + len(HOSTILE) + 2
    assert sorted(numbers) == [1, 2]
    unsettled = [(d.event, d.status, d.error) for d in deliveries if d.status == "recorded"]
    assert not unsettled, unsettled
    unexplained = [
        (d.event, d.body[:200]) for d in deliveries if d.status == "failed" and not d.error
    ]
    assert not unexplained, unexplained
    for delivery in deliveries:
        if delivery.status == "failed":
            assert delivery.error and delivery.error in caplog.text, delivery.error
    failing = [(t.kind, t.status, t.attempts, t.last_error) for t in tasks if t.last_error]
    assert not failing, "\n".join(map(str, failing))
    assert not [t for t in tasks if t.status == "dead"]

    addresses = ["/", "/tasks", "/jobs", "/api/tasks", "/api/jobs", "/api/series", "/api/changes"]
    addresses += [f"/pulls/{n}" for n in numbers] + [f"/api/pulls/{n}" for n in numbers]
    addresses += [f"/pulls/{n}" for n in (BIG, -1)] + [f"/api/pulls/{n}" for n in (BIG, -1)]
    answers = {a: client.get(a, headers={"Accept": "text/html"}).status_code for a in addresses}
    assert all(status < 500 for status in answers.values()), answers


@pytest.mark.parametrize("number", [BIG, 2**31, 0, -1])
def test_a_task_payload_with_a_pr_number_out_of_range_is_bad_input(number: int) -> None:
    with pytest.raises(BadInput, match="PR number from 1 to 2147483647"):
        PayloadFields("sync_pull", {"number": number}).pr_number()
