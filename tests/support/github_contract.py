"""GitHub's own contract, checked: webhook payload schemas, the REST API description and the
GraphQL schema.

The files live in ``../shared/github`` (next to the checkout, or ``shared/github`` inside it;
``STACKBOT_TEST_GITHUB_DIR`` overrides); a checkout without them (a CI clone elsewhere) uses the
copy in ``tests/data/github`` (see :mod:`tests.support.vendor_github`). Anything that sends
deliveries or answers REST calls in place of GitHub (the stand-in) is checked against them, and
so can the webhook intake:

- :func:`validate_delivery` checks a payload against ``webhook-schemas/<event>/<action>``;
- :func:`validate_response` checks a body against the OpenAPI ``responses`` schema of one
  operation and status;
- :func:`validate_webhook` checks a payload against the description's ``x-webhooks`` schema
  (``merge_group``, ``pull_request_review``);
- :func:`validate_graphql` checks a query or mutation against the GraphQL schema;
- :func:`needed_operations` lists the operations stackbot uses, :func:`served_operations` those
  the stand-in serves (from its route table).

OpenAPI 3.0's ``nullable: true`` admits null even where the schema also has an ``enum`` without
null (GitHub answers ``"conclusion": null`` for a running check run); the validator reads it so.

A mismatch raises :class:`ContractViolation` naming the operation or event and the JSON path.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from graphql import GraphQLSchema, build_schema, parse, validate
from openapi_schema_validator import OAS30Validator, oas30_format_checker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

_CHECKOUT = Path(__file__).resolve().parents[2]


class ContractViolation(AssertionError):
    """A payload or response that GitHub's published contract does not allow."""


@dataclass(frozen=True)
class Operation:
    operation_id: str  # as in needed-operations.json (upstream GitHub names)
    method: str  # upper case
    path: str  # "/repos/{owner}/{repo}/pulls/{pull_number}"
    spec: dict[str, Any]  # the operation object from the OpenAPI description


def github_dir() -> Path:
    explicit = os.environ.get("STACKBOT_TEST_GITHUB_DIR")
    candidates = [Path(explicit)] if explicit else []
    candidates += [
        _CHECKOUT / "shared" / "github",
        _CHECKOUT.parent / "shared" / "github",
        _CHECKOUT / "tests" / "data" / "github",
    ]
    for candidate in candidates:
        if (candidate / "rest-api" / "api.github.com.json").is_file():
            return candidate
    raise FileNotFoundError(
        "GitHub's contract files are missing: looked for rest-api/api.github.com.json under "
        + ", ".join(str(c) for c in candidates)
        + ". Put the shared/github folder next to the checkout or set STACKBOT_TEST_GITHUB_DIR."
    )


# -- webhook deliveries ---------------------------------------------------------------------


@cache
def _webhook_registry() -> Registry:
    root = github_dir() / "webhook-schemas"
    registry: Registry = Registry()
    for path in sorted(root.rglob("*.schema.json")):
        contents = json.loads(path.read_text())
        resource = Resource.from_contents(contents, default_specification=DRAFT7)
        # Event schemas refer to "common/x.schema.json", common schemas to "x.schema.json"
        # (relative to their own "$id"), so each file is known by its path under the root.
        registry = registry.with_resource(path.relative_to(root).as_posix(), resource)
        if "$id" in contents:
            registry = registry.with_resource(contents["$id"], resource)
    return registry


def delivery_schema_path(event: str, action: str | None) -> Path:
    root = github_dir() / "webhook-schemas" / event
    path = root / (f"{action}.schema.json" if action else "event.schema.json")
    if not path.is_file():
        raise ContractViolation(f"no webhook schema for event {event!r} action {action!r} ({path})")
    return path


def validate_delivery(event: str, payload: dict[str, Any]) -> None:
    """Check one webhook payload (the JSON body) against GitHub's schema for its event/action."""
    action = payload.get("action") if event not in ("push", "ping") else None
    schema = json.loads(delivery_schema_path(event, action).read_text())
    validator = jsonschema.Draft7Validator(
        schema,
        registry=_webhook_registry(),
        format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER,
    )
    _raise_first(validator.iter_errors(payload), f"webhook {event}.{action or 'event'}")


# -- REST responses -------------------------------------------------------------------------


@cache
def _openapi() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        (github_dir() / "rest-api" / "api.github.com.json").read_text()
    )
    return document


@cache
def _needed() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        (github_dir() / "rest-api" / "needed-operations.json").read_text()
    )
    return document


@cache
def _operations_by_id() -> dict[str, Operation]:
    found: dict[str, Operation] = {}
    for path, item in _openapi()["paths"].items():
        for method, spec in item.items():
            if isinstance(spec, dict) and "operationId" in spec:
                found[spec["operationId"]] = Operation(
                    spec["operationId"], method.upper(), path, spec
                )
    return found


def operation(operation_id: str) -> Operation:
    """The OpenAPI operation; needed-operations' upstream names are mapped to Octokit's."""
    octokit_id = operation_id
    for entry in _needed()["operations"]:
        if entry["operationId"] == operation_id:
            octokit_id = entry.get("octokit_operationId", operation_id)
            spec = _operations_by_id()[octokit_id]
            return Operation(operation_id, entry["method"], entry["path"], spec.spec)
    if octokit_id not in _operations_by_id():
        raise ContractViolation(f"unknown GitHub operation {operation_id!r}")
    return _operations_by_id()[octokit_id]


def path_shape(path: str) -> str:
    """A path with its parameters' names left out: ``/repos/{}/{}/pulls/{}`` for both GitHub's
    ``{owner}/{repo}/pulls/{pull_number}`` and the stand-in's ``{owner}/{name}/pulls/{number}``."""
    return re.sub(r"\{[^}]*\}", "{}", path)


def operation_ids_at(
    document: dict[str, Any], routes: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], str | None]:
    """The operationId (Octokit's names) ``document`` gives each ``(METHOD, path)`` route;
    None where it describes no such operation."""
    by_shape = {
        (method.upper(), path_shape(path)): spec["operationId"]
        for path, item in document["paths"].items()
        for method, spec in item.items()
        if isinstance(spec, dict) and "operationId" in spec
    }
    return {(m, p): by_shape.get((m, path_shape(p))) for m, p in routes}


@cache
def standin_routes() -> tuple[tuple[str, str], ...]:
    """The GitHub API routes the stand-in serves, read from its own route table."""
    from stackbot.standin.app import create_standin_app, github_routes
    from stackbot.standin.state import StandinState

    with tempfile.TemporaryDirectory() as root:
        return tuple(github_routes(create_standin_app(StandinState(Path(root)))))


def served_operations() -> set[str]:
    """Every operation the stand-in serves, named as the tests name it (needed-operations.json's
    upstream name where it has one); ContractViolation when the description in use lacks one."""
    found = operation_ids_at(_openapi(), standin_routes())
    missing = sorted(f"{m} {p}" for (m, p), op in found.items() if op is None)
    if missing:
        raise ContractViolation(
            f"the description in {github_dir()} has no operation for the stand-in's "
            + ", ".join(missing)
            + ": run python -m tests.support.vendor_github"
        )
    upstream = {
        e.get("octokit_operationId", e["operationId"]): e["operationId"]
        for e in _needed()["operations"]
    }
    return {upstream.get(op, op) for op in found.values() if op is not None}


def needed_operations() -> list[Operation]:
    """Every operation stackbot uses (needed-operations.json), with its OpenAPI description."""
    return [operation(entry["operationId"]) for entry in _needed()["operations"]]


def _nullable_enum(validator: Any, enums: Any, instance: Any, schema: dict[str, Any]) -> Any:
    # GitHub describes e.g. a check run's `conclusion` as {enum: [...], nullable: true} and
    # answers null while the run is in progress: in OpenAPI 3.0 `nullable` admits null, so an
    # enum without null must not reject it.
    if instance is None and schema.get("nullable") is True:
        return
    yield from jsonschema._keywords.enum(validator, enums, instance, schema)


_GitHubValidator = jsonschema.validators.extend(OAS30Validator, {"enum": _nullable_enum})


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = _openapi()
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def response_schema(operation_id: str, status: int) -> dict[str, Any] | None:
    """The JSON schema of one documented response; None when that response has no body."""
    responses = operation(operation_id).spec["responses"]
    if str(status) not in responses:
        raise ContractViolation(
            f"{operation_id} does not document status {status} (documented: {sorted(responses)})"
        )
    response = _resolve(responses[str(status)])
    content = response.get("content", {})
    media = content.get("application/json") or next(iter(content.values()), None)
    if media is None or "schema" not in media:
        return None
    schema: dict[str, Any] = media["schema"]
    return schema


def validate_response(operation_id: str, status: int, body: Any) -> None:
    """Check a response body against its operation's documented schema for that status."""
    schema = response_schema(operation_id, status)
    if schema is None:
        if body not in (None, b"", ""):
            raise ContractViolation(f"{operation_id} {status} has no documented body, got {body!r}")
        return
    # Component refs ("#/components/schemas/x") resolve against this root.
    rooted = {**schema, "components": _openapi()["components"]}
    validator = _GitHubValidator(rooted, format_checker=oas30_format_checker)
    _raise_first(validator.iter_errors(body), f"{operation_id} {status}")


def validate_component(name: str, body: Any) -> None:
    """Check a body against one ``#/components/schemas/<name>`` of the REST description."""
    rooted = {"$ref": f"#/components/schemas/{name}", "components": _openapi()["components"]}
    validator = _GitHubValidator(rooted, format_checker=oas30_format_checker)
    _raise_first(validator.iter_errors(body), f"schema {name}")


def validate_webhook(name: str, payload: Any) -> None:
    """Check a delivery's body against the REST description's ``x-webhooks`` schema ``name``
    (``merge-group-checks-requested``, ``pull-request-review-submitted``: events with no file
    under ``webhook-schemas/``)."""
    hooks = _openapi().get("x-webhooks", {})
    if name not in hooks:
        raise ContractViolation(f"no webhook {name!r} in the REST description")
    schema = hooks[name]["post"]["requestBody"]["content"]["application/json"]["schema"]
    rooted = {**schema, "components": _openapi()["components"]}
    validator = _GitHubValidator(rooted, format_checker=oas30_format_checker)
    _raise_first(validator.iter_errors(payload), f"webhook {name}")


@cache
def graphql_schema() -> GraphQLSchema:
    """GitHub's GraphQL schema (the vendored copy holds its merge queue part)."""
    # GitHub's own schema defines a few fields twice (EnterpriseOwnerInfo), which graphql-core
    # refuses unless told the schema is GitHub's business.
    text = (github_dir() / "graphql" / "schema.graphql").read_text()
    return build_schema(text, assume_valid=True, assume_valid_sdl=True)


def validate_graphql(document: str) -> None:
    """Check a GraphQL query or mutation against GitHub's schema."""
    errors = validate(graphql_schema(), parse(document))
    if errors:
        raise ContractViolation(f"GraphQL: {errors[0].message}")


def _raise_first(errors: Any, what: str) -> None:
    found = sorted(errors, key=lambda e: list(e.absolute_path))
    if found:
        error = found[0]
        where = "/".join(str(p) for p in error.absolute_path) or "<root>"
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ContractViolation(f"{what}: at {where}: {error.message[:500]}{more}")
