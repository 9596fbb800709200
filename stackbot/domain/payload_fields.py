"""Typed reads from one task payload (a JSON object), each error naming the task kind and the
field, for the payload classes of :mod:`stackbot.domain.tasks`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stackbot.errors import BadInput


class PayloadFields:
    """Typed reads from one payload; each error names the task kind and the field."""

    def __init__(self, kind: str, payload: Mapping[str, Any]) -> None:
        if not isinstance(payload, Mapping):
            raise BadInput(f"a {kind} task's payload must be a JSON object, got {payload!r}")
        self.kind, self.payload = kind, payload

    def _fail(self, name: str, what: str) -> BadInput:
        got = self.payload.get(name, "nothing")
        return BadInput(f"a {self.kind} task needs {what} in '{name}', got {got!r}")

    def repo(self, name: str = "repo") -> str:
        value = self.payload.get(name)
        if not isinstance(value, str) or value.count("/") != 1:
            raise self._fail(name, "'owner/name'")
        return value

    def opt_repo(self, name: str = "repo") -> str | None:
        return None if self.payload.get(name) is None else self.repo(name)

    def text(self, name: str, *, default: str | None = None) -> str:
        value = self.payload.get(name, default)
        if not isinstance(value, str):
            raise self._fail(name, "a string")
        return value

    def opt_text(self, name: str) -> str | None:
        return None if self.payload.get(name) is None else self.text(name)

    def whole(self, name: str) -> int:
        value = self.payload.get(name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._fail(name, "a whole number")
        return value

    def opt_whole(self, name: str) -> int | None:
        return None if self.payload.get(name) is None else self.whole(name)

    def pr_number(self, name: str = "number") -> int:
        value = self.payload.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise self._fail(name, "a positive PR number")
        return value

    def opt_pr_number(self, name: str = "number") -> int | None:
        return None if self.payload.get(name) is None else self.pr_number(name)

    def pr_numbers(self, name: str) -> tuple[int, ...]:
        value = self.payload.get(name)
        if not isinstance(value, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in value
        ):
            raise self._fail(name, "a list of PR numbers")
        return tuple(value)

    def flag(self, name: str, *, default: bool) -> bool:
        value = self.payload.get(name, default)
        if not isinstance(value, bool):
            raise self._fail(name, "true or false")
        return value
