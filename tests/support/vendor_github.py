"""Keep a copy of GitHub's contract files inside the repository, for CI checkouts that have no
``shared/`` folder beside them.

    python -m tests.support.vendor_github [SHARED_GITHUB_DIR]

copies ``examples/`` and ``webhook-schemas/`` verbatim and ``rest-api/needed-operations.json``,
and cuts ``rest-api/api.github.com.json`` (13 MB) down to the operations stackbot uses (and the
stand-in's few extra ones) plus every component they refer to, transitively: the validators
read nothing else. ``tests/github_standin/test_vendored_contract.py`` checks the copy is exactly
what this produces from the shared originals, wherever those are present.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

VENDORED = Path(__file__).resolve().parents[1] / "data" / "github"
# Operations the stand-in serves beyond needed-operations.json (tests/github_standin).
EXTRA_OPERATIONS = (
    "pull-request-stacks/list",
    "pull-request-stacks/get",
    "pull-request-stacks/create",
    "repos/get",
    "pulls/update",
)
# Components validated by name (validate_component).
EXTRA_COMPONENTS = ("#/components/schemas/basic-error", "#/components/schemas/pull-request-stack")


def subset(
    document: dict[str, Any], needed: dict[str, Any], source_sha256: str = ""
) -> dict[str, Any]:
    wanted_ids = {
        entry.get("octokit_operationId", entry["operationId"]) for entry in needed["operations"]
    } | set(EXTRA_OPERATIONS)
    paths: dict[str, Any] = {}
    for path, item in document["paths"].items():
        for method, spec in item.items():
            if isinstance(spec, dict) and spec.get("operationId") in wanted_ids:
                paths.setdefault(path, {})[method] = spec
    components: dict[str, dict[str, Any]] = {}
    pending = [*_refs(paths), *EXTRA_COMPONENTS]
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


if __name__ == "__main__":
    source = (
        Path(sys.argv[1]) if len(sys.argv) > 1 else VENDORED.parents[2].parent / "shared" / "github"
    )
    build(source, VENDORED)
    size = sum(p.stat().st_size for p in VENDORED.rglob("*") if p.is_file())
    print(f"vendored {source} into {VENDORED} ({size / 1e6:.1f} MB)")
