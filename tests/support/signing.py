"""Signed GitHub webhook deliveries for tests and the benchmark.

``EXAMPLES_DIR`` is GitHub's real example deliveries: ``examples/`` of the contract folder
:func:`tests.support.github_contract.github_dir` finds (``../shared/github`` beside the
checkout, else the copy in ``tests/data/github``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.github_contract import github_dir

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = github_dir() / "examples"
TEST_SECRET = "test-webhook-secret-0123456789abcdef"


def signature(body: bytes, secret: str = TEST_SECRET) -> str:
    """The ``X-Hub-Signature-256`` value GitHub would send."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def headers(
    event: str,
    body: bytes,
    *,
    secret: str | None = TEST_SECRET,
    delivery_id: str | None = None,
) -> dict[str, str]:
    """GitHub's headers for one delivery (unsigned when ``secret`` is None)."""
    result = {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/test",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id or str(uuid.uuid4()),
        "X-GitHub-Hook-ID": "109948940",
    }
    if secret is not None:
        result["X-Hub-Signature-256"] = signature(body, secret)
    return result


def encode(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode()


@dataclass(frozen=True)
class Example:
    event: str  # the X-GitHub-Event name
    name: str  # the file's stem: the action, or "event"
    body: bytes

    @property
    def payload(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.body)
        return loaded


def examples() -> list[Example]:
    """Every real example delivery, as the raw bytes on disk."""
    if not EXAMPLES_DIR.is_dir():
        raise FileNotFoundError(
            f"GitHub's example deliveries are missing: expected {EXAMPLES_DIR}; restore "
            "tests/data/github (python -m tests.support.vendor_github)"
        )
    found = [
        Example(path.parent.name, path.stem, path.read_bytes())
        for path in sorted(EXAMPLES_DIR.glob("*/*.json"))
    ]
    if not found:
        raise FileNotFoundError(f"no example deliveries under {EXAMPLES_DIR}")
    return found


def example(event: str, name: str) -> Example:
    for found in examples():
        if (found.event, found.name) == (event, name):
            return found
    raise FileNotFoundError(f"no example {event}/{name}.json under {EXAMPLES_DIR}")
