"""Keep a copy of GitHub's contract files inside the repository, for checkouts that have no
``shared/`` folder beside them (a fresh clone anywhere).

    python -m tests.support.vendor_github [SHARED_GITHUB_DIR]

copies ``examples/`` and ``webhook-schemas/`` verbatim and ``rest-api/needed-operations.json``,
and cuts the two large descriptions down to what the tests validate against:

- ``rest-api/api.github.com.json`` (13 MB): the operations the stand-in serves (read from its
  own route table, :func:`stackbot.standin.app.github_routes`), those of
  ``needed-operations.json`` and :data:`LANDING_OPERATIONS`, the webhooks of
  :data:`LANDING_WEBHOOKS` (``x-webhooks``), plus every component they refer to, transitively;
- ``graphql/schema.graphql`` (1.2 MB): the merge queue (which has no REST API), see
  :func:`graphql_subset`.

``tests/github_standin/test_vendored_contract.py`` checks the copy is exactly what this
produces from the shared originals, wherever those are present, and otherwise that it holds
every operation the stand-in serves.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from collections.abc import Iterable
from copy import copy
from pathlib import Path
from typing import Any

from graphql import assert_valid_schema, build_ast_schema, parse, print_ast
from graphql.language import (
    DirectiveDefinitionNode,
    DocumentNode,
    EnumTypeDefinitionNode,
    FieldDefinitionNode,
    InputObjectTypeDefinitionNode,
    InputValueDefinitionNode,
    InterfaceTypeDefinitionNode,
    ListTypeNode,
    NamedTypeNode,
    NonNullTypeNode,
    ObjectTypeDefinitionNode,
    ScalarTypeDefinitionNode,
    TypeDefinitionNode,
    TypeNode,
)

from tests.support.github_contract import operation_ids_at, standin_routes

VENDORED = Path(__file__).resolve().parents[1] / "data" / "github"
# What the landing work (`/stackbot land`) calls and answers, before the stand-in serves it:
# merging a PR (at the tested head), bringing its branch up to date, its reviews (approvals).
# Once the stand-in serves one, its route table brings it in anyway.
LANDING_OPERATIONS = (
    "pulls/merge",
    "pulls/check-if-merged",
    "pulls/merge-async",
    "pulls/get-merge-async-result",
    "pulls/update-branch",
    "pulls/list-reviews",
)
# Webhooks the landing work receives; their payload schemas are in the description's
# x-webhooks (examples/merge_group and examples/pull_request_review are real deliveries).
LANDING_WEBHOOKS = (
    "merge-group-checks-requested",
    "merge-group-destroyed",
    "pull-request-review-submitted",
    "pull-request-review-dismissed",
)
# Components validated by name (validate_component).
EXTRA_COMPONENTS = ("#/components/schemas/basic-error", "#/components/schemas/pull-request-stack")
# The GraphQL merge queue: these types whole, these fields of the types that lead to them.
GRAPHQL_PREFIXES = ("MergeQueue", "EnqueuePullRequest", "DequeuePullRequest")
GRAPHQL_FIELDS = {
    "Query": ("repository", "node", "nodes"),
    "Mutation": ("enqueuePullRequest", "dequeuePullRequest"),
    "Repository": ("mergeQueue", "pullRequest"),
    "PullRequest": ("mergeQueueEntry",),
}


def wanted_operations(document: dict[str, Any], needed: dict[str, Any]) -> set[str]:
    """The operationIds to keep: the stand-in's, needed-operations.json's and the landing
    work's. A stand-in route that ``document`` does not describe is an error."""
    served = operation_ids_at(document, standin_routes())
    unknown = sorted(f"{m} {p}" for (m, p), op in served.items() if op is None)
    if unknown:
        raise SystemExit(f"GitHub's description has no operation for {', '.join(unknown)}")
    needed_ids = {e.get("octokit_operationId", e["operationId"]) for e in needed["operations"]}
    return {op for op in served.values() if op} | needed_ids | set(LANDING_OPERATIONS)


def subset(
    document: dict[str, Any], needed: dict[str, Any], source_sha256: str = ""
) -> dict[str, Any]:
    wanted_ids = wanted_operations(document, needed)
    paths: dict[str, Any] = {}
    for path, item in document["paths"].items():
        for method, spec in item.items():
            if isinstance(spec, dict) and spec.get("operationId") in wanted_ids:
                paths.setdefault(path, {})[method] = spec
    missing = wanted_ids - {s["operationId"] for item in paths.values() for s in item.values()}
    if missing:
        raise SystemExit(f"GitHub's description has no operation {', '.join(sorted(missing))}")
    webhooks = {name: document["x-webhooks"][name] for name in LANDING_WEBHOOKS}
    components: dict[str, dict[str, Any]] = {}
    pending = [*_refs(paths), *_refs(webhooks), *EXTRA_COMPONENTS]
    while pending:
        ref = pending.pop()
        _, _, section, name = ref.split("/", 3)
        if name in components.get(section, {}):
            continue
        target = document["components"][section][name]
        components.setdefault(section, {})[name] = target
        pending.extend(_refs(target))
    return {
        "openapi": document["openapi"],
        "info": {
            **document["info"],
            "x-stackbot-subset": "operations stackbot uses; see tests/support/vendor_github.py",
            "x-stackbot-source-sha256": source_sha256,
        },
        "paths": dict(sorted(paths.items())),
        "x-webhooks": webhooks,
        "components": {s: dict(sorted(v.items())) for s, v in sorted(components.items())},
    }


def _refs(node: Any) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith("#/components/"):
                found.append(value)
            else:
                found.extend(_refs(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_refs(value))
    return found


# -- GraphQL ----------------------------------------------------------------------------------


def graphql_subset(sdl: str) -> str:
    """The merge queue's part of GitHub's GraphQL schema, itself a valid schema: the types
    named by :data:`GRAPHQL_PREFIXES` whole, the fields of :data:`GRAPHQL_FIELDS`, and every
    other type they lead to cut to its fields of scalar or enum type (a ``PullRequest``'s
    ``number`` and ``headRefOid``, not its ``commits``), with the interfaces, unions, enums,
    input types and directives those need. Descriptions are kept on the whole types only."""
    document = parse(sdl, no_location=True)
    types = {d.name.value: d for d in document.definitions if isinstance(d, TypeDefinitionNode)}
    leaves = {"String", "Int", "Float", "Boolean", "ID"} | {
        name
        for name, d in types.items()
        if isinstance(d, (ScalarTypeDefinitionNode, EnumTypeDefinitionNode))
    }
    kept: dict[str, TypeDefinitionNode] = {}
    pending = [name for name in types if name.startswith(GRAPHQL_PREFIXES)]
    pending += list(GRAPHQL_FIELDS)
    while pending:
        name = pending.pop()
        if name in kept or name not in types:
            continue
        cut = _cut_type(types[name], leaves)
        kept[name] = cut
        pending.extend(_named_types(cut))
    # An interface left without fields is no interface: out, and out of every implements list.
    empty = {
        n for n, d in kept.items() if isinstance(d, InterfaceTypeDefinitionNode) and not d.fields
    }
    for name in empty:
        del kept[name]
    for name, node in kept.items():
        if any(i.name.value in empty for i in getattr(node, "interfaces", None) or ()):
            kept[name] = copy(node)
            kept[name].interfaces = tuple(i for i in node.interfaces if i.name.value not in empty)
    directives = [d for d in document.definitions if isinstance(d, DirectiveDefinitionNode)]
    for directive in directives:
        for argument in directive.arguments or ():
            _keep_input(argument, types, kept)
    ordered = sorted(kept.values(), key=lambda d: d.name.value)
    out = print_ast(DocumentNode(definitions=(*directives, *ordered)))
    assert_valid_schema(build_ast_schema(parse(out)))  # a schema still, and a valid one
    return out + "\n"


def _keep_input(
    argument: InputValueDefinitionNode,
    types: dict[str, TypeDefinitionNode],
    kept: dict[str, TypeDefinitionNode],
) -> None:
    pending = [_base(argument.type)]
    while pending:
        name = pending.pop()
        if name in kept or name not in types:
            continue
        kept[name] = _strip(types[name])
        pending.extend(_named_types(kept[name]))


def _cut_type(node: TypeDefinitionNode, leaves: set[str]) -> TypeDefinitionNode:
    name = node.name.value
    whole = name.startswith(GRAPHQL_PREFIXES) or isinstance(
        node, (ScalarTypeDefinitionNode, EnumTypeDefinitionNode, InputObjectTypeDefinitionNode)
    )
    if whole or not isinstance(node, (ObjectTypeDefinitionNode, InterfaceTypeDefinitionNode)):
        return node if name.startswith(GRAPHQL_PREFIXES) else _strip(node)
    extra = GRAPHQL_FIELDS.get(name, ())
    fields = tuple(
        _strip(f) for f in node.fields or () if f.name.value in extra or _base(f.type) in leaves
    )
    return type(node)(
        name=node.name,
        interfaces=node.interfaces,
        directives=node.directives,
        fields=fields,
    )


def _strip(node: Any) -> Any:
    """``node`` without its descriptions (its fields', arguments' and values' too)."""
    changes: dict[str, Any] = {}
    if getattr(node, "description", None) is not None:
        changes["description"] = None
    for key in ("fields", "arguments", "values"):
        children = getattr(node, key, None)
        if children:
            changes[key] = tuple(_strip(child) for child in children)
    if not changes:
        return node
    stripped = copy(node)
    for key, value in changes.items():
        setattr(stripped, key, value)
    return stripped


def _base(node: TypeNode) -> str:
    while isinstance(node, (ListTypeNode, NonNullTypeNode)):
        node = node.type
    assert isinstance(node, NamedTypeNode)
    return node.name.value


def _named_types(node: TypeDefinitionNode) -> Iterable[str]:
    """Every type name ``node`` uses: its fields' types and arguments, interfaces, members."""
    for interface in getattr(node, "interfaces", None) or ():
        yield interface.name.value
    for member in getattr(node, "types", None) or ():
        yield member.name.value
    for field in getattr(node, "fields", None) or ():
        yield _base(field.type)
        if isinstance(field, FieldDefinitionNode):
            for argument in field.arguments or ():
                yield _base(argument.type)


# -- the copy -----------------------------------------------------------------------------------


def build(shared: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    for folder in ("examples", "webhook-schemas"):
        shutil.copytree(shared / folder, target / folder)
    (target / "rest-api").mkdir(parents=True)
    needed_text = (shared / "rest-api" / "needed-operations.json").read_text()
    (target / "rest-api" / "needed-operations.json").write_text(needed_text)
    raw = (shared / "rest-api" / "api.github.com.json").read_bytes()
    cut = subset(json.loads(raw), json.loads(needed_text), hashlib.sha256(raw).hexdigest())
    shutil.copy(shared / "rest-api" / "SOURCE.json", target / "rest-api" / "SOURCE.json")
    (target / "rest-api" / "api.github.com.json").write_text(
        json.dumps(cut, indent=1, sort_keys=True) + "\n"
    )
    (target / "graphql").mkdir()
    shutil.copy(shared / "graphql" / "SOURCE.json", target / "graphql" / "SOURCE.json")
    sdl = (shared / "graphql" / "schema.graphql").read_text()
    (target / "graphql" / "schema.graphql").write_text(graphql_subset(sdl))


if __name__ == "__main__":
    source = (
        Path(sys.argv[1]) if len(sys.argv) > 1 else VENDORED.parents[2].parent / "shared" / "github"
    )
    if source.name.startswith("-") or not (source / "rest-api" / "api.github.com.json").is_file():
        # Checked before the copy is removed: a wrong argument must not leave the tests without it.
        print(
            f"{source} is not GitHub's contract folder (no rest-api/api.github.com.json): "
            "usage: python -m tests.support.vendor_github [SHARED_GITHUB_DIR]",
            file=sys.stderr,
        )
        sys.exit(2)
    build(source, VENDORED)
    size = sum(p.stat().st_size for p in VENDORED.rglob("*") if p.is_file())
    print(f"vendored {source} into {VENDORED} ({size / 1e6:.1f} MB)")
