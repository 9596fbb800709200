"""A signed delivery whose ``action`` or ``repository.full_name`` the database cannot store
(a lone surrogate from a ``\\ud800`` escape, a NUL, a control character, more characters than
the column holds) is refused with a 400 naming the field, and nothing is recorded: on SQLite
and PostgreSQL alike, never a 500."""

from __future__ import annotations

import copy
import json
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine

from tests.support import signing
from tests.webhooks.conftest import count_rows

URL = "/webhooks/github"
BAD_TEXT = {
    "lone surrogate": "opened\ud800",
    "NUL": "op\x00ened",
    "control character": "open\x1bed",
    "too long": "o" * 201,
}


def _post(client: TestClient, event: str, payload: dict[str, Any]) -> Any:
    body = json.dumps(payload).encode()  # ensure_ascii: "\ud800" and "\u0000" stay escapes
    return client.post(URL, content=body, headers=signing.headers(event, body))


def _with(payload: dict[str, Any], field: str, value: str) -> dict[str, Any]:
    changed = copy.deepcopy(payload)
    if field == "action":
        changed["action"] = value
    else:
        changed.setdefault("repository", {})["full_name"] = value
    return changed


def test_unstorable_action_or_repository_is_refused(client: TestClient, engine: Engine) -> None:
    pull_request = signing.example("pull_request", "opened").payload
    unknown = {"action": "created", "repository": {"full_name": "NVIDIA/Megatron-LM"}}
    answers = {}
    for event, payload in [("pull_request", pull_request), ("star", unknown)]:
        for field in ("action", "repository.full_name"):
            for what, value in BAD_TEXT.items():
                response = _post(client, event, _with(payload, field, value))
                answers[(event, field, what)] = (response.status_code, response.text)
    for (_event, field, _what), (status, text) in answers.items():
        assert status == 400, answers
        assert field in json.loads(text)["error"], answers
    assert count_rows(engine) == (0, 0)


def test_the_same_fields_in_range_are_recorded(client: TestClient, engine: Engine) -> None:
    payload = {"action": "a" * 60, "repository": {"full_name": "Ö" * 200}}
    response = _post(client, "star", payload)
    assert response.status_code == 202, response.text
    assert count_rows(engine) == (1, 0)
