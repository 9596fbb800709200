"""Property: whatever a signed delivery holds, the intake answers it without a 5xx, on SQLite and
PostgreSQL. Payloads are GitHub's real examples and bare objects with odd values (lone
surrogates, NUL and control characters, very long strings, huge numbers, wrong types) put at
the fields the intake reads or stores, and anywhere else."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any
from urllib.parse import urlencode

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import signing

URL = "/webhooks/github"
EVENTS = ["ping", "pull_request", "issue_comment", "push", "check_run", "installation", "star"]
# What the intake stores as text, and where else it (or the event's parser) looks.
STORED = [("action",), ("repository", "full_name")]
FIELDS = [
    *STORED,
    ("repository",),
    ("pull_request", "number"),
    ("pull_request", "title"),
    ("pull_request", "head", "sha"),
    ("issue", "number"),
    ("comment", "body"),
    ("installation", "id"),
    ("repositories",),
    ("ref",),
    ("zen",),
]

odd_characters = st.one_of(
    st.characters(codec=None, categories=["Cs"]),  # lone surrogates
    st.characters(max_codepoint=0x1F),  # NUL and other control characters
    st.characters(exclude_categories=()),  # anything else
)
odd_text = st.one_of(
    st.text(odd_characters, max_size=20),
    st.sampled_from(["\ud800", "\x00", "opened\udfff", "a" * 61, "o/" + "r" * 199, "Ö/ü"]),
    st.text(max_size=5).map(lambda s: s * 80),
)
scalars = st.one_of(
    odd_text,
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(odd_text, inner, max_size=3)
    ),
    max_leaves=8,
)
starting_points = st.one_of(
    st.sampled_from(signing.examples()).map(lambda e: (e.event, e.payload)),
    st.tuples(st.sampled_from(EVENTS), st.dictionaries(odd_text, json_values, max_size=4)),
)


def _put(payload: dict[str, Any], path: tuple[str, ...], value: object) -> None:
    target: Any = payload
    for key in path[:-1]:
        if not isinstance(target.get(key), dict):
            target[key] = {}
        target = target[key]
    target[path[-1]] = value


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[str, bytes, str]:
    event, start = draw(starting_points)
    payload = copy.deepcopy(start)
    stored = draw(st.dictionaries(st.sampled_from(STORED), odd_text, max_size=2))
    others = draw(st.lists(st.tuples(st.sampled_from(FIELDS), json_values), max_size=3))
    for path, value in [*stored.items(), *others]:
        _put(payload, path, value)
    document = json.dumps(payload)  # ensure_ascii: surrogates and NULs travel as \u escapes
    if draw(st.booleans()):
        return event, document.encode(), "application/json"
    return event, urlencode({"payload": document}).encode(), "application/x-www-form-urlencoded"


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(delivery=deliveries())
def test_no_delivery_gets_a_5xx(client: TestClient, delivery: tuple[str, bytes, str]) -> None:
    event, body, content_type = delivery
    headers = signing.headers(event, body, delivery_id=str(uuid.uuid4()))
    headers["Content-Type"] = content_type
    response = client.post(URL, content=body, headers=headers)
    assert response.status_code < 500, (response.status_code, response.text, body[:500])
