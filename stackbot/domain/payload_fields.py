"""Typed reads from one task payload (a JSON object), each error naming the task kind and the
field, for the payload classes of :mod:`stackbot.domain.tasks`.

:meth:`PayloadFields.read` reads a field as the type its payload class declares for it, so a
payload class needs no reader of its own: ``RepoName`` is ``owner/name``, ``PrNumber`` a
whole number from 1 to 2³¹−1, ``tuple[PrNumber, ...]`` a list of them, ``int`` a whole number,
``bool`` true or false, and ``str`` (or a ``NewType`` of it, such as ``Sha``) a string;
``X | None`` also takes null or nothing. The typed ids are made here, where raw JSON enters.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from dataclasses import MISSING
from typing import Any, Union, get_args, get_origin

from stackbot.domain.commands import MAX_PR_NUMBER
from stackbot.domain.types import PrNumber, RepoName
from stackbot.errors import BadInput


class PayloadFields:
    """Typed reads from one payload; each error names the task kind and the field."""

    def __init__(self, kind: str, payload: Mapping[str, Any]) -> None:
        if not isinstance(payload, Mapping):
            raise BadInput(f"a {kind} task's payload must be a JSON object, got {payload!r}")
        self.kind, self.payload = kind, payload

    def read(self, name: str, hint: Any, default: Any = MISSING) -> Any:
        """Field ``name`` as ``hint``, the type its payload class gives it.

        A missing or null value is ``default`` where the field has one (so is an empty string,
        where the default is a string), None where the type allows None, and an error otherwise.
        """
        kind, optional = _unwrap_optional(hint)
        if kind is bool:
            return self.flag(name, default=None if default is MISSING else default)
        value = self.payload.get(name)
        if default is not MISSING and (value is None or (value == "" and isinstance(default, str))):
            return default
        if value is None and optional:
            return None
        return _reader(kind)(self, name)

    def _fail(self, name: str, what: str) -> BadInput:
        got = self.payload.get(name, "nothing")
        return BadInput(f"a {self.kind} task needs {what} in '{name}', got {got!r}")

    def repo(self, name: str = "repo") -> RepoName:
        value = self.payload.get(name)
        if not isinstance(value, str) or value.count("/") != 1:
            raise self._fail(name, "'owner/name'")
        return RepoName(value)

    def text(self, name: str) -> str:
        value = self.payload.get(name)
        if not isinstance(value, str):
            raise self._fail(name, "a string")
        return value

    def whole(self, name: str) -> int:
        value = self.payload.get(name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._fail(name, "a whole number")
        return value

    def pr_number(self, name: str = "number") -> PrNumber:
        value = self.payload.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_PR_NUMBER:
            raise self._fail(name, f"a PR number from 1 to {MAX_PR_NUMBER}")
        return PrNumber(value)

    def pr_numbers(self, name: str) -> tuple[PrNumber, ...]:
        value = self.payload.get(name)
        if not isinstance(value, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in value
        ):
            raise self._fail(name, "a list of PR numbers")
        return tuple(PrNumber(n) for n in value)

    def flag(self, name: str, *, default: bool | None = None) -> bool:
        value = self.payload.get(name, default)
        if not isinstance(value, bool):
            raise self._fail(name, "true or false")
        return value


_READERS: dict[Any, Callable[[PayloadFields, str], Any]] = {
    RepoName: PayloadFields.repo,
    PrNumber: PayloadFields.pr_number,
    tuple[PrNumber, ...]: PayloadFields.pr_numbers,
    int: PayloadFields.whole,
    str: PayloadFields.text,
}


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    """``X | None`` → (X, True); any other type → (it, False)."""
    if get_origin(hint) not in (Union, types.UnionType):
        return hint, False
    others = [arg for arg in get_args(hint) if arg is not type(None)]
    if len(others) != 1:
        raise TypeError(f"a payload field must be one type or None, not {hint!r}")
    return others[0], True


def _reader(kind: Any) -> Callable[[PayloadFields, str], Any]:
    """The read for a field of type ``kind`` (a ``NewType`` without its own: its base type's)."""
    while kind not in _READERS:
        if not hasattr(kind, "__supertype__"):
            raise TypeError(f"a payload field of type {kind!r} has no reader")
        kind = kind.__supertype__
    return _READERS[kind]
