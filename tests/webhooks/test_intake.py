"""POST /webhooks/github: every real example delivery, then each way a delivery is refused."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import Session, col, select

from stackbot.db.models import Task, WebhookDelivery
from tests.support import signing
from tests.support.signing import Example, examples
from tests.webhooks.conftest import count_rows

URL = "/webhooks/github"

# What the intake decides for each real example: GitHub's issue_comment example is on a plain
# issue, and its push example deletes a tag, so neither asks stackbot for work; merge_group asks
# for its checks (the merge queue); pull_request_review is an event stackbot does not act on yet
# (recorded, ignored as unknown).
EXPECTED_STATUS = {
    ("issue_comment", "created"): "ignored",
    ("merge_group", "checks_requested"): "recorded",
    ("merge_group", "checks_requested-2"): "recorded",
    ("pull_request_review", "dismissed-2"): "ignored",
    ("pull_request_review", "submitted-1"): "ignored",
    ("pull_request_review", "submitted-3"): "ignored",
    ("pull_request_review", "submitted-4"): "ignored",
    ("ping", "event"): "ignored",
    ("pull_request", "closed"): "recorded",
    ("pull_request", "opened"): "recorded",
    ("pull_request", "synchronize"): "recorded",
    ("push", "event"): "ignored",
}


def post(client: TestClient, event: str, body: bytes, **kwargs: object) -> object:
    return client.post(URL, content=body, headers=signing.headers(event, body, **kwargs))  # type: ignore[arg-type]


def _deliveries(engine: Engine) -> list[WebhookDelivery]:
    with Session(engine) as session:
        return list(session.exec(select(WebhookDelivery).order_by(col(WebhookDelivery.id))))


def test_the_examples_cover_what_the_intake_expects() -> None:
    assert {(e.event, e.name) for e in examples()} == set(EXPECTED_STATUS)


@pytest.mark.parametrize("example", examples(), ids=lambda e: f"{e.event}-{e.name}")
def test_real_example_is_recorded_once(
    client: TestClient, engine: Engine, example: Example
) -> None:
    headers = signing.headers(example.event, example.body)
    first = client.post(URL, content=example.body, headers=headers)
    expected = EXPECTED_STATUS[(example.event, example.name)]
    assert first.status_code == 202, first.text
    assert first.json()["status"] == expected
    again = client.post(URL, content=example.body, headers=headers)
    assert again.status_code == 200, again.text
    assert again.json() == {"status": "duplicate", "delivery": headers["X-GitHub-Delivery"]}

    [row] = _deliveries(engine)
    assert row.delivery_id == headers["X-GitHub-Delivery"]
    assert row.event == example.event
    assert row.body == example.body  # stored raw, byte for byte, for reprocessing
    assert row.status == expected
    assert row.action == example.payload.get("action")
    with Session(engine) as session:
        tasks = list(session.exec(select(Task)))
    if expected == "recorded":
        assert [(t.kind, t.payload, t.status) for t in tasks] == [
            ("process_delivery", {"delivery": row.id}, "pending")
        ]
        assert first.json()["task"] == tasks[0].id
    else:
        assert tasks == [] and row.error  # the reason is kept


def test_unknown_event_is_recorded_and_ignored(client: TestClient, engine: Engine) -> None:
    body = signing.encode(
        {"action": "created", "starred_at": None, "repository": {"full_name": "o/r"}}
    )
    response = post(client, "star", body)
    assert response.status_code == 202  # type: ignore[attr-defined]
    assert response.json()["status"] == "ignored"  # type: ignore[attr-defined]
    [row] = _deliveries(engine)
    assert (row.event, row.status, row.repo_full_name) == ("star", "ignored", "o/r")
    assert count_rows(engine) == (1, 0)


def test_uninteresting_action_is_ignored(client: TestClient, engine: Engine) -> None:
    payload = signing.example("pull_request", "opened").payload | {"action": "labeled"}
    response = post(client, "pull_request", signing.encode(payload))
    assert response.json()["status"] == "ignored"  # type: ignore[attr-defined]
    assert "pull_request.labeled" in _deliveries(engine)[0].error  # type: ignore[operator]
    assert count_rows(engine) == (1, 0)


def test_form_encoded_delivery_is_accepted(client: TestClient, engine: Engine) -> None:
    from urllib.parse import urlencode

    example = signing.example("pull_request", "opened")
    body = urlencode({"payload": example.body.decode()}).encode()
    headers = signing.headers("pull_request", body)
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    response = client.post(URL, content=body, headers=headers)
    assert response.status_code == 202, response.text
    assert count_rows(engine) == (1, 1)


# -- signatures ---------------------------------------------------------------------------------


def _sha1(body: bytes) -> str:
    import hashlib
    import hmac

    return "sha1=" + hmac.new(signing.TEST_SECRET.encode(), body, hashlib.sha1).hexdigest()


def _with(headers: dict[str, str], **changes: str | None) -> dict[str, str]:
    result = dict(headers)
    for name, value in changes.items():
        name = name.replace("_", "-")
        if value is None:
            result.pop(name, None)
        else:
            result[name] = value
    return result


BODY = signing.encode({"zen": "Keep it logically awesome.", "hook_id": 1})
GOOD = signing.headers("ping", BODY)


@pytest.mark.parametrize(
    ("headers", "body", "message"),
    [
        (
            _with(GOOD, X_Hub_Signature_256=signing.signature(BODY, "another-secret-of-16+")),
            BODY,
            "does not match",
        ),
        (_with(GOOD, X_Hub_Signature_256=None), BODY, "missing X-Hub-Signature-256"),
        (
            _with(GOOD, X_Hub_Signature_256=None, X_Hub_Signature=_sha1(BODY)),
            BODY,
            "wrong algorithm",
        ),
        (_with(GOOD, X_Hub_Signature_256=_sha1(BODY)), BODY, "wrong algorithm"),
        (_with(GOOD, X_Hub_Signature_256="sha256=" + "0" * 64), BODY, "does not match"),
        (_with(GOOD, X_Hub_Signature_256="sha256=short"), BODY, "does not match"),
        (GOOD, BODY.replace(b"awesome", b"AWESOME"), "does not match"),  # tampered body
    ],
    ids=["wrong-secret", "missing", "sha1-only", "sha1-in-256", "zeros", "truncated", "tampered"],
)
def test_bad_signature_is_401_and_stores_nothing(
    client: TestClient, engine: Engine, headers: dict[str, str], body: bytes, message: str
) -> None:
    response = client.post(URL, content=body, headers=headers)
    assert response.status_code == 401, response.text
    assert message in response.json()["error"]
    assert count_rows(engine) == (0, 0)


@pytest.mark.parametrize("spelling", ["as sent", "upper-case hex"])
def test_good_signature_is_accepted(client: TestClient, engine: Engine, spelling: str) -> None:
    headers = dict(GOOD)
    if spelling == "upper-case hex":
        headers["X-Hub-Signature-256"] = "sha256=" + headers["X-Hub-Signature-256"][7:].upper()
    response = client.post(URL, content=BODY, headers=headers)
    assert response.status_code == 202, response.text
    assert count_rows(engine) == (1, 0)


# -- malformed deliveries -----------------------------------------------------------------------


def _pull_request_without(*path: str) -> bytes:
    payload = signing.example("pull_request", "synchronize").payload
    target = payload
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return signing.encode(payload)


def _pull_request_with(value: object, *path: str) -> bytes:
    payload = signing.example("pull_request", "synchronize").payload
    target = payload
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return signing.encode(payload)


@pytest.mark.parametrize(
    ("event", "body", "message"),
    [
        ("pull_request", b"{not json", "not valid JSON"),
        ("pull_request", b"", "not valid JSON"),
        ("pull_request", b"\xff\xfe", "not valid JSON"),
        ("pull_request", b"[1, 2]", "must be a JSON object, got list"),
        ("pull_request", b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
        (
            "pull_request",
            _pull_request_without("pull_request", "head", "sha"),
            "pull_request.head.sha is missing",
        ),
        ("pull_request", _pull_request_without("repository"), "repository is missing"),
        (
            "pull_request",
            _pull_request_with("two", "pull_request", "number"),
            "pull_request.number must be an integer",
        ),
        (
            "pull_request",
            _pull_request_with(True, "pull_request", "number"),
            "pull_request.number must be an integer",
        ),
        ("pull_request", _pull_request_with(None, "action"), "action is missing"),
        (
            "issue_comment",
            signing.encode({"action": "created", "issue": {"number": 1}}),
            "comment is missing",
        ),
        (
            "push",
            signing.encode({"ref": "refs/heads/main", "repository": {"full_name": "o/r"}}),
            "push: before is missing",
        ),
        (
            "check_run",
            signing.encode(
                {
                    "action": "rerequested",
                    "repository": {"full_name": "o/r"},
                    "check_run": {"id": 1, "name": "x", "head_sha": "a", "pull_requests": [7]},
                }
            ),
            "check_run.pull_requests[0] must be an object",
        ),
        (
            "installation",
            signing.encode({"action": "created", "installation": {}}),
            "installation.id is missing",
        ),
    ],
    ids=[
        "not-json",
        "empty",
        "not-utf8",
        "array",
        "too-deep",
        "no-head-sha",
        "no-repository",
        "number-string",
        "number-bool",
        "no-action",
        "comment",
        "push",
        "check-run",
        "installation",
    ],
)
def test_malformed_body_is_400_naming_the_problem(
    client: TestClient, engine: Engine, event: str, body: bytes, message: str
) -> None:
    response = client.post(URL, content=body, headers=signing.headers(event, body))
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]
    assert count_rows(engine) == (0, 0)


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("X-GitHub-Event", "x-github-event header is missing"),
        ("X-GitHub-Delivery", "x-github-delivery header is missing"),
    ],
)
def test_missing_github_header_is_400(
    client: TestClient, engine: Engine, missing: str, message: str
) -> None:
    response = client.post(
        URL, content=BODY, headers=_with(GOOD, **{missing.replace("-", "_"): None})
    )
    assert response.status_code == 400
    assert message in response.json()["error"]
    assert count_rows(engine) == (0, 0)


def test_overlong_delivery_id_is_400(client: TestClient, engine: Engine) -> None:
    response = client.post(URL, content=BODY, headers=_with(GOOD, X_GitHub_Delivery="d" * 101))
    assert response.status_code == 400
    assert count_rows(engine) == (0, 0)


def test_form_body_without_payload_is_400(client: TestClient) -> None:
    body = b"a=1&b=2"
    headers = signing.headers("ping", body)
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    response = client.post(URL, content=body, headers=headers)
    assert response.status_code == 400
    assert "Content-Type: application/json" in response.json()["error"]


def test_metrics_count_deliveries_by_outcome(client: TestClient) -> None:
    client.post(URL, content=BODY, headers=GOOD)
    client.post(URL, content=BODY, headers=GOOD)
    client.post(URL, content=BODY, headers=_with(GOOD, X_Hub_Signature_256=None))
    text = client.get("/metrics").text
    assert 'stackbot_webhook_deliveries_total{event="ping",outcome="ignored"} 1' in text
    assert 'stackbot_webhook_deliveries_total{event="ping",outcome="duplicate"} 1' in text
    assert 'stackbot_webhook_deliveries_total{event="ping",outcome="unauthorized"} 1' in text
    assert 'stackbot_tasks{status="pending"} 0' in text
    assert 'stackbot_http_request_duration_seconds_count{route="/webhooks/github"} 3' in text
    assert json.loads(client.get("/healthz").text) == {"status": "ok", "database": "ok"}
