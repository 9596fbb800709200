"""The intake never refuses a delivery GitHub's schema allows: for every event and action
stackbot acts on, the *least* payload the schema admits (only required fields, null wherever
null is allowed) is built from the schema, checked valid, and must parse without BadInput."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stackbot.domain.events import UnknownEvent, parse_event
from tests.support import github_contract

SCHEMAS = [
    ("ping", None),
    ("push", None),
    *[
        ("pull_request", action)
        for action in (
            "opened",
            "edited",
            "synchronize",
            "reopened",
            "closed",
            "ready_for_review",
            "converted_to_draft",
        )
    ],
    ("issue_comment", "created"),
    ("issue_comment", "edited"),
    ("check_run", "rerequested"),
    *[
        ("installation", a)
        for a in ("created", "deleted", "suspend", "unsuspend", "new_permissions_accepted")
    ],
]
FORMATS = {
    "date-time": "2019-05-15T15:20:33Z",
    "uri": "https://example.com/x",
    "uri-template": "https://example.com/{x}",
}


def least(schema: dict[str, Any], resolver: Any) -> Any:
    """The smallest instance of ``schema``: required properties only, null where allowed."""
    if "$ref" in schema:
        resolved = resolver.lookup(schema["$ref"])
        return least(resolved.contents, resolved.resolver)
    if "allOf" in schema:
        merged: Any = None
        for part in schema["allOf"]:
            merged = _merge(merged, least(part, resolver))
        return merged
    for key in ("oneOf", "anyOf"):
        if key in schema:
            options = schema[key]
            nulls = [o for o in options if o.get("type") == "null"]
            return least(nulls[0] if nulls else options[0], resolver)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return None if None in schema["enum"] and _allows_null(schema) else schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = "null" if "null" in kind else kind[0]
    if kind == "null":
        return None
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {
            name: least(properties.get(name, {"type": "string"}), resolver)
            for name in schema.get("required", [])
        }
    if kind == "array":
        return [least(schema.get("items", {}), resolver) for _ in range(schema.get("minItems", 0))]
    if kind == "string":
        return FORMATS.get(schema.get("format", ""), "x")
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return None


def _allows_null(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "null" or (isinstance(kind, list) and "null" in kind)


def _merge(a: Any, b: Any) -> Any:
    """allOf: objects combine their properties; otherwise the later part refines the value."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _merge(a[k], b[k]) if k in a and k in b else a.get(k, b.get(k)) for k in a | b}
    return b


@pytest.mark.parametrize(("event", "action"), SCHEMAS, ids=lambda v: str(v))
def test_least_valid_delivery_is_accepted(event: str, action: str | None) -> None:
    path = github_contract.delivery_schema_path(event, action)
    schema = json.loads(path.read_text())
    # Event schemas refer to "common/x.schema.json" from the root of the schema folder.
    resolver = github_contract._webhook_registry().resolver(base_uri="")
    payload = least(schema, resolver)
    github_contract.validate_delivery(event, payload)  # the generator made what GitHub may send
    parsed = parse_event(event, payload)
    assert not isinstance(parsed, UnknownEvent), parsed
